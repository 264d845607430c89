# polar_bench codegen: atari/Assault run 1 (LLM seed 1, 3 candidates x 2 rounds, training mean 430.5)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [1, 1, 1, 2, 2, 3]
    return actions[t % len(actions)]
