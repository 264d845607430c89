# polar_bench codegen: atari/UpNDown run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean 550.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [0]
    return actions[t % len(actions)]
