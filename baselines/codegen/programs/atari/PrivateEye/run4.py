# polar_bench codegen: atari/PrivateEye run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean 4000.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [13, 11, 8, 6, 2, 5]
    return actions[t % len(actions)]
