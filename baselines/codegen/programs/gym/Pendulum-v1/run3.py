# polar_bench codegen: gym/Pendulum-v1 run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean -1620.0545214433141)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    cos_theta, sin_theta, angular_velocity = [float(v) for v in observation]
    a0 = -1.5 * sin_theta + 0.3 * cos_theta + 2.16 * angular_velocity
    return [clip(a0)]
