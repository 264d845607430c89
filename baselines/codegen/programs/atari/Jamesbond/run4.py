# polar_bench codegen: atari/Jamesbond run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean 100.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [2, 12, 10, 11, 14, 15]
    return actions[t % len(actions)]
