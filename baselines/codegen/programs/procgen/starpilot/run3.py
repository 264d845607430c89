# polar_bench codegen: procgen/starpilot run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 8.5)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [11, 12, 13, 14, 1, 2]
    return actions[t % len(actions)]
