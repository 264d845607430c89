# polar_bench codegen: atari/ChopperCommand run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean 700.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [17, 17, 2, 14, 13, 15]
    return actions[t % len(actions)]
