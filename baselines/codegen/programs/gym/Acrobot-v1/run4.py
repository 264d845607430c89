# polar_bench codegen: gym/Acrobot-v1 run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean -500.0)
def act(observation):
    cos_theta1, sin_theta1, cos_theta2, sin_theta2, theta1_angular_velocity, theta2_angular_velocity = [float(v) for v in observation]
    if cos_theta1 < 0.05:
        return 1
    if cos_theta2 > 0.1:
        return 0
    return 2
