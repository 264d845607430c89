# polar_bench codegen: dmc/cheetah-run run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean 105.70110240390895)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    position_0, position_1, position_2, position_3, position_4, position_5, position_6, position_7, velocity_0, velocity_1, velocity_2, velocity_3, velocity_4, velocity_5, velocity_6, velocity_7, velocity_8 = [float(v) for v in observation]
    a0 = -1.5 * velocity_2 + 0.3 * velocity_4
    a1 = 0.3 * velocity_1 + 0.3 * velocity_5 + 0.3 * velocity_6
    a2 = 1.0 * velocity_2 + 1.0 * velocity_4 + 1.0 * velocity_5
    a3 = 2.0 * velocity_3 + 2.0 * velocity_6 + 2.0 * velocity_7
    a4 = 3.0 * velocity_4 + 3.0 * velocity_5 + 3.0 * velocity_6
    a5 = 4.0 * velocity_8 + 4.0 * velocity_7 + 4.0 * velocity_8
    return [clip(a0), clip(a1), clip(a2), clip(a3), clip(a4), clip(a5)]
