# polar_bench codegen: atari/RoadRunner run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 2650.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [2, 8, 9, 15, 16, 17]
    return actions[t % len(actions)]
