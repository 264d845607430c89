# polar_bench codegen: gym/MountainCar-v0 run 4 (LLM seed 4, 3 candidates x 2 rounds, training mean -200.0)
def act(observation):
    car_position, car_velocity = [float(v) for v in observation]
    if car_position < 1.5:
        return 2
    return 2
