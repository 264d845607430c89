# polar_bench codegen: procgen/jumper run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 5.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [11, 2, 4, 3, 10]
    return actions[t % len(actions)]
