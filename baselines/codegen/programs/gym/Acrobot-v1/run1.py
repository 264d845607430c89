# polar_bench codegen: gym/Acrobot-v1 run 1 (LLM seed 1, 3 candidates x 2 rounds, training mean -500.0)
def act(observation):
    cos_theta1, sin_theta1, cos_theta2, sin_theta2, theta1_angular_velocity, theta2_angular_velocity = [float(v) for v in observation]
    if 0.75 * theta1_angular_velocity + 0.3 * cos_theta1 > 0.75:
        return 1
    return 0
