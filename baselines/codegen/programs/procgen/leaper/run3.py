# polar_bench codegen: procgen/leaper run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 0.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [0, 2, 4, 6, 8, 10]
    return actions[t % len(actions)]
