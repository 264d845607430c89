# polar_bench codegen: nethack/Gold run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean -3.539999999999956)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [21, 4, 7, 22, 22, 22]
    return actions[t % len(actions)]
