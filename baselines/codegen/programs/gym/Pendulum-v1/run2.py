# polar_bench codegen: gym/Pendulum-v1 run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean -1745.864355863413)
def clip(v):
    return max(-1.0, min(1.0, v))

def act(observation):
    cos_theta, sin_theta, angular_velocity = [float(v) for v in observation]
    a0 = -1.5 * angular_velocity + 0.3 * cos_theta
    return [clip(a0)]
