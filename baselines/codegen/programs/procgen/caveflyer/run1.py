# polar_bench codegen: procgen/caveflyer run 1 (LLM seed 1, 3 candidates x 2 rounds, training mean 5.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [10, 2, 11, 12, 2, 13]
    return actions[t % len(actions)]
