# polar_bench codegen: nethack/Staircase run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean -6.229999999999912)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [0, 1, 2, 4, 6, 8]
    return actions[t % len(actions)]
