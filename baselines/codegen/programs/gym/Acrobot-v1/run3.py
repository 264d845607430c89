# polar_bench codegen: gym/Acrobot-v1 run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean -500.0)
def act(observation):
    cos_theta1, sin_theta1, cos_theta2, sin_theta2, theta1_angular_velocity, theta2_angular_velocity = [float(v) for v in observation]
    if 0.13 * theta1_angular_velocity + 2.33 * theta2_angular_velocity > 0.27:
        return 0
    if 0.99 * theta2_angular_velocity > 1.39:
        return 1
    return 0
