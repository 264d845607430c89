# polar_bench codegen: procgen/chaser run 1 (LLM seed 1, 3 candidates x 2 rounds, training mean 0.47999998927116394)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [0]
    return actions[t % len(actions)]
