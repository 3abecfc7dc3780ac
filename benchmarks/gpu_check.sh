#!/usr/bin/env bash
# One lent GPU's checks, in the order that pays most if the lease runs out:
#   1. AIConfigurator's GEMM grid timed here (benchmarks/gemm_tables_check.py --measure);
#   2. the engine's step costs for MODEL on this GPU (servesim profile --device cuda), and
#      their fit (servesim calibrate): the measured profile of this card;
#   3. where the served steps spend their time, static against continuous, under
#      torch.profiler (benchmarks/engine_step_profile.py: the first H200's open question);
#   4. the engine serving SCENARIO's traffic against the simulator priced with that profile
#      (benchmarks/fidelity.py: capacity per policy, then each policy at LOADS of it).
#
#   OUT=/tmp/gpu bash benchmarks/gpu_check.sh
#   MODEL=llama-3.1-8b SCENARIO=scenarios/validate-h200.toml LOADS=0.4,0.8 bash benchmarks/gpu_check.sh
#
# Everything lands flat in $OUT (the device tool brings back 8 files at most): gemm.csv, the
# profile table (.parquet), the fitted profile (.json), engine_steps.tgz (the profiler's
# tables and the fit's residual plot), fidelity.txt (the printed table) and fidelity.tgz
# (both sides' results folders). Each stage has its own time limit, so a slow
# one cannot take the later ones' results with it. No step of this writes into the tree.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${OUT:?set OUT to a folder for the results}
MODEL=${MODEL:-llama-3.1-8b}
SCENARIO=${SCENARIO:-scenarios/validate-h200.toml}
LOADS=${LOADS:-0.4,0.8}
REPEATS=${REPEATS:-5}
mkdir -p "$OUT"
export SERVESIM_ACCEL=0 SERVESIM_PROFILE_CACHE=${SERVESIM_PROFILE_CACHE:-/tmp/servesim-cache}
stamp() { echo "== $(date -u +%T) $*"; }

stamp "machine"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit,driver_version --format=csv
$PY -c "import torch, transformers, sys; print('python', sys.version.split()[0], 'torch',
torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())"

stamp "1. GEMM grid"
timeout "${GEMM_S:-60}" $PY benchmarks/gemm_tables_check.py --measure "$OUT/gemm.csv"

GPU=$($PY -c "import torch; from engine.sweep import hardware_name
print(hardware_name(torch.device('cuda')))")
table="$OUT/${GPU}__${MODEL}__bf16.parquet"
profile="/tmp/gpu_check/${GPU}__${MODEL}__bf16__tp1.json"
stamp "2. profile $MODEL on $GPU -> $table (benchmarks/gpu_profile.sh's grid)"
mkdir -p /tmp/gpu_check /tmp/engine_steps
OUT="$OUT" PROFILES=/tmp/gpu_check MODELS="$MODEL" CROSSCHECK=0 PY="$PY" REPEATS="$REPEATS" \
  timeout "${PROFILE_S:-150}" bash benchmarks/gpu_profile.sh || exit 1
cp "$profile" "$OUT/" && mv /tmp/gpu_check/*.png /tmp/engine_steps/ 2>/dev/null

stamp "3. served steps under torch.profiler: static against continuous"
timeout "${STEPS_S:-120}" $PY benchmarks/engine_step_profile.py --scenario "$SCENARIO" \
  --set "model.name='$MODEL'" --device cuda --requests 24 --rate 2 --out /tmp/engine_steps
tar -czf "$OUT/engine_steps.tgz" -C /tmp engine_steps 2>/dev/null

stamp "4. engine vs simulator: $SCENARIO at $LOADS of each policy's capacity"
timeout "${FIDELITY_S:-200}" $PY benchmarks/fidelity.py --scenario "$SCENARIO" \
  --set "cost.profile='$profile'" --loads "$LOADS" --capacity-requests 48 \
  --out /tmp/fidelity 2>&1 | tee "$OUT/fidelity.txt"
tar -czf "$OUT/fidelity.tgz" -C /tmp fidelity 2>/dev/null
stamp "done"
