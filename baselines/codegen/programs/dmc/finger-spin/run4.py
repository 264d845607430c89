# polar_bench codegen: dmc/finger-spin run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean 0.0)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    position_0, position_1, position_2, position_3, velocity_0, velocity_1, velocity_2, touch_0, touch_1 = [float(v) for v in observation]
    a0 = 1.15 * velocity_0 + 0.3 * velocity_1 + 0.3 * velocity_2
    a1 = -0.5 * velocity_1 + 1.0 * velocity_2
    return [clip(a0), clip(a1)]
