# polar_bench codegen: procgen/maze run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean 0.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [0, 0, 0, 0, 0, 0]
    return actions[t % len(actions)]
