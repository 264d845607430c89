# polar_bench codegen: nethack/Eat run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean -4.094999999999943)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [12, 15, 18, 16, 19, 22]
    return actions[t % len(actions)]
