# polar_bench codegen: nethack/StaircasePet run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean -6.159999999999913)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [10, 20, 21, 22, 22, 22]
    return actions[t % len(actions)]
