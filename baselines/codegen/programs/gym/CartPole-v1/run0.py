# polar_bench codegen: gym/CartPole-v1 run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean 12.5)
def act(observation):
    cart_position, cart_velocity, pole_angle, pole_angular_velocity = [float(v) for v in observation]
    if 0.95 * pole_angular_velocity > 1.0:
        return 1
    if 0.95 * pole_angular_velocity > 1.0:
        return 1
    return 0
