# polar_bench codegen: atari/Breakout run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean 2.5)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [1, 1, 2, 3, 2, 2]
    return actions[t % len(actions)]
