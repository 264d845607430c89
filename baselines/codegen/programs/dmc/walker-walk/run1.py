# polar_bench codegen: dmc/walker-walk run 1 (LLM seed 1, 3 candidates x 2 rounds, training mean 95.63918822201931)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    orientations_0, orientations_1, orientations_2, orientations_3, orientations_4, orientations_5, orientations_6, orientations_7, orientations_8, orientations_9, orientations_10, orientations_11, orientations_12, orientations_13, height, velocity_0, velocity_1, velocity_2, velocity_3, velocity_4, velocity_5, velocity_6, velocity_7, velocity_8 = [float(v) for v in observation]
    a0 = -1.5 * velocity_0 + 0.3 * velocity_1 + 1.5 * velocity_2
    a1 = -1.5 * height + 0.3 * velocity_3 + 2.75 * velocity_4
    a2 = -1.5 * height + 0.3 * velocity_5 + 3.87 * velocity_6
    a3 = -1.5 * height + 0.3 * velocity_7 + 5.31 * velocity_8
    a4 = -1.5 * height + 0.3 * velocity_8 + 6.65 * velocity_8
    a5 = -1.5 * height + 0.3 * velocity_8 + 7.87 * velocity_8
    return [clip(a0), clip(a1), clip(a2), clip(a3), clip(a4), clip(a5)]
