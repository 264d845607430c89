# polar_bench codegen: procgen/bigfish run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean 1.5)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [11, 12, 13, 14]
    return actions[t % len(actions)]
