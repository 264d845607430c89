# polar_bench codegen: gym/Pendulum-v1 run 1 (LLM seed 1, 3 candidates x 2 rounds, training mean -1564.1950771691077)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    cos_theta, sin_theta, angular_velocity = [float(v) for v in observation]
    a0 = 1.5 * sin_theta + 0.3 * angular_velocity + 0.04 * cos_theta
    return [clip(a0)]
