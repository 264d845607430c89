# polar_bench codegen: dmc/cartpole-swingup run 1 (LLM seed 1, 3 candidates x 2 rounds, training mean 64.70578404410813)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    position_0, position_1, position_2, velocity_0, velocity_1 = [float(v) for v in observation]
    a0 = -1.5 * velocity_1 + 0.3 * velocity_0
    return [clip(a0)]
