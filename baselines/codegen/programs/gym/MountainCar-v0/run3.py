# polar_bench codegen: gym/MountainCar-v0 run 3 (LLM seed 3, 3 candidates x 2 rounds, training mean -200.0)
def act(observation):
    car_position, car_velocity = [float(v) for v in observation]
    if car_position < 0.0:
        return 0
    if car_velocity < 0.0:
        return 1
    return 2
