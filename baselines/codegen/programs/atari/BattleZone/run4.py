# polar_bench codegen: atari/BattleZone run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean 4000.0)
t = 0


def reset(seed):
    global t
    t = 0


def act(observation):
    global t
    t += 1
    actions = [10, 2, 5, 4, 8, 5]
    return actions[t % len(actions)]
