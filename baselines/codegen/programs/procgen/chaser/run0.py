# polar_bench codegen: procgen/chaser run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean 0.5799999870359898)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [0, 1, 2, 4, 6, 7]
    return actions[t % len(actions)]
