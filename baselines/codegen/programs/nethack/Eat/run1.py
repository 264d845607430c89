# polar_bench codegen: nethack/Eat run 1 (LLM seed 1, 3 candidates x 2 rounds, training mean -4.864999999999941)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [12, 3, 2, 5, 4, 17]
    return actions[t % len(actions)]
