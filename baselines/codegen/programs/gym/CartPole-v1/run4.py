# polar_bench codegen: gym/CartPole-v1 run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean 9.0)
def act(observation):
    cart_position, cart_velocity, pole_angle, pole_angular_velocity = [float(v) for v in observation]
    if 0.58 * cart_velocity > 0.85:
        return 1
    if 0.73 * pole_angle > 1.57:
        return 0
    return 1
