# polar_bench codegen: dmc/cartpole-swingup run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 75.69435809693499)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    position_0, position_1, position_2, velocity_0, velocity_1 = [float(v) for v in observation]
    a0 = -1.5 * position_0 + 1.3 * position_1 + 1.3 * position_2
    return [clip(a0)]
