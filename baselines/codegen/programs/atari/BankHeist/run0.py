# polar_bench codegen: atari/BankHeist run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean 30.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [8, 9, 10, 11, 12, 13]
    return actions[t % len(actions)]
