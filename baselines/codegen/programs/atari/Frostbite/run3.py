# polar_bench codegen: atari/Frostbite run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 40.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [2, 4, 6, 8, 10, 12]
    return actions[t % len(actions)]
