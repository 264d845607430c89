# polar_bench codegen: gym/MountainCar-v0 run 1 (LLM seed 1, 3 candidates x 2 rounds, training mean -200.0)
def act(observation):
    car_position, car_velocity = [float(v) for v in observation]
    if 0.56 * car_position + car_velocity < 1.5:
        return 1
    if car_position + car_velocity < 0.56:
        return 2
    return 1
