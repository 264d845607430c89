# polar_bench codegen: gym/MountainCar-v0 run 0 (LLM seed 0, 3 candidates x 2 rounds, training mean -200.0)
def act(observation):
    car_position, car_velocity = [float(v) for v in observation]
    if 0.00 * car_position < 0.00:
        return 1
    if 1.00 * car_velocity + car_velocity > 1.00:
        return 0
    return 1
