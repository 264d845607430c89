"""Train a Stable-Baselines3 PPO model on a polar_bench harness (the harness is a plain gymnasium.Env).

    python examples/train_sb3.py --task gym/CartPole-v1 --run 0 --steps 50000

The model lands in examples/models/ (or --out-dir), where examples/sb3_agent.py finds it.
"""

import argparse
from pathlib import Path

import polar_bench


def model_path(out_dir: Path, task_id: str, run: int) -> Path:
    return Path(out_dir) / f"sb3_ppo_{task_id.replace('/', '_')}_run{run}.zip"


def main(argv=None):
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="gym/CartPole-v1")
    p.add_argument("--run", type=int, default=0, help="the run index; also the training seed")
    p.add_argument("--steps", type=int, default=50_000)
    p.add_argument("--out-dir", default=str(Path(__file__).parent / "models"))
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # small networks: threads only add contention
    env = make_vec_env(lambda: polar_bench.make(args.task), n_envs=4, seed=args.run)
    model = PPO("MlpPolicy", env, seed=args.run, device="cpu", verbose=0)
    model.learn(total_timesteps=args.steps)
    path = model_path(Path(args.out_dir), args.task, args.run)
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(path)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
