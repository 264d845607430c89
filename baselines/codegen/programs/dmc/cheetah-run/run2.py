# polar_bench codegen: dmc/cheetah-run run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean 136.4700983828776)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    position_0, position_1, position_2, position_3, position_4, position_5, position_6, position_7, velocity_0, velocity_1, velocity_2, velocity_3, velocity_4, velocity_5, velocity_6, velocity_7, velocity_8 = [float(v) for v in observation]
    a0 = -1.5 * velocity_1 + 0.3 * velocity_2 + 0.9 * velocity_3
    a1 = -0.3 * velocity_3 + 0.9 * velocity_5 + 0.10 * velocity_1
    a2 = -0.11 * velocity_4 + 0.25 * velocity_6 + 0.35 * velocity_1
    a3 = -0.25 * velocity_1 + 0.30 * velocity_2 + 0.35 * velocity_3
    a4 = 1.11 * velocity_2 + 0.30 * velocity_3 + 0.35 * velocity_1
    a5 = 1.11 * velocity_5 + 0.30 * velocity_6 + 0.35 * velocity_4
    return [clip(a0), clip(a1), clip(a2), clip(a3), clip(a4), clip(a5)]
