# polar_bench codegen: dmc/cartpole-swingup run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean 90.07246303738421)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    position_0, position_1, position_2, velocity_0, velocity_1 = [float(v) for v in observation]
    a0 = -1.5 * position_0 + 0.3 * position_1
    return [clip(a0)]
