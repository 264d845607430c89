# polar_bench codegen: nethack/StaircasePet run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean -1.9449999999999814)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [2, 3, 5, 7, 8, 9]
    return actions[t % len(actions)]
