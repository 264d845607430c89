# polar_bench codegen: atari/BankHeist run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 50.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [13, 14, 15, 17, 16, 17]
    return actions[t % len(actions)]
