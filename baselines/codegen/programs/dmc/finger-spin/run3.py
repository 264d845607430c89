# polar_bench codegen: dmc/finger-spin run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 0.0)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    position_0, position_1, position_2, position_3, velocity_0, velocity_1, velocity_2, touch_0, touch_1 = [float(v) for v in observation]
    a0 = -1.5 * touch_0 + 0.3 * touch_1 + 0.3 * touch_0
    a1 = 1.5 * touch_1 + 2.29 * touch_0
    return [clip(a0), clip(a1)]
