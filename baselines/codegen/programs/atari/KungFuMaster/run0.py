# polar_bench codegen: atari/KungFuMaster run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean 5500.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [11, 12, 13, 1, 2, 3]
    return actions[t % len(actions)]
