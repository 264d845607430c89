# polar_bench codegen: atari/Qbert run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean 0.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [1, 1, 2, 1, 2]
    return actions[t % len(actions)]
