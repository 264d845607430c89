# polar_bench codegen: gym/CartPole-v1 run 1 (LLM seed 1, 3 candidates x 2 rounds, training mean 40.0)
def act(observation):
    cart_position, cart_velocity, pole_angle, pole_angular_velocity = [float(v) for v in observation]
    if cart_position < 0.01:
        return 1
    if cart_position < 1.4:
        return 0
    return 1
