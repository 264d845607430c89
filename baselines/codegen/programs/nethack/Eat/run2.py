# polar_bench codegen: nethack/Eat run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean -5.1649999999999245)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [12, 15, 17, 21, 22]
    return actions[t % len(actions)]
