# polar_bench codegen: gym/CartPole-v1 run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean 53.5)
def act(observation):
    cart_position, cart_velocity, pole_angle, pole_angular_velocity = [float(v) for v in observation]
    if 0.00 * cart_position + 0.57 * cart_velocity > 0.00:
        return 0
    if 1.00 * cart_position + 2.00 * cart_velocity > 1.0:
        return 1
    return 1
