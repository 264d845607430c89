# polar_bench codegen: atari/BattleZone run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean 1000.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [0, 0, 2, 3, 2, 3]
    return actions[t % len(actions)]
