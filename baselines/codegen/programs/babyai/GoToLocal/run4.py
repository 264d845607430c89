# polar_bench codegen: babyai/GoToLocal run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean 0.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [0, 0, 1, 2, 3, 4]
    return actions[t % len(actions)]
