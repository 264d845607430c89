# polar_bench codegen: nethack/StaircasePet run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean -1.1599999999999984)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [1, 1, 3, 5, 10, 15]
    return actions[t % len(actions)]
