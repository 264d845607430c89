"""`evaluate`: run an agent file on a suite."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from ..errors import OptionError, UserError


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="run an agent on a suite and write a results file",
                       description="Run agent.py on every (task, run, episode seed) of a suite, in parallel, "
                                   "journalling each finished episode so that an interrupted run resumes.")
    p.add_argument("agent", help="the agent file (defines make_agent(task, run))")
    p.add_argument("--suite", default="v1", help="suite name or .toml path (default: v1)")
    p.add_argument("--tasks", nargs="+", metavar="GLOB", help="only task ids matching these globs, e.g. 'gym/*'")
    p.add_argument("--domains", nargs="+", metavar="DOMAIN", help="only these domains")
    p.add_argument("--runs", type=int, help="independently trained instances to evaluate (default: the suite's)")
    p.add_argument("--episodes", type=int, help="episodes per (task, run), overriding the suite (non-standard)")
    p.add_argument("--workers", type=int, help="worker processes or Ray actors (default: all cores, or all "
                                                 "of the Ray cluster's CPUs)")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local worker processes (default) or Ray actors (pip install \"polar_bench[ray]\")")
    p.add_argument("--envs-per-worker", type=int, default=8, metavar="K",
                   help="episodes each worker plays at once, stepped together (default 8): one request to the "
                        "agent process per step for all of them (act_batch where the agent has it); results do "
                        "not depend on K")
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
                   help="agent processes per worker (default 1): lane i is served by process i %% N, so with "
                        "cores to spare the agent computes N lane groups' actions at once; results do not "
                        "depend on it, memory does (N times the agent's)")
    p.add_argument("--agent-network", action="store_true",
                   help="let the agent process use the host's network (for an LLM endpoint the agent calls); "
                        "recorded in the results. Without it the agent process has no network at all")
    p.add_argument("--llm-endpoint", metavar="URL",
                   help="an LLM endpoint the agent may call (e.g. http://127.0.0.1:8080/v1): inside its network "
                        "namespace the agent reaches it at 127.0.0.1 on the same port, forwarded by the worker; "
                        "nothing else is reachable")
    p.add_argument("--llm-upstream", metavar="URL",
                   help="where the LLM proxy in front of the agent (its OPENAI_BASE_URL) forwards calls: an "
                        "OpenAI-compatible base URL (e.g. http://127.0.0.1:8080/v1) or 'embedded' (default: the "
                        "SmolLM2 that polar_bench serves, started at the first call); calls are counted per "
                        "episode (docs/llm.md)")
    p.add_argument("--no-llm-proxy", action="store_true",
                   help="run without the LLM proxy: the agent process reaches no LLM server (an agent may still "
                        "run a model in its own process); its LLM use is then what the agent reports")
    p.add_argument("--llm-budget", metavar="calls=N,tokens=M",
                   help="per-episode LLM budget enforced by the proxy (over it: HTTP 429, and the episode ends "
                        "agent_error 'LLM budget exceeded'); replaces the suite's [llm] budget (non-standard)")
    p.add_argument("--trajectories", metavar="DIR",
                   help="write each episode's LLM calls, token level, with its return, as "
                        "DIR/<family>__<name>/run<R>-ep<I>.jsonl (schema in docs/llm.md)")
    p.add_argument("--retry-failed", action="store_true",
                   help="play again the episodes the journal holds as failed (after fixing their cause, with the "
                        "same agent file); the results count each episode's attempts")
    p.add_argument("--fresh-seeds", nargs="?", type=int, const=-1, metavar="ENTROPY",
                   help="play the suite's protocol on fresh seeds instead of the published ones, to measure "
                        "overfitting to them before submitting (results marked, never an entry); the seeds come "
                        "from ENTROPY, else from the journal being resumed, else from the OS")
    p.add_argument("--artifact-store", metavar="URL",
                   help="fetch the pinned files the agent's artifacts.json declares and this disk lacks from this "
                        "content-addressed store: a folder or an fsspec URL; 'none' for no store (default: "
                        "$POLAR_BENCH_ARTIFACT_STORE, else the user's cache)")
    p.add_argument("--harness-plugin", action="append", default=[], metavar="FILE",
                   help="a trusted Python file imported in the evaluation workers before any harness is made, "
                        "e.g. one that registers a harness family (results marked non-standard); repeatable")
    p.set_defaults(func=run)


# EvalConfig's fields as the command line names them (errors of `EvalConfig.check` are reworded with these)
FLAGS = {"runs": "--runs", "episodes_override": "--episodes", "workers": "--workers",
         "envs_per_worker": "--envs-per-worker", "agent_memory_mb": "--agent-memory", "agent_disk_mb": "--agent-disk",
         "agent_threads": "--agent-threads", "agent_processes": "--agent-processes", "in_process": "--in-process",
         "address": "--address", "backend": "--backend", "step_timeout": "--step-timeout",
         "episode_timeout": "--episode-timeout"}


def run(args) -> int:
    from ..evaluate import EvalConfig, run_evaluation
    from ..suite import load_suite

    endpoint = None
    if args.llm_endpoint:
        from urllib.parse import urlsplit

        parts = urlsplit(args.llm_endpoint if "//" in args.llm_endpoint else "http://" + args.llm_endpoint)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            port = None
        if not parts.hostname or not port:
            raise UserError(f"--llm-endpoint {args.llm_endpoint!r} names no host and port; give a URL such as "
                            f"http://127.0.0.1:8080/v1")
        endpoint = (parts.hostname, port)
    suite = load_suite(args.suite)
    tasks = suite.select(args.tasks, args.domains)
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
    eps = data["episodes"]
    bad = [e for e in eps if e["status"] != "ok"]
    if fresh is not None:
        print(f"note: fresh seeds (entropy {fresh_entropy}), not the suite's: these results measure generalisation "
              "and cannot be submitted; the same command resumes them")
    if args.in_process:
        print("note: --in-process: the agent ran inside the evaluation workers; these results cannot be submitted")
    from .. import analysis, report

    agent = analysis.agent_scores(data)  # the data just written: nothing to read back
    print(f"{len(eps)} episodes on {len(tasks)} tasks x {cfg.runs} runs -> {args.out}"
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
    return code


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
