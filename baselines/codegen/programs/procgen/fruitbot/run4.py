# polar_bench codegen: procgen/fruitbot run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean 1.5)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [1, 10, 2, 4, 12, 2]
    return actions[t % len(actions)]
