# polar_bench codegen: dmc/cartpole-swingup run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean 123.13137359676742)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    position_0, position_1, position_2, velocity_0, velocity_1 = [float(v) for v in observation]
    a0 = -1.5 * velocity_1 + 3.6 * velocity_1 + 4.4 * velocity_1
    return [clip(a0)]
