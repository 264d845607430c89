"""`suites`, `describe` and `validate`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import UserError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("suites", help="list the available suites")
    p.set_defaults(func=list_suites)
    p = sub.add_parser("describe", help="show a suite's tasks, constants and sources")
    p.add_argument("suite", help="suite name or .toml path")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=describe)
    p = sub.add_parser("validate", help="check a suite file or a results file without running anything")
    p.add_argument("file", help="a suite (.toml) or results (.json) file")
    p.set_defaults(func=validate)


def list_suites(args: argparse.Namespace) -> int:
    from ..suite import available_suites, load_suite

    for name, path in available_suites().items():
        s = load_suite(path)
        print(f"{name:8s} version {s.version:8s} {len(s.tasks):3d} tasks in {len(s.domains)} domains  "
              f"{s.hash[:19]}  {path}")
    return 0


def describe(args: argparse.Namespace) -> int:
    from ..suite import load_suite

    s = load_suite(args.suite)
    if args.json:
        print(json.dumps({**s.summary_json(), "path": s.path}, indent=1))
        return 0
    from ..leaderboard.checks import released_suites

    shipped = s.hash in released_suites()
    when = (f"released {s.released}" if s.released and shipped else
            "released; its file gives no date" if shipped else "not released: a suite file outside polar_bench")
    print(f"suite {s.name} version {s.version} ({when})")
    print(f"hash {s.hash}")
    print(f"{s.description}\n")
    print(f"runs (minimum for a standard submission): {s.runs}; suite seed {s.seed}")
    print("pinned versions: " + ", ".join(f"{k}=={v}" for k, v in s.pins.items()))
    for d in s.domains:
        tasks = [t for t in s.tasks if t.domain == d.name]
        print(f"\n[{d.name}] {d.description}")
        print(f"  training protocol: {d.training}")
        print(f"  recommended budget: {d.budget}")
        for t in tasks:
            opts = f" options {t.options}" if t.options else ""
            print(f"  {t.id:32s} {t.episodes:3d} episodes{opts}")
            for label, ref in (("low ", t.low), ("high", t.high)):
                kind = "measured here" if ref.measured else "published"
                print(f"      {label} {ref.value:>10.4g}  ({kind}) {ref.source}")
    return 0


def validate(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        from ..suite import available_suites

        suites = available_suites()
        if args.file not in suites:
            raise UserError(f"{args.file!r} does not exist; pass a suite name ({', '.join(suites)}), "
                            f"a suite .toml or a results .json file")
        path = suites[args.file]
    if path.suffix == ".toml":
        from ..suite import load_suite

        s = load_suite(path)
        from .. import harness

        problems = []
        for t in s.tasks:
            prefix, name = t.id.split("/", 1)
            try:
                known = harness.task_names(prefix)
            except UserError as exc:
                problems.append(f"{t.id}: {exc}")
                continue
            if name not in known:
                problems.append(f"{t.id}: unknown task")
                continue
            try:
                harness.check_options(t.id, t.options)
            except UserError as exc:  # HarnessOptionError, or a family package that is not installed
                problems.append(str(exc))
        if problems:
            raise UserError(f"{path}: " + "; ".join(problems))
        print(f"ok: suite {s.name} version {s.version}, {len(s.tasks)} tasks, hash {s.hash}")
        return 0
    from ..results import read_results

    r = read_results(path)
    counts = r.status_counts()
    print(f"ok: results format {r.format_version}, suite {r.suite.name} ({r.suite.hash[:19]}), "
          f"agent {r.agent_name}, {len(r.episodes)} episodes ("
          + ", ".join(f"{k} {v}" for k, v in counts.items() if v) + ")")
    return 0
