# polar_bench codegen: nethack/Scout run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean 60.6249999999996)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [2, 4, 8, 10, 11, 14]
    return actions[t % len(actions)]
