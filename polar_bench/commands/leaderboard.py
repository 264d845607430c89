"""`submit`, `verify` and `leaderboard build`: from a results file to a ranked, published entry
(SUBMISSION.md for submitters, docs/leaderboard.md for maintainers)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from .. import scoring
from ..errors import UserError

if TYPE_CHECKING:  # the leaderboard package is imported only by the commands that use it
    from ..leaderboard import Problem, RankingOptions


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("submit", help="check a results file and add it to the leaderboard",
                       description="Run every check of SUBMISSION.md on a results file; when it passes, add it "
                                   "to the leaderboard folder as a content-addressed entry. A rejection lists "
                                   "every problem found and exits with code 2.")
    p.add_argument("results", help="the results .json written by 'python -m polar_bench evaluate'")
    p.add_argument("--leaderboard", default="leaderboard", metavar="DIR",
                   help="the leaderboard folder (default: %(default)s)")
    p.add_argument("--date", default=None, help="submission date YYYY-MM-DD (default: today, UTC)")
    p.add_argument("--max-problems", type=int, default=20, metavar="N",
                   help="problems listed per check before a count of the rest (0: all; default: %(default)s)")
    p.add_argument("--check-only", action="store_true", help="run the checks, add nothing")
    p.set_defaults(func=submit_command)
    _register_verify(sub)
    _register_leaderboard(sub)


def _register_verify(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("verify", help="re-run an unpredictable sample of a submission's episodes and compare them",
                       description="Re-run an unpredictable sample of a results file's episodes with its agent "
                                   "file and compare them, and play fresh seeds to test the generalisation gap "
                                   "(SUBMISSION.md, 'How verification works'). Exit code 0: verified; 1: failed; "
                                   "2: user error or not verifiable.")
    p.add_argument("results", help="the submitted results .json (or its copy in the leaderboard folder)")
    p.add_argument("--agent", required=True, help="the agent file that was evaluated (same SHA-256)")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="episodes drawn uniformly (default: the fewest that meet the guarantee); one episode of "
                        "every task missed is added")
    p.add_argument("--allow-weaker", action="store_true",
                   help="accept a --sample below the guarantee's; the weaker probability is recorded")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the sample, to redo a past verification exactly (default: fresh OS entropy)")
    p.add_argument("--tasks", nargs="+", default=None, metavar="GLOB",
                   help="sample only episodes of tasks matching these globs (e.g. 'gym/*')")
    p.add_argument("--tolerance", type=float, default=None,
                   help="largest accepted |Δ return| / (high - low) per episode (default: 0, exact, for "
                        "deterministic agents; 0.05 when AGENT_INFO says 'deterministic': False)")
    p.add_argument("--no-rebuild", action="store_true",
                   help="do not rebuild missing artifacts (artifacts.json); stop instead")
    p.add_argument("--no-fresh-seeds", action="store_true",
                   help="skip the fresh-seed check (every task and run played on seeds drawn for this "
                        "verification, compared with the published-seed scores per domain); recorded as not done")
    p.add_argument("--artifact-store", metavar="URL",
                   help="the store to fetch missing artifacts from before rebuilding them: a folder, an fsspec URL "
                        "or 'none' (default: $POLAR_BENCH_ARTIFACT_STORE, else the user's cache; docs/artifacts.md)")
    p.add_argument("--workers", type=int, default=2, help="worker processes, and recipes run at once when artifacts "
                                                        "must be rebuilt (default: %(default)s)")
    p.add_argument("--llm-upstream", metavar="URL",
                   help="the OpenAI-compatible upstream behind the LLM proxy that the re-run agent runs behind "
                        "(default: 'embedded', the SmolLM2 served by polar_bench, started at its first call)")
    p.add_argument("--leaderboard", default="leaderboard", metavar="DIR",
                   help="the leaderboard folder whose entry records the outcome (default: %(default)s)")
    p.add_argument("--restart", action="store_true",
                   help="do not resume an interrupted verification of the same file, agent and options (by "
                        "default it goes on with its seed and finished episodes); draw a new sample")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress output (default: a bar on a terminal, a line every 10 s otherwise)")
    p.set_defaults(func=verify_command)


def _register_leaderboard(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("leaderboard", help="build the leaderboard's tables and static site",
                       description="Leaderboard maintenance.")
    lsub = p.add_subparsers(dest="leaderboard_command", metavar="ACTION")
    b = lsub.add_parser("build", help="write README.md, LaTeX/CSV tables, leaderboard.json and site/",
                        description="Rank the entries of a leaderboard folder and write README.md (Markdown "
                                    "table), leaderboard-<suite>.{md,tex,csv}, leaderboard.json and the static "
                                    "site site/index.html with its assets and plots.")
    b.add_argument("dir", nargs="?", default=None, help="the leaderboard folder (default: leaderboard)")
    b.add_argument("--leaderboard", metavar="DIR", help="the same, spelled as submit and verify spell it")
    b.add_argument("--no-plots", action="store_true", help="no plots (no matplotlib needed)")
    stats_options(b)
    b.set_defaults(func=build_command)

    def usage(args: argparse.Namespace) -> int:  # no ACTION given
        p.print_help()
        return 2

    p.set_defaults(func=usage)


def stats_options(p: argparse.ArgumentParser) -> None:
    """The statistics of the leaderboard (defaults equal to report's, so tables reproduce)."""
    g = p.add_argument_group("statistics")
    g.add_argument("--reps", type=int, default=scoring.AGGREGATE_REPS,
                   help="bootstrap replicates of the IQM intervals (default: %(default)s)")
    g.add_argument("--poi-reps", type=int, default=scoring.PROFILE_REPS,
                   help="replicates of the probability of improvement (default: %(default)s)")
    g.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: %(default)s)")
    g.add_argument("--confidence", type=float, default=0.95, help="interval coverage (default: %(default)s)")
    g.add_argument("--digits", type=int, default=3, help="decimals in the tables (default: %(default)s)")


def ranking_options(args: argparse.Namespace) -> RankingOptions:
    from ..leaderboard import RankingOptions

    for name in ("reps", "poi_reps"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1; got {getattr(args, name)}")
    if not 0 < args.confidence < 1:
        raise UserError(f"--confidence must be strictly between 0 and 1; got {args.confidence}")
    if args.seed < 0:
        raise UserError(f"--seed must be a non-negative integer; got {args.seed}")
    if not 0 <= args.digits <= 10:
        raise UserError(f"--digits must be between 0 and 10; got {args.digits}")
    return RankingOptions(reps=args.reps, poi_reps=args.poi_reps, seed=args.seed, confidence=args.confidence,
                          digits=args.digits)


def print_problems(path: str, problems: list[Problem], limit: int, data: Any = None) -> None:
    """The root cause first (`checks.root_cause`), then each check's problems, ``limit`` per check."""
    from ..leaderboard import CHECKS
    from ..leaderboard.checks import root_cause

    cause = root_cause(data)
    if cause:
        print(f"error: {path} is {cause}", file=sys.stderr)
    print(f"{'' if cause else 'error: '}{path} was rejected: {len(problems)} problem(s); fix them and run evaluate "
          f"again (SUBMISSION.md explains every check)", file=sys.stderr)
    for check in ("file", *CHECKS):
        mine = [p for p in problems if p.check == check]
        shown = mine if limit <= 0 else mine[:limit]
        for p in shown:
            print(f"  {p}", file=sys.stderr)
        if len(mine) > len(shown):
            print(f"  [{check}] ... and {len(mine) - len(shown)} more {check} problem(s) "
                  f"(--max-problems 0 lists all)", file=sys.stderr)


def _print_retried(data: dict | None) -> None:
    again = [e for e in (data or {}).get("episodes", []) if isinstance(e, dict) and (e.get("attempts") or 1) > 1]
    if again:
        print(f"note: {len(again)} episode(s) were played again after a failure (evaluate --retry-failed); "
              "each records its attempts, and the leaderboard's entry page shows their number")


def submit_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..leaderboard import SubmissionRejected, check_submission, submit

    if not Path(args.results).is_file():
        raise UserError(f"results file {args.results!r} does not exist; pass the .json that "
                        "'python -m polar_bench evaluate ... --out' wrote")
    if args.check_only:  # every check a real submit runs, the duplicate check included
        from ..leaderboard.entries import duplicate_of

        data, problems = check_submission(args.results)
        if problems:
            print_problems(args.results, problems, args.max_problems, data)
            return 2
        duplicate = duplicate_of(data or {}, args.leaderboard, args.results)
        if duplicate is not None:
            raise UserError(duplicate)
        print(f"{args.results}: every check passed; 'submit' without --check-only would add it to "
              f"{args.leaderboard}")
        _print_retried(data)
        return 0
    try:
        entry = submit(args.results, args.leaderboard, date=args.date)
    except SubmissionRejected as exc:
        from ..results import read_results

        try:
            data = read_results(exc.path).to_json()
        except Exception:  # noqa: BLE001 - a file too broken to read has its problems listed anyway
            data = None
        print_problems(exc.path, exc.problems, args.max_problems, data)
        return 2
    print(f"accepted: {entry.name} is entry {entry.id} in {entry.folder}; run "
          f"'python -m polar_bench leaderboard build {args.leaderboard}' to update the tables and the site")
    _print_retried(entry.results().to_json())
    return 0


def verify_command(args: argparse.Namespace) -> int:
    from ..leaderboard import verify

    if args.workers < 1:
        raise UserError(f"--workers must be at least 1; got {args.workers}")
    record, entry = verify(args.results, args.agent, args.sample, seed=args.seed, leaderboard=args.leaderboard,
                           tolerance=args.tolerance, tasks=args.tasks, workers=args.workers,
                           progress=False if args.no_progress else None, allow_weaker=args.allow_weaker,
                           rebuild=not args.no_rebuild, llm_upstream=args.llm_upstream,
                           artifact_store=args.artifact_store, fresh_seeds=not args.no_fresh_seeds,
                           restart=args.restart)
    how = "" if record["mode"] == "exact" else f" within {record['tolerance']} (normalized score)"
    for row in record["episodes"]:
        if not row["match"]:
            differs = f"; differs in {', '.join(row['differs'])}" if row.get("differs") else ""
            print(f"  mismatch: {row['task']} run {row['run']} seed {row['seed']} (by {row['compared_by']}): "
                  f"submitted return {row['submitted_return']!r}, re-run {row['rerun_return']!r} "
                  f"({row['rerun_status']}){differs}")
    g = record["guarantee"]
    verdict = "verified" if record["passed"] else "FAILED"
    by = ", ".join(f"{n} by {k}" for k, n in record["compared_by"].items() if n)
    print(f"{verdict}: {record['matched']} of {record['sample']} sampled episodes (of {record['population']}; "
          f"{record['tasks_covered']} of {record['tasks_total']} tasks) reproduced{how} ({by}); seed {record['seed']}")
    if record["tasks"]:
        print(f"note: only tasks matching {' '.join(record['tasks'])} were sampled ({record['population']} of "
              f"{record['episodes_total']} episodes); the guarantee is about those")
    print(f"guarantee: {g['fraction']:.0%} altered episodes would have been caught with probability "
          f"{g['achieved_probability']:.4f}" + ("" if g["met"] else f" (weaker than the stated {g['probability']})"))
    for note in record["notes"]:
        print(f"note: {note}")
    fresh = record.get("generalization")
    if fresh is None:
        print("note: no fresh-seed check (--no-fresh-seeds): a seed-detecting agent would not be caught")
    else:
        print(f"fresh seeds: {fresh['episodes_per_task_run']} episodes per task and run on seeds drawn from "
              f"{fresh['entropy']}; " + ("no domain scores significantly above its fresh-seed score" if fresh["passed"]
                                        else "FAILED, published-seed score significantly above the fresh one:"))
        for line in fresh["reasons"]:
            print(f"  {line}")
    if entry is not None:
        print(f"recorded on entry {entry.id} ({entry.folder / 'verification.json'}); run "
              f"'python -m polar_bench leaderboard build {args.leaderboard}' to publish it")
    else:
        print(f"note: these results are not an entry of {args.leaderboard}; the outcome was not recorded")
    return 0 if record["passed"] else 1


def build_command(args: argparse.Namespace) -> int:
    from ..leaderboard import build

    if args.leaderboard_command != "build":
        raise UserError("say what to do: 'python -m polar_bench leaderboard build [DIR]'")
    if args.dir and args.leaderboard and args.dir != args.leaderboard:
        raise UserError(f"two leaderboard folders given ({args.dir} and --leaderboard {args.leaderboard}); "
                        "give one")
    folder = args.dir or args.leaderboard or "leaderboard"
    paths = build(folder, ranking_options(args), plots=not args.no_plots)
    print(f"wrote {len(paths)} files into {folder}: README.md, the tables, leaderboard.json and "
          f"site/index.html")
    return 0
