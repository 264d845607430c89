# polar_bench codegen: procgen/fruitbot run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean 1.5)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [10, 5, 3, 1, 2, 0]
    return actions[t % len(actions)]
