# polar_bench codegen: gym/MountainCar-v0 run 2 (LLM seed 2, 3 candidates x 2 rounds, training mean -200.0)
def act(observation):
    car_position, car_velocity = [float(v) for v in observation]
    if 0.56 * car_velocity > 0.00:
        return 0
    if 0.55 * car_velocity > 0.01:
        return 0
    return 0
