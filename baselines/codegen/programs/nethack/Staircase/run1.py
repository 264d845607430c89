# polar_bench codegen: nethack/Staircase run 1 (LLM seed 1, 3 candidates x 2 rounds, training mean -3.3149999999999564)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [12, 13, 14, 15, 16, 17]
    return actions[t % len(actions)]
