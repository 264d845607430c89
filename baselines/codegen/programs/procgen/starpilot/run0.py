# polar_bench codegen: procgen/starpilot run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean 3.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [11, 12, 13, 14, 1, 10]
    return actions[t % len(actions)]
