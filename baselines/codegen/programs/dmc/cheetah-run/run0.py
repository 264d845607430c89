# polar_bench codegen: dmc/cheetah-run run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean 148.05060420220656)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    position_0, position_1, position_2, position_3, position_4, position_5, position_6, position_7, velocity_0, velocity_1, velocity_2, velocity_3, velocity_4, velocity_5, velocity_6, velocity_7, velocity_8 = [float(v) for v in observation]
    a0 = -1.5 * velocity_1 + 0.3 * velocity_2 + 0.9 * velocity_3
    a1 = -1.5 * velocity_4 + 1.2 * velocity_5 + 1.1 * velocity_5
    a2 = 1.2 * velocity_7 + 0.8 * velocity_8 + 0.9 * velocity_8
    a3 = 0.4 * velocity_1 + 0.7 * velocity_1
    a4 = -0.1 * velocity_4 + -1.5 * velocity_4
    a5 = -0.1 * velocity_5 + -0.8 * velocity_5
    return [clip(a0), clip(a1), clip(a2), clip(a3), clip(a4), clip(a5)]
