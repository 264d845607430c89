# polar_bench codegen: procgen/starpilot run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean 1.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [11, 12, 13, 14, 14]
    return actions[t % len(actions)]
