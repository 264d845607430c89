"""`evaluate`: run an agent file on a suite."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import OptionError, UserError
from ..suite import DEFAULT_SUITE

if TYPE_CHECKING:  # imported where used, so that other commands start without them
    from ..results import ResultsFile
    from ..suite import Suite


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("evaluate", help="run an agent on a suite and write a results file",
                       description="Run agent.py on every (task, run, episode seed) of a suite, in parallel, "
                                   "journalling each finished episode so that an interrupted run resumes.")
    p.add_argument("agent", help="the agent file (defines make_agent(task, run))")
    p.add_argument("--suite", default=DEFAULT_SUITE, help=f"suite name or .toml path (default: {DEFAULT_SUITE})")
    p.add_argument("--tasks", nargs="+", metavar="GLOB", help="only task ids matching these globs, e.g. 'gym/*'")
    p.add_argument("--domains", nargs="+", metavar="DOMAIN", help="only these domains")
    p.add_argument("--runs", type=int, help="independently trained instances to evaluate (default: the suite's)")
    p.add_argument("--episodes", type=int, help="episodes per (task, run), overriding the suite (non-standard)")
    p.add_argument("--workers", type=int, help="worker processes or Ray actors (default: all cores, or all "
                                                 "of the Ray cluster's CPUs)")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local worker processes (default) or Ray actors (pip install \"polar_bench[ray]\")")
    p.add_argument("--envs-per-worker", type=int, default=8, metavar="K",
                   help="episodes each worker plays at once, stepped together (default 8); results do not "
                        "depend on K (docs/evaluate.md)")
    p.add_argument("--address", help="with --backend ray: 'auto' or ray://HOST:PORT of an existing cluster "
                                     "(default: start Ray on this machine)")
    p.add_argument("--out", default="results.json", help="results file (default: results.json); the journal is "
                                                        "<out stem>.episodes.jsonl beside it")
    p.add_argument("--step-timeout", type=float, default=60.0, help="seconds one act() may take (default 60; 0: none)")
    p.add_argument("--episode-timeout", type=float, default=1800.0,
                   help="seconds one episode may take (default 1800; 0: none)")
    p.add_argument("--allow-version-mismatch", action="store_true",
                   help="run even if installed versions differ from the suite's pins (results not comparable)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress output (default: a bar on a terminal, a line every 10 s otherwise)")
    _agent_process_options(p)
    _llm_options(p)
    p.add_argument("--retry-failed", action="store_true",
                   help="play again the episodes the journal holds as failed (after fixing their cause, with the "
                        "same agent file); the results count each episode's attempts")
    p.add_argument("--fresh-seeds", nargs="?", type=int, const=-1, metavar="ENTROPY",
                   help="play the suite's protocol on fresh seeds, not the published ones, to measure overfitting "
                        "to them (results marked, never an entry; docs/evaluate.md, 'Fresh seeds')")
    p.add_argument("--artifact-store", metavar="URL",
                   help="the store to fetch missing pinned files of the agent from: a folder, an fsspec URL or "
                        "'none' (default: $POLAR_BENCH_ARTIFACT_STORE, else the user's cache; docs/artifacts.md)")
    p.add_argument("--harness-plugin", action="append", default=[], metavar="FILE",
                   help="a trusted Python file imported in the evaluation workers before any harness is made, "
                        "e.g. one that registers a harness family (results marked non-standard); repeatable")
    p.set_defaults(func=run)


def _agent_process_options(p: argparse.ArgumentParser) -> None:
    """How the agent process runs: in the workers for debugging, or locked down with these limits."""
    p.add_argument("--in-process", action="store_true",
                   help="debugging only: import the agent into the evaluation workers instead of a locked-down "
                        "process of its own; the results are marked not submittable")
    p.add_argument("--agent-memory", type=int, metavar="MIB",
                   help="memory of each agent process and everything it starts, together, in MiB (default 8192; "
                        "also each process's address-space limit). Over it the episode ends agent_error")
    p.add_argument("--agent-disk", type=int, metavar="MIB",
                   help="size of each agent process's private folder (its HOME and TMPDIR) in MiB (default 1024); "
                        "over it the agent's writes fail")
    p.add_argument("--agent-threads", type=int, default=1, metavar="N",
                   help="threads of torch, OpenMP, MKL and OpenBLAS in each agent process (default 1). The "
                        "count changes floating-point results, so it is recorded and verify re-runs with it")
    p.add_argument("--agent-processes", type=int, default=1, metavar="N",
                   help="agent processes per worker, acting for their lanes at once (default 1); results do not "
                        "depend on N, memory does (docs/evaluate.md)")
    p.add_argument("--agent-network", action="store_true",
                   help="let the agent process use the host's network (for an LLM endpoint the agent calls); "
                        "recorded in the results. Without it the agent process has no network at all")


def _llm_options(p: argparse.ArgumentParser) -> None:
    """What LLM the agent reaches, through the LLM proxy or not, and what is counted and written of its calls."""
    p.add_argument("--llm-endpoint", metavar="URL",
                   help="an LLM endpoint the agent may call (e.g. http://127.0.0.1:8080/v1), at 127.0.0.1 on the "
                        "same port; nothing else is reachable (docs/evaluate.md)")
    p.add_argument("--llm-upstream", metavar="URL",
                   help="where the LLM proxy (the agent's OPENAI_BASE_URL) forwards calls: an OpenAI-compatible "
                        "base URL, or 'embedded' (default: polar_bench's SmolLM2; docs/llm.md)")
    p.add_argument("--no-llm-proxy", action="store_true",
                   help="run without the LLM proxy: the agent process reaches no LLM server (an agent may still "
                        "run a model in its own process); its LLM use is then what the agent reports")
    p.add_argument("--llm-budget", metavar="calls=N,tokens=M",
                   help="per-episode LLM budget enforced by the proxy (over it: HTTP 429, and the episode ends "
                        "agent_error 'LLM budget exceeded'); replaces the suite's [llm] budget (non-standard)")
    p.add_argument("--trajectories", metavar="DIR",
                   help="write each episode's LLM calls, token level, with its return, as "
                        "DIR/<family>__<name>/run<R>-ep<I>.jsonl (schema in docs/llm.md)")


# EvalConfig's fields as the command line names them (errors of `EvalConfig.check` are reworded with these)
FLAGS = {"runs": "--runs", "episodes_override": "--episodes", "workers": "--workers",
         "envs_per_worker": "--envs-per-worker", "agent_memory_mb": "--agent-memory", "agent_disk_mb": "--agent-disk",
         "agent_threads": "--agent-threads", "agent_processes": "--agent-processes", "in_process": "--in-process",
         "address": "--address", "backend": "--backend", "step_timeout": "--step-timeout",
         "episode_timeout": "--episode-timeout"}


def run(args: argparse.Namespace) -> int:
    from ..evaluate import EvalConfig, run_evaluation
    from ..suite import load_suite

    endpoint = _llm_endpoint(args.llm_endpoint)
    suite = load_suite(args.suite)
    tasks = suite.select(args.tasks, args.domains)
    upstream, budget = _llm_proxy_settings(args, suite)
    fresh_entropy, fresh = None, None
    if args.fresh_seeds is not None:
        from ..generalization import draw_fresh_seeds

        fresh_entropy, fresh = draw_fresh_seeds(tasks, args.episodes, _fresh_entropy(args.fresh_seeds, args.out))
    cfg = EvalConfig(
        suite=suite, agent_path=args.agent, out=args.out, tasks=tasks,
        runs=suite.runs if args.runs is None else args.runs, episodes_override=args.episodes,
        workers=args.workers if args.workers is not None else (None if args.backend == "ray" else os.cpu_count() or 1),
        backend=args.backend, address=args.address, envs_per_worker=args.envs_per_worker,
        step_timeout=args.step_timeout or None, episode_timeout=args.episode_timeout or None,
        allow_version_mismatch=args.allow_version_mismatch, progress=False if args.no_progress else None,
        in_process=args.in_process, agent_memory_mb=args.agent_memory, agent_disk_mb=args.agent_disk,
        agent_network=args.agent_network,
        agent_threads=args.agent_threads, agent_processes=args.agent_processes,
        llm_endpoint=endpoint,
        llm_upstream=upstream, llm_budget=budget, trajectories=args.trajectories,
        standard=not args.llm_budget,
        harness_plugins=tuple(args.harness_plugin), fresh_seeds=fresh, fresh_entropy=fresh_entropy,
        retry_failed=args.retry_failed,
        command=" ".join(shlex.quote(a) for a in ["python", "-m", "polar_bench"] + args.argv),
    )
    try:
        cfg.check()  # the library's one check of the settings, in the words of the command line
    except OptionError as exc:
        raise exc.in_words_of(FLAGS) from None
    if Path(args.agent).is_file():
        from ..artifacts import fetch_missing_artifacts

        fetch_missing_artifacts(args.agent, [(t.id, r) for t in tasks for r in range(cfg.runs)],
                                store=args.artifact_store)
    data, code = run_evaluation(cfg)
    _print_outcome(args, data, len(tasks), cfg.runs, fresh_entropy)
    return code


def _llm_endpoint(url: str | None) -> tuple[str, int] | None:
    """--llm-endpoint as (host, port), or None when not given."""
    if not url:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(url if "//" in url else "http://" + url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    if not parts.hostname or not port:
        raise UserError(f"--llm-endpoint {url!r} names no host and port; give a URL such as "
                        f"http://127.0.0.1:8080/v1")
    return parts.hostname, port


def _llm_proxy_settings(args: argparse.Namespace, suite: Suite) -> tuple[str | None, dict | None]:
    """The LLM proxy's upstream (None: no proxy) and per-episode budget, after checking that the LLM
    options agree with each other."""
    budget = dict(suite.llm) if suite.llm else None
    if args.llm_budget:
        from ..llm.proxy import parse_budget

        try:
            budget = parse_budget(args.llm_budget).to_json()
        except ValueError as exc:
            raise UserError(str(exc)) from None
    upstream = args.llm_upstream
    if args.no_llm_proxy:
        if upstream or args.trajectories or args.llm_budget:
            raise UserError("--no-llm-proxy turns off what --llm-upstream, --trajectories and --llm-budget need; "
                            "drop one side")
    elif upstream is None and not args.llm_endpoint:
        upstream = "embedded"
    if upstream is not None and upstream != "embedded" and not upstream.startswith(("http://", "https://")):
        raise UserError(f"--llm-upstream {upstream!r} is not an http(s) URL; give one such as "
                        f"http://127.0.0.1:8080/v1, or 'embedded'")
    if upstream is not None and args.llm_endpoint:
        raise UserError("--llm-endpoint and the LLM proxy exclude each other: the proxy forwards to --llm-upstream; "
                        "pass --llm-upstream URL instead of --llm-endpoint")
    if upstream is None and (args.trajectories or budget):
        what = "--trajectories" if args.trajectories else "the LLM budget" + (
            "" if args.llm_budget else f" of suite {suite.name} ([llm] table)")
        fix = "drop --no-llm-proxy" if args.no_llm_proxy else "pass --llm-upstream URL instead of --llm-endpoint"
        raise UserError(f"{what} needs the LLM proxy; {fix}")
    return upstream, budget


def _print_outcome(args: argparse.Namespace, data: ResultsFile, n_tasks: int, runs: int,
                   fresh_entropy: int | None) -> None:
    """What the evaluation gave: the notes, the failures by cause with the commands that follow up on
    them, and the score table. ``fresh_entropy``: the draw of fresh seeds, None on the suite's seeds."""
    from ..results import Status

    eps = data.episodes
    bad = [e for e in eps if e.status is not Status.OK]
    if fresh_entropy is not None:
        print(f"note: fresh seeds (entropy {fresh_entropy}), not the suite's: these results measure generalisation "
              "and cannot be submitted; the same command resumes them")
    if args.in_process:
        print("note: --in-process: the agent ran inside the evaluation workers; these results cannot be submitted")
    from .. import analysis, report

    agent = analysis.agent_scores(data)  # the data just written: nothing to read back
    print(f"{len(eps)} episodes on {n_tasks} tasks x {runs} runs -> {args.out}"
          + (f"; {len(bad)} failed:" if bad else ""))
    if bad:  # by cause, the most common first, as score prints them
        summary = analysis.error_summary(agent)
        for m in summary["messages"]:
            print(f"  {m['count']}x {m['status']}: {m['message']}")
        shown = sum(m["count"] for m in summary["messages"])
        print(f"  every failure, by task: python -m polar_bench score {shlex.quote(args.out)}"
              + (f" ({len(bad) - shown} more not shown above)" if len(bad) > shown else ""))
        print("  fix the cause, then play the failed episodes again: the same command with --retry-failed "
              "(a changed agent file starts the evaluation afresh)")
    scopes = analysis.aggregate(agent)
    print(report.score_table(agent.label, scopes, confidence=0.95, reps=analysis.scoring.AGGREGATE_REPS,
                             digits=3).to_text(), end="")
    if bad:
        print(f"score with the failed episodes left out: python -m polar_bench score {args.out} --allow-incomplete")


def _fresh_entropy(given: int, out: str) -> int | None:
    """--fresh-seeds' entropy: the value given, else that of the journal being resumed, else None (OS)."""
    if given >= 0:
        return given
    from ..evaluate.config import journal_path

    try:
        with open(journal_path(out), encoding="utf-8") as fh:
            header = json.loads(fh.readline())
    except (OSError, ValueError):
        return None
    entropy = (header.get("identity") or {}).get("fresh_entropy") if isinstance(header, dict) else None
    return entropy if isinstance(entropy, int) else None
