# polar_bench codegen: gym/Pendulum-v1 run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean -1182.2957193549719)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    cos_theta, sin_theta, angular_velocity = [float(v) for v in observation]
    a0 = -1.5 * angular_velocity + 1.0 * angular_velocity + 0.5 * angular_velocity
    return [clip(a0)]
