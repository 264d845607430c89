# polar_bench codegen: nethack/Scout run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 148.87999999999985)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [10, 22, 12, 3, 13, 5]
    return actions[t % len(actions)]
