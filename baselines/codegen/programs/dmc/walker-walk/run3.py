# polar_bench codegen: dmc/walker-walk run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 56.017766982756875)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    orientations_0, orientations_1, orientations_2, orientations_3, orientations_4, orientations_5, orientations_6, orientations_7, orientations_8, orientations_9, orientations_10, orientations_11, orientations_12, orientations_13, height, velocity_0, velocity_1, velocity_2, velocity_3, velocity_4, velocity_5, velocity_6, velocity_7, velocity_8 = [float(v) for v in observation]
    a0 = -1.5 * height + 0.3 * height + 0.3 * height
    a1 = -0.68 * height + 0.43 * height + 1.83 * height
    a2 = -1.67 * height + 2.95 * height + 2.91 * height
    a3 = -2.5 * height + 2.95 * height + 2.91 * height
    a4 = -0.68 * height + 1.41 * height + 2.46 * height
    a5 = -0.68 * height + 0.85 * height + 2.89 * height
    return [clip(a0), clip(a1), clip(a2), clip(a3), clip(a4), clip(a5)]
