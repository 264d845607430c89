# polar_bench codegen: dmc/reacher-easy run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 0.0)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    position_0, position_1, to_target_0, to_target_1, velocity_0, velocity_1 = [float(v) for v in observation]
    a0 = -1.5 * velocity_0 + 0.3 * velocity_1
    a1 = -1.5 * position_0 + 1.5 * position_1
    return [clip(a0), clip(a1)]
