#!/usr/bin/env bash
# Issue #42's experiment end to end, step by step, each step resumable, so that its hours can be spread
# over sessions: run it again after a stop and it goes on where it stopped.
#
#     baselines/llm_rl/stage_babyai5.sh [STEP ...]     (default: every step, in this order)
#     EXPERIMENT=babyai5-step baselines/llm_rl/stage_babyai5.sh ...   (another design: its YAML and the
#                                                    <name>-uniform.yaml twin; default babyai5)
#
# Steps (each skips what is done):
#   train      <experiment>.yaml seeds 0-4 (the curriculum arm; the base model's held-out point is taken
#              from any design's seed 0 that has it), then <experiment>-uniform.yaml seeds 0-2:
#              runs/llm_rl/<name>-seed<R>/
#              (`train --resume` continues a training cut short and does nothing for a finished one)
#   base       the base model on suite v1's BabyAI domain, 5 runs, the suite's 20 episodes per level (one
#              file for every experiment: baselines/llm_rl/results/v1-babyai-base.json, or BASE_OUT)
#   trained    the curriculum arm's five trained models, run R playing seed R's weights
#   uniform    the uniform arm's three trained models, runs 0-2
#   compare    polar_bench compare: trained against base, and the curriculum against the uniform arm
#   seed:R     (not in the default list) one session's share, when a session's files do not outlive it: train
#              <experiment>.yaml seed R, then play it as run R of the trained arm's v1 results (runs 0..R-1
#              given as journaled: that file must already hold them); commit that file, its journal and
#              .upstream.json, and the seed's metrics.csv, validation.csv and config.json (copied as
#              curves/<name>-seed<R>.csv, .validation.csv, .config.json; plot_curves reads such copies)
#   uniform:R  the same for <experiment>-uniform.yaml seed R and the uniform arm's results
#   v2:R       (not in the default list) the suite-v2 leaderboard entry, in the session that holds seed R's
#              trained weights: pin them as run R of agent_v2.py (checkpoints/<experiment>-run<R>.pt in
#              agent_v2.artifacts.json, or V2_MANIFEST), then play run R of the whole suite v2 with
#              agent_v2.py into results/v2-<experiment>.json (or V2_OUT; runs 0..R-1 given as journaled);
#              commit that file's journal and .upstream.json and the manifest
#   probe      (not in the default list) the design probe, experiments/probe-learnable.toml (3 learnable
#              levels x 40 held-out seeds): the base model (5 runs, one file for every experiment:
#              PROBE_BASE), the curriculum arm (5 runs) and the uniform arm (3 runs), both comparisons
#              in <OUT>/probe-compare.txt; 120 episodes per run, about 15 minutes per run on one core
# Results (committed): baselines/llm_rl/results/v1-<experiment>/{trained,uniform}.json and compare.txt;
# each evaluation journals its episodes (<out>.episodes.jsonl), so a stopped one resumes.
# Everything runs niced, bfloat16 serving, as the experiment's training does; CORES=N (default 1) trains
# with `--cores N` and evaluates with N workers answered by N replicas of each model (neither changes an
# answer: tests/test_llm_rl.py). RUNS, OUT and CURVES (environment) move the training folders, the results and
# the kept curves elsewhere.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python}
RUNS=${RUNS:-runs/llm_rl}
EXP=${EXPERIMENT:-babyai5}
OUT=${OUT:-baselines/llm_rl/results/v1-$EXP}
BASE_OUT=${BASE_OUT:-baselines/llm_rl/results/v1-babyai-base.json}
PROBE_BASE=${PROBE_BASE:-baselines/llm_rl/results/probe/base-5runs.json}
CURVES=${CURVES:-baselines/llm_rl/curves}
V2_OUT=${V2_OUT:-baselines/llm_rl/results/v2-$EXP.json}
V2_MANIFEST=${V2_MANIFEST:-baselines/llm_rl/agent_v2.artifacts.json}
# the base model's held-out point (iteration 0), the same for every seed and design: committed, so that a
# seed trained in a later session takes it instead of playing it again
BASE_POINT=${BASE_POINT:-baselines/llm_rl/results/base-validation}
E=baselines/llm_rl/experiments
if [ ! -f "$E/$EXP.yaml" ] || [ ! -f "$E/$EXP-uniform.yaml" ]; then
    echo "no $E/$EXP.yaml with its $EXP-uniform.yaml twin (EXPERIMENT names a curriculum arm)" >&2; exit 2
fi
STEPS=${*:-train base trained uniform compare}
CORES=${CORES:-1}
for step in $STEPS; do
    case $step in
        train|base|trained|uniform|compare|probe|seed:[0-4]|uniform:[0-2]|v2:[0-4]) ;;
        *) echo "unknown step $step (train, base, trained, uniform, compare, probe, seed:0-4, uniform:0-2, v2:0-4)" >&2
           exit 2 ;;
    esac
done
mkdir -p "$OUT" "$RUNS" "$CURVES" "$(dirname "$BASE_OUT")" "$(dirname "$PROBE_BASE")"

train() {  # CONFIG NAME SEED
    local reuse=() d
    for d in "$BASE_POINT" "$RUNS"/*-seed0; do   # any design's seed 0 may hold the base model's point (key.json decides)
        if [ -d "$d" ] && [ "$d" != "$RUNS/$2-seed$3" ]; then reuse+=("$d"); fi
    done
    if [ ${#reuse[@]} -gt 0 ]; then reuse=(--reuse-validation "${reuse[@]}"); fi
    echo "$(date -u +%FT%TZ) train $2 seed $3"
    nice -n 10 "$PY" -m baselines.llm_rl.train --config "$1" --seed "$3" --out-dir "$RUNS/$2-seed$3" --resume \
        --cores "$CORES" "${reuse[@]}" >> "$RUNS/$2-seed$3.log" 2>&1
}
evaluate() {  # v1|probe|v2 OUT RUNS [WEIGHTS ...]: suite v1's BabyAI domain, the design probe, or the
    local where=(--suite v1 --domains babyai) agent=()   # whole suite v2 played by agent_v2.py
    if [ "$1" = probe ]; then where=(--suite "$E/probe-learnable.toml"); fi
    if [ "$1" = v2 ]; then where=(--suite v2); agent=(--agent baselines/llm_rl/agent_v2.py); fi
    local out=$2 runs=$3
    shift 3
    local weights=()
    if [ $# -gt 0 ]; then weights=(--weights "$@"); fi
    echo "$(date -u +%FT%TZ) evaluate $out ($runs runs)"
    nice -n 10 "$PY" -m baselines.llm_rl.evaluate "${agent[@]}" "${weights[@]}" --dtype bfloat16 --threads 1 \
        --replicas "$CORES" --out "$out" -- "${where[@]}" --runs "$runs" --workers "$CORES"
}
checkpoints() {  # NAME SEED...: each seed's checkpoint, or 'journaled' where it is gone (an earlier session's
    local name=$1   # run, which the results file must already hold: baselines.llm_rl.evaluate checks)
    shift
    for r in "$@"; do
        if [ -f "$RUNS/$name-seed$r/checkpoint.pt" ]; then echo "$RUNS/$name-seed$r/checkpoint.pt"; else echo journaled; fi
    done
}
arm() {  # v1|probe OUT NAME SEED...: run R plays seed R's weights
    local kind=$1 out=$2 name=$3
    shift 3
    # shellcheck disable=SC2046  # one checkpoint per run
    evaluate "$kind" "$out" $# $(checkpoints "$name" "$@")
}
trained_arm() { arm "$1" "$2" "$EXP" 0 1 2 3 4; }   # v1|probe OUT
uniform_arm() { arm "$1" "$2" "$EXP-uniform" 0 1 2; }
session() {  # CONFIG NAME SEED OUT: train one seed, play it as run SEED of OUT, keep its curves beside the results
    train "$1" "$2" "$3"
    # shellcheck disable=SC2046  # one run per seed
    arm v1 "$4" "$2" $(seq 0 "$3")
    local run=$RUNS/$2-seed$3 keep=$CURVES/$2-seed$3   # plot_curves takes these copies too
    cp "$run/metrics.csv" "$keep.csv"
    cp "$run/config.json" "$keep.config.json"
    if [ -f "$run/validation.csv" ]; then cp "$run/validation.csv" "$keep.validation.csv"; fi
}
v2_entry() {  # SEED: pin seed R's weights as run R of agent_v2.py, then play them as run R of its v2 entry
    local r=$1 ckpt=$RUNS/$EXP-seed$1/checkpoint.pt weights=() k
    if [ ! -f "$ckpt" ]; then echo "no $ckpt: train seed $r in this session first (seed:$r)" >&2; exit 2; fi
    "$PY" -m baselines.llm_rl.pin "$ckpt" --name "$EXP" --first-run "$r" --manifest "$V2_MANIFEST"
    for ((k = 0; k < r; k++)); do weights+=(journaled); done
    evaluate v2 "$V2_OUT" $((r + 1)) "${weights[@]}" "$(dirname "$V2_MANIFEST")/checkpoints/$EXP-run$r.pt"
}
compare_arms() {  # BASE TRAINED UNIFORM REPORT: trained against base, then the curriculum against uniform
    {
        "$PY" -m polar_bench compare "$1" "$2"
        echo
        "$PY" -m polar_bench compare "$3" "$2"
    } | tee "$4"
}

for step in $STEPS; do
    case $step in
        train)
            for r in 0 1 2 3 4; do train "$E/$EXP.yaml" "$EXP" "$r"; done
            for r in 0 1 2; do train "$E/$EXP-uniform.yaml" "$EXP-uniform" "$r"; done ;;
        base) evaluate v1 "$BASE_OUT" 5 ;;
        trained) trained_arm v1 "$OUT/trained.json" ;;
        uniform) uniform_arm v1 "$OUT/uniform.json" ;;
        compare) compare_arms "$BASE_OUT" "$OUT/trained.json" "$OUT/uniform.json" "$OUT/compare.txt" ;;
        seed:*) session "$E/$EXP.yaml" "$EXP" "${step#seed:}" "$OUT/trained.json" ;;
        uniform:*) session "$E/$EXP-uniform.yaml" "$EXP-uniform" "${step#uniform:}" "$OUT/uniform.json" ;;
        v2:*) v2_entry "${step#v2:}" ;;
        probe)
            evaluate probe "$PROBE_BASE" 5
            trained_arm probe "$OUT/probe-trained.json"
            uniform_arm probe "$OUT/probe-uniform.json"
            compare_arms "$PROBE_BASE" "$OUT/probe-trained.json" "$OUT/probe-uniform.json" "$OUT/probe-compare.txt" ;;
    esac
done
