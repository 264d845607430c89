# polar_bench codegen: atari/Breakout run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean 3.5)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [1, 2, 3, 1, 3]
    return actions[t % len(actions)]
