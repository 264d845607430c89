# polar_bench codegen: nethack/Scout run 1 (LLM seed 1, 3 candidates x 2 rounds, training mean 62.08999999999716)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [11, 12, 13, 14, 15, 16]
    return actions[t % len(actions)]
