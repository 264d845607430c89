#!/usr/bin/env bash
# Stage suite v2's Procgen, NetHack and Atari evaluations of PPO and LLM+PPO task by task, so that the
# hours of training and evaluation can be spread over sessions and machines without losing any of it:
#
#     baselines/ppo/stage_v2.sh [TASK ...]    (default: every procgen/, nethack/ and atari/ task of v2)
#     SWEEP=0 baselines/ppo/stage_v2.sh ...   (wait for a sweep already running instead of starting one)
#     WORKERS=1 baselines/ppo/stage_v2.sh ... (train one run at a time, leaving a core to other work)
#
# One sweep trains the tasks' 5 runs each in the portable numeric mode (WORKERS, default 2, niced, into
# runs/ppo-v2-portable; runs already there are skipped; a task's runs finish together). For each task,
# in order, once its 5 runs exist: `rebuild --adopt` takes them into portable/checkpoints/ (an already
# pinned run must come back with its manifest's SHA-256, or the script stops), then PPO (agent_v2.py)
# and LLM+PPO (agent.py) play the task on suite v2 into their journals (LLM+PPO plays NetHack once all
# seven NetHack tasks are adopted: its planner drives all their skills), which are committed:
#     baselines/ppo/results/v2-journal/ppo-v2.episodes.jsonl
#     baselines/llm_ppo/results/v2-journal/llm_ppo-v2.episodes.jsonl
# The final evaluation is the usual command with the same --out (a journal of fewer tasks is extended,
# its episodes kept; docs/evaluate.md). A change to an agent file or the suite makes its journal refuse
# the evaluation (it records their SHA-256): delete the journals and stage again.
set -euo pipefail
cd "$(dirname "$0")/../.."
SWEEP_DIR=runs/ppo-v2-portable
E=baselines/ppo/experiments
mkdir -p runs baselines/ppo/results/v2-journal baselines/llm_ppo/results/v2-journal

STAGED=$(python - "$@" <<'EOF'
import sys
from polar_bench import load_suite
from polar_bench.errors import did_you_mean
ids = [t for t in load_suite("v2").task_ids if t.split("/")[0] in ("procgen", "nethack", "atari")]
unknown = [t for t in sys.argv[1:] if t not in ids]
if unknown:
    sys.exit(f"not a Procgen, NetHack or Atari task of suite v2: {unknown[0]}{did_you_mean(unknown[0], ids)}")
print(" ".join(sys.argv[1:] or ids))
EOF
)

if [ "${SWEEP:-1}" != 0 ]; then
    # shellcheck disable=SC2086  # one argument per task
    nice -n 10 python -m baselines.ppo.sweep $E/v1_procgen.yaml $E/v1_rest.yaml $E/v2_runs34.yaml \
        $E/v2_atari100k.yaml --tasks $STAGED --numerics avx2-portable --workers "${WORKERS:-2}" --skip-existing --by-task \
        --out-dir "$SWEEP_DIR" &
    SWEEP_PID=$!
fi
training() {
    if [ -n "${SWEEP_PID:-}" ]; then kill -0 "$SWEEP_PID" 2>/dev/null; else pgrep -f baselines.ppo.sweep >/dev/null; fi
}
journal_tasks() {  # the tasks a journal already holds: each evaluation names all of them again (it extends it)
    python - "$1" <<'EOF'
import json, sys
from pathlib import Path
p, tasks = Path(sys.argv[1]), []
for line in p.read_text().splitlines() if p.exists() else []:
    rec = json.loads(line)
    if "journal" in rec:
        tasks = rec["identity"]["tasks"]
print(" ".join(tasks))
EOF
}
PPO_JOURNAL=baselines/ppo/results/v2-journal/ppo-v2
LLM_JOURNAL=baselines/llm_ppo/results/v2-journal/llm_ppo-v2
for task in $STAGED; do
    while [ "$(ls "$SWEEP_DIR"/checkpoints/"$task"/run{0,1,2,3,4}.pt 2>/dev/null | wc -l)" != 5 ]; do
        training || { echo "no sweep is training $task's 5 runs"; exit 1; }
        sleep 30
    done
    python -m baselines.ppo.rebuild --adopt "$SWEEP_DIR" --families "${task%%/*}"
    python -m baselines.ppo.rebuild --write-manifest
    # the manifests' pinned rows must not move: a re-trained run that does not reproduce stops here
    if git diff -U0 -- '*artifacts.json' | grep -q '^-.*"sha256": "'; then
        echo "a re-trained checkpoint differs from the SHA-256 its manifest pins; see git diff '*artifacts.json'"
        exit 1
    fi
    for pair in "baselines/ppo/agent_v2.py $PPO_JOURNAL" "baselines/llm_ppo/agent.py $LLM_JOURNAL"; do
        set -- $pair
        tasks=$(journal_tasks "$2.episodes.jsonl")
        new="$task"
        if [ "$1" = baselines/llm_ppo/agent.py ] && [ "${task%%/*}" = nethack ]; then
            # LLM+PPO's NetHack planner drives the PPO skills of all seven NetHack tasks: it plays them
            # once all 35 runs are adopted, then every NetHack task staged so far at once
            [ "$(ls baselines/ppo/portable/checkpoints/nethack/*/run{0,1,2,3,4}.pt 2>/dev/null | wc -l)" = 35 ] || continue
            new=$(for t in $STAGED; do case "$t" in nethack/*) echo "$t" ;; esac; done)
        fi
        for t in $new; do
            case " $tasks " in *" $t "*) ;; *) tasks="$tasks $t" ;; esac
        done
        echo "$(date -u +%FT%TZ) $1 on$tasks"
        # shellcheck disable=SC2086  # one argument per task
        python -m polar_bench evaluate "$1" --suite v2 --tasks $tasks --workers 1 --no-progress --out "$2.json"
    done
done
if [ -n "${SWEEP_PID:-}" ]; then wait "$SWEEP_PID"; fi
