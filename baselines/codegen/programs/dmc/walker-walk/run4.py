# polar_bench codegen: dmc/walker-walk run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean 44.83696628467109)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    orientations_0, orientations_1, orientations_2, orientations_3, orientations_4, orientations_5, orientations_6, orientations_7, orientations_8, orientations_9, orientations_10, orientations_11, orientations_12, orientations_13, height, velocity_0, velocity_1, velocity_2, velocity_3, velocity_4, velocity_5, velocity_6, velocity_7, velocity_8 = [float(v) for v in observation]
    a0 = -1.5 * height + 0.3 * height
    a1 = 0.62 * height + 0.11 * height
    a2 = 0.92 * height + 0.48 * height
    a3 = 1.0 * height + 1.43 * height
    a4 = 2.29 * height + 0.61 * height
    a5 = 3.15 * height + 2.14 * height
    return [clip(a0), clip(a1), clip(a2), clip(a3), clip(a4), clip(a5)]
