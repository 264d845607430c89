"""`artifacts publish` and `artifacts check`: an agent's pinned files and the content-addressed store
(polar_bench/artifacts.py; docs/artifacts.md)."""

from __future__ import annotations

import argparse

from ..errors import UserError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("artifacts", help="publish an agent's pinned files to an artifact store, or check them",
                       description="The files an agent's artifacts.json pins by SHA-256 (checkpoints, models).")
    asub = p.add_subparsers(dest="artifacts_command", metavar="ACTION")
    pub = asub.add_parser("publish", help="copy every pinned file on this disk into a content-addressed store",
                          description="Copy every file of the agent's manifest that is on this disk with its "
                                      "pinned SHA-256 into the store, named by that SHA-256, so that verifiers "
                                      "fetch it instead of rebuilding it. A file with other bytes is an error.")
    pub.add_argument("agent", help="the agent file whose artifacts.json (or <stem>.artifacts.json) lists the files")
    pub.add_argument("--store", metavar="URL", help="a folder or an fsspec URL (s3://..., hf://...; default: "
                                                    "$POLAR_BENCH_ARTIFACT_STORE, else the user's cache)")
    pub.set_defaults(func=publish_command)
    chk = asub.add_parser("check", help="check (fetch, or rebuild) the pinned files an agent needs",
                          description="What verify does first: every pinned file is hashed; a missing one is "
                                      "fetched from the store, else rebuilt by its recipe (locked down).")
    chk.add_argument("agent", help="the agent file")
    chk.add_argument("--store", metavar="URL", help="as for publish")
    chk.add_argument("--no-rebuild", action="store_true", help="fetch missing files but rebuild none")
    chk.add_argument("--workers", type=int, default=1, metavar="N",
                     help="recipes run at once when files must be rebuilt (default: %(default)s; each of this "
                          "project's retrains uses one core and about 3 GiB)")
    chk.set_defaults(func=check_command)

    def usage(args: argparse.Namespace) -> int:  # no ACTION given
        p.print_help()
        return 2

    p.set_defaults(func=usage)


def publish_command(args: argparse.Namespace) -> int:
    from ..artifacts import publish_artifacts

    rows = publish_artifacts(args.agent, args.store, log=lambda _: None)
    counts = {k: sum(r["status"] == k for r in rows) for k in ("stored", "present", "missing")}
    print(f"{counts['stored']} stored, {counts['present']} already there, {counts['missing']} not on this disk "
          "(rebuild them first: python -m polar_bench artifacts check AGENT)")
    return 0


def check_command(args: argparse.Namespace) -> int:
    from ..artifacts import ensure_artifacts, load_manifest

    if load_manifest(args.agent) is None:
        raise UserError(f"{args.agent} declares no artifacts (no artifacts.json beside it)")
    if args.workers < 1:
        raise UserError(f"--workers must be at least 1; got {args.workers}")
    rows = ensure_artifacts(args.agent, None, rebuild=not args.no_rebuild, store=args.store, workers=args.workers)
    counts = {k: sum(r["status"] == k for r in rows) for k in ("checked", "fetched", "rebuilt")}
    print(f"{len(rows)} pinned files: {counts['checked']} checked, {counts['fetched']} fetched, "
          f"{counts['rebuilt']} rebuilt")
    return 0
