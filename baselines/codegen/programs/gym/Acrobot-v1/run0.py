# polar_bench codegen: gym/Acrobot-v1 run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean -160.5)
def act(observation):
    cos_theta1, sin_theta1, cos_theta2, sin_theta2, theta1_angular_velocity, theta2_angular_velocity = [float(v) for v in observation]
    if 0.99 * theta1_angular_velocity + 1.0 * cos_theta1 > 1.0:
        return 0
    if 1.0 * sin_theta1 + 0.04 * cos_theta1 > 1.0:
        return 1
    return 1
