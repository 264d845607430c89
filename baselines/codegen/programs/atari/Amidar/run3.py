# polar_bench codegen: atari/Amidar run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 17.5)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [0, 2, 4, 6, 8, 1]
    return actions[t % len(actions)]
