"""`new-harness`: scaffold a harness family (file, registration, conformance test) for an environment."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "new-harness", help="scaffold a harness family for a Gymnasium id or an environment class",
        description="Write a plugin package with a harness family for SOURCE (a Gymnasium id such as CartPole-v1, "
                    "or module:Class), its entry-point registration and its conformance test. Then: "
                    "pip install -e OUT && python -m pytest -q OUT/tests")
    p.add_argument("source", help="a registered Gymnasium id, or an import path module:Class")
    p.add_argument("--out", default=None, help="folder to write (default: ./polar_bench_<family>)")
    p.add_argument("--family", default=None, help="the task-id prefix (default: from SOURCE, e.g. cartpole)")
    p.add_argument("--task", default=None, help="the task name (default: the Gymnasium id, or 'default')")
    p.add_argument("--max-episode-steps", type=int, default=None,
                   help="the step limit (default: the registration's, else 1000)")
    p.add_argument("--llm", action="store_true",
                   help="let the project's LLM client (embedded SmolLM2 unless POLAR_BENCH_LLM_* say otherwise) "
                        "draft the description and the names used by the text rendering")
    p.add_argument("--force", action="store_true", help="overwrite files that exist")
    p.set_defaults(func=new_harness)


def new_harness(args: argparse.Namespace) -> int:
    from ..errors import UserError
    from ..scaffold import scaffold

    if args.max_episode_steps is not None and args.max_episode_steps < 1:
        raise UserError(f"--max-episode-steps must be a positive integer, got {args.max_episode_steps}")
    client = None
    if args.llm:
        from ..llm import make_client

        client = make_client()
    draft, paths = scaffold(args.source, args.out, family=args.family, task=args.task,
                            max_episode_steps=args.max_episode_steps, llm=client, force=args.force)
    out = paths[0].parent
    print(f"wrote the {draft.family} family ({draft.family}/{draft.task}):")
    for path in paths:
        print(f"  {path}")
    print(f"next: review the drafts in {paths[0].name}, then\n  pip install -e {out}\n"
          f"  python -m pytest -q {out}/tests")
    return 0
