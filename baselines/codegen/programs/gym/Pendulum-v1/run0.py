# polar_bench codegen: gym/Pendulum-v1 run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean -999.8632451714655)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    cos_theta, sin_theta, angular_velocity = [float(v) for v in observation]
    a0 = -1.5 * cos_theta + 1.15 * sin_theta + 0.16 * angular_velocity
    return [clip(a0)]
