"""Print the search records: per (task, run) the chosen program's training return and the LLM usage.

    python -m baselines.codegen.summarize [--programs DIR] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .search import PROGRAMS


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m baselines.codegen.summarize")
    p.add_argument("--programs", default=str(PROGRAMS))
    args = p.parse_args(argv)
    rows = [json.loads(f.read_text()) for f in sorted(Path(args.programs).glob("**/run*.json"))]
    print("| task | run | training mean (best) | valid programs | LLM calls | prompt + completion tokens "
          "| LLM s | search s |")
    print("|---|---|---|---|---|---|---|---|")
    tot = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0, "search": 0.0}
    for r in rows:
        u = r["llm"]
        ok = sum(t["error"] is None for t in r["tried"])
        mean = r["train"]["mean"]
        print(f"| {r['task']} | {r['run']} | {mean:.1f} | {ok}/{len(r['tried'])} | {u['calls']} | "
              f"{u['prompt_tokens']} + {u['completion_tokens']} | {u['seconds']:.1f} | {r['search_seconds']:.1f} |")
        for k in ("calls", "prompt_tokens", "completion_tokens", "seconds"):
            tot[k] += u[k]
        tot["search"] += r["search_seconds"]
    print(f"| **total** | | | | {tot['calls']} | {tot['prompt_tokens']} + {tot['completion_tokens']} | "
          f"{tot['seconds']:.0f} | {tot['search']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
