"""`thermostat/<task>`: ThermostatEnv as a polar_bench family (docs/harnesses.md, "Adapters in minutes")."""

from thermostat_env import ThermostatEnv

import polar_bench
from polar_bench import Component
from polar_bench.harness.adapter import GymnasiumAdapter


class ThermostatHarness(GymnasiumAdapter):
    family = "thermostat"
    tasks = {"mild": lambda: ThermostatEnv(outside=12.0), "cold": lambda: ThermostatEnv(outside=-10.0)}
    description = ("Keep a room at 21 degrees C by switching a heater off, low or high while the room "
                   "drifts towards the outside temperature. Reward: -|room - 21| per step.")
    observation_names = (Component("room temperature", unit="deg C"),
                         Component("outside temperature", unit="deg C"))
    action_names = ("heater off", "heater low", "heater high")
    reward_range = (-71.0, 0.0)
    max_episode_steps = 200
    package = "gymnasium"  # the package whose version is recorded: here, the example's only dependency


polar_bench.register_family("thermostat", ThermostatHarness)
