# polar_bench codegen: nethack/Gold run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean -5.36499999999993)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [10, 2, 1, 0, 6, 11]
    return actions[t % len(actions)]
