# polar_bench codegen: atari/Amidar run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean 28.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [8, 1, 1, 8, 1, 1]
    return actions[t % len(actions)]
