# polar_bench codegen: dmc/ball_in_cup-catch run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 497.5)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    position_0, position_1, position_2, position_3, velocity_0, velocity_1, velocity_2, velocity_3 = [float(v) for v in observation]
    a0 = -1.5 * position_1 + 0.3 * position_1 + 0.5 * position_2
    a1 = -1.5 * position_2 + 0.3 * position_2 + 1.0 * position_3
    return [clip(a0), clip(a1)]
