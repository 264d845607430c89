#!/usr/bin/env bash
# Stage the suite-v2 evaluations of PPO and LLM+PPO on atari100k game by game, so that the work can be
# spread over several sessions or machines without losing any of it:
#
#     baselines/ppo/stage_v2_atari.sh Hero Jamesbond ...        (no argument: all 26 games)
#
# For each game, in the order given: its 5 runs are trained by one `sweep` (2 workers, niced, into
# runs/ppo-atari100k; runs already there are skipped), taken in with `rebuild --adopt` (an already
# pinned run must come back with its manifest's SHA-256, or the script stops), then both agents
# play the game on suite v2 into their journals, which are committed:
#     baselines/ppo/results/v2-journal/ppo-v2.episodes.jsonl
#     baselines/llm_ppo/results/v2-journal/llm_ppo-v2.episodes.jsonl
# The Atari checkpoints (6.5 MB each) are git-ignored, so a game is evaluated while its checkpoints
# are on disk; its episodes then stay in the journal. The final evaluation is the usual command with
# the same --out (docs/evaluate.md: a journal of fewer tasks is extended, its episodes kept):
#     python -m polar_bench evaluate baselines/ppo/agent.py --suite v2 --workers 1 \
#         --out baselines/ppo/results/v2-journal/ppo-v2.json
# A change to the agent file or the suite makes the journal refuse the evaluation (it records their
# SHA-256); a change to a harness's dynamics would not be caught here but by `verify`, which re-runs a
# sample: after such a change, delete the journals and stage again.
set -euo pipefail
cd "$(dirname "$0")/../.."
SWEEP_DIR=runs/ppo-atari100k
EXPERIMENT=runs/stage-v2-atari.yaml
mkdir -p runs baselines/ppo/results/v2-journal baselines/llm_ppo/results/v2-journal

GAMES=$(python - "$EXPERIMENT" "$@" <<'EOF'
import re, sys
from pathlib import Path
out, games = sys.argv[1], sys.argv[2:]
src = Path("baselines/ppo/experiments/v2_atari100k.yaml").read_text().splitlines()
entries = {m.group(1): line for line in src if (m := re.search(r"task: atari/(\w+),", line))}
unknown = [g for g in games if g not in entries]
if unknown:
    sys.exit(f"unknown games {unknown}; the 26 are: {' '.join(entries)}")
games = games or list(entries)
body = [line for line in src if line not in entries.values()]
at = body.index("harnesses:") + 1
Path(out).write_text("\n".join(body[:at] + [entries[g] for g in games] + body[at:]) + "\n")
print(" ".join(games))
EOF
)

nice -n 10 python -m baselines.ppo.sweep "$EXPERIMENT" --workers 2 --skip-existing --by-task --out-dir "$SWEEP_DIR" &
SWEEP=$!
TASKS=$(python - <<'EOF'
import json
from pathlib import Path
# the tasks the journal already holds: each evaluation must name all of them again (it extends the journal)
p = Path("baselines/ppo/results/v2-journal/ppo-v2.episodes.jsonl")
tasks = []
for line in p.read_text().splitlines() if p.exists() else []:
    rec = json.loads(line)
    if "journal" in rec:
        tasks = rec["identity"]["tasks"]
print(" ".join(tasks))
EOF
)
for game in $GAMES; do
    while [ "$(ls "$SWEEP_DIR"/checkpoints/atari/"$game"/run{0,1,2,3,4}.pt 2>/dev/null | wc -l)" != 5 ]; do
        kill -0 "$SWEEP" 2>/dev/null || { echo "the sweep ended before $game's 5 runs were trained"; exit 1; }
        sleep 30
    done
    python -m baselines.ppo.rebuild --adopt "$SWEEP_DIR" --families atari
    python -m baselines.ppo.rebuild --write-manifest
    # the manifest's pinned rows must not move: a re-trained run that does not reproduce stops here
    if git diff -U0 baselines/ppo/artifacts.json | grep -q '^-.*"sha256": "'; then
        echo "a re-trained checkpoint differs from the SHA-256 its manifest pins; see git diff baselines/ppo/artifacts.json"
        exit 1
    fi
    case " $TASKS " in *" atari/$game "*) ;; *) TASKS="$TASKS atari/$game" ;; esac
    echo "$(date -u +%FT%TZ) evaluating$TASKS"
    # shellcheck disable=SC2086  # one argument per task
    python -m polar_bench evaluate baselines/ppo/agent.py --suite v2 --tasks $TASKS --workers 1 --no-progress \
        --out baselines/ppo/results/v2-journal/ppo-v2.json
    # shellcheck disable=SC2086
    python -m polar_bench evaluate baselines/llm_ppo/agent.py --suite v2 --tasks $TASKS --workers 1 \
        --no-progress --out baselines/llm_ppo/results/v2-journal/llm_ppo-v2.json
done
wait "$SWEEP"
