# polar_bench codegen: atari/KungFuMaster run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean 1300.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [1, 3, 5, 6, 8, 9]
    return actions[t % len(actions)]
