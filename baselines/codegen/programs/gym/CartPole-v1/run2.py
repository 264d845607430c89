# polar_bench codegen: gym/CartPole-v1 run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean 9.0)
def act(observation):
    cart_position, cart_velocity, pole_angle, pole_angular_velocity = [float(v) for v in observation]
    if 0.00 * cart_position < 2.00:
        return 0
    if 0.57 * cart_velocity + 0.00 * pole_angular_velocity < 3.5:
        return 0
    return 0
