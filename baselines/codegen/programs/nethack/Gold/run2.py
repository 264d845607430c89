# polar_bench codegen: nethack/Gold run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean -4.624999999999946)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [10, 11, 12, 13, 14, 15]
    return actions[t % len(actions)]
