# polar_bench codegen: procgen/climber run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean 0.5)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [1, 3, 5, 7, 9, 11]
    return actions[t % len(actions)]
