# polar_bench codegen: babyai/PickupLoc run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 0.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [1, 2, 3, 4, 5, 6]
    return actions[t % len(actions)]
