"""Does the same controller work across physics engines? One open-loop gait on mujoco/<X>-v5 and bullet/<X>.

    python scripts/cross_engine.py [--tasks HalfCheetah,Ant] [--seeds 3] [--steps 1000]

The controller is defined in physical units, once per morphology: each actuated joint gets the torque
``amplitude * max torque in MuJoCo * sin(2 pi f t + phase)`` with the time ``t`` in simulated seconds,
so it means the same thing on both engines even though their control periods differ (MuJoCo's per-task
``dt``, PyBullet's 0.0165 s). Joints are matched by name; each engine's action is that torque divided by
its own maximum torque for the joint (clipped to the action range), which is where the engines'
torque scales differ (docs/families/bullet.md lists them). Printed per engine and task: the mean
return (each engine's own reward, so not comparable across engines), the forward distance of the torso
in metres and the forward speed (distance per simulated second), which is.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import polar_bench  # noqa: E402

TASKS = ["HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid"]
FREQUENCY = 1.5  # Hz
AMPLITUDE = 0.6  # of the joint's maximum torque in MuJoCo


def mujoco_joints(harness) -> tuple[list[str], np.ndarray, np.ndarray, float]:
    """Actuated joint names in action order, their maximum torques, the control scale, and dt."""
    import mujoco

    env = harness._env.unwrapped  # noqa: SLF001 - the model's actuators are not in the TaskInfo
    model = env.model
    names, torques, scale = [], [], []
    for i in range(model.nu):
        joint = int(model.actuator_trnid[i, 0])
        names.append(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, joint))
        high = float(model.actuator_ctrlrange[i, 1])
        torques.append(float(model.actuator_gear[i, 0]) * high)
        scale.append(high)
    return names, np.array(torques), np.array(scale), float(env.dt)


def bullet_joints(harness) -> tuple[list[str], np.ndarray, float]:
    names = [c.name for c in harness.task_info.action_components]
    torques = np.array([float(c.description.split("maximum ")[1].split(" ")[0]) for c in
                        harness.task_info.action_components])
    return names, torques, 0.0165  # pybullet_envs' WalkerBase: 4 substeps of 0.0165 / 4 s


def _key(name: str) -> str:
    return name.removesuffix("_joint")


def run(task: str, seeds: int, steps: int) -> list[str]:
    mj = polar_bench.make(f"mujoco/{task}-v5", max_episode_steps=steps)
    bu = polar_bench.make(f"bullet/{task}", max_episode_steps=steps)
    m_names, m_torque, _, m_dt = mujoco_joints(mj)
    b_names, b_torque, b_dt = bullet_joints(bu)
    by_key = {_key(n): i for i, n in enumerate(m_names)}
    missing = [n for n in b_names if _key(n) not in by_key]
    if missing:
        return [f"{task}: joints without a MuJoCo counterpart: {missing}"]
    order = [by_key[_key(n)] for n in b_names]  # bullet action i drives MuJoCo actuator order[i]
    phases = np.linspace(0.0, 2 * np.pi, len(m_names), endpoint=False)
    lines = []
    for engine, harness, dt in (("mujoco", mj, m_dt), ("bullet", bu, b_dt)):
        returns, distances, speeds = [], [], []
        for seed in range(seeds):
            harness.reset(seed=seed)
            x0 = _torso_x(engine, harness)
            total, t = 0.0, 0
            while True:
                torque = AMPLITUDE * m_torque * np.sin(2 * np.pi * FREQUENCY * t * dt + phases)
                if engine == "mujoco":
                    action = torque / m_torque
                else:
                    action = torque[order] / b_torque
                _, reward, terminated, truncated, _ = harness.step(np.clip(action, -1, 1).astype(np.float32))
                total += reward
                t += 1
                if terminated or truncated:
                    break
            distance = _torso_x(engine, harness) - x0
            returns.append(total)
            distances.append(distance)
            speeds.append(distance / (t * dt))
        lines.append(f"{task:12s} {engine:7s} return {statistics.fmean(returns):9.1f}   distance "
                     f"{statistics.fmean(distances):7.2f} m   speed {statistics.fmean(speeds):6.3f} m/s   "
                     f"({t} steps of {dt:.4f} s in the last episode)")
    mj.close()
    bu.close()
    return lines


def _torso_x(engine: str, harness) -> float:
    if engine == "mujoco":
        return float(harness._env.unwrapped.data.qpos[0])  # noqa: SLF001
    return float(harness._env.robot.body_xyz[0])  # noqa: SLF001


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=1000)
    args = p.parse_args()
    for task in args.tasks.split(","):
        for line in run(task, args.seeds, args.steps):
            print(line, flush=True)


if __name__ == "__main__":
    main()
