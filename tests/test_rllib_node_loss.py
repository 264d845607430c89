"""A whole node lost mid-training: baselines/rllib on a 3-node `ray.cluster_utils.Cluster` (a head
without CPUs, so that every env runner lives on one of the two worker nodes), the node of an env
runner removed after the first iteration, and the run finishing on the surviving node through
RLlib's fault tolerance (``restart_failed_env_runners``, set by `build_config`)."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.rllib")

from baselines.rllib.train import RunConfig, build_config, train  # noqa: E402 - after the skip


@pytest.mark.slow
def test_node_lost_mid_training_and_the_run_finishes(tmp_path):
    from ray.cluster_utils import Cluster

    cfg = RunConfig(task="gym/CartPole-v1", algorithm="ppo", steps=3000, num_envs=2, num_workers=2, eval_every=0,
                    settings={"train_batch_size_per_learner": 500})
    ft = build_config(cfg).to_dict()
    assert ft["restart_failed_env_runners"] and ft["max_num_env_runner_restarts"] >= 1
    ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    workers = [cluster.add_node(num_cpus=1), cluster.add_node(num_cpus=1)]
    try:
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        cluster.wait_for_nodes()
        seen: dict = {"placements": [], "restarts": []}

        def lose_a_node(algo, result):
            group = algo.env_runner_group
            placement = group.foreach_env_runner(lambda runner: ray.get_runtime_context().get_node_id(),
                                                 local_env_runner=False)
            seen["placements"].append(placement)
            if "lost" not in seen:
                doomed = next(n for n in workers if n.node_id in placement)
                cluster.remove_node(doomed)
                seen["lost"] = doomed.node_id
            seen["restarts"].append(group.num_remote_worker_restarts())

        summary = train(cfg, tmp_path, on_iteration=lose_a_node)
        assert "lost" in seen and summary["steps"] >= cfg.steps
        assert seen["lost"] not in {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert max(seen["restarts"]) >= 1, "RLlib did not restart the env runner of the lost node"
        last = seen["placements"][-1]
        assert len(last) == cfg.num_workers and seen["lost"] not in last, \
            "the env runners did not all come back on the surviving node"
    finally:
        ray.shutdown()
        cluster.shutdown()
