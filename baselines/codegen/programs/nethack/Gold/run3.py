# polar_bench codegen: nethack/Gold run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean -1.47)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [11, 12, 13, 14, 15, 16]
    return actions[t % len(actions)]
