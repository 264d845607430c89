# polar_bench codegen: atari/Seaquest run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean 0.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [10, 11, 12, 13, 14, 15]
    return actions[t % len(actions)]
