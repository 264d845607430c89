# polar_bench codegen: atari/ChopperCommand run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 550.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [17, 12, 10, 10, 11, 12]
    return actions[t % len(actions)]
