# polar_bench codegen: nethack/Staircase run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean -0.9750000000000006)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [10, 11, 12, 13, 14, 15]
    return actions[t % len(actions)]
