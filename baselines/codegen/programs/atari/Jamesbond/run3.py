# polar_bench codegen: atari/Jamesbond run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 75.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [13, 2, 2, 0, 0, 13]
    return actions[t % len(actions)]
