# polar_bench codegen: atari/Qbert run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean 137.5)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [1, 2, 3, 4, 5]
    return actions[t % len(actions)]
