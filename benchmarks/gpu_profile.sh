#!/usr/bin/env bash
# Profile catalogue models on whatever CUDA GPU is present, fit them, and cross-check the
# engine against transformers' continuous batching. One short script for a lent GPU:
#
#   bash benchmarks/gpu_profile.sh                 # tiny, small, llama-3.1-8b in bf16
#   MODELS="llama-3.1-8b" REPEATS=5 bash benchmarks/gpu_profile.sh
#   OUT=/tmp/x PROFILES=/tmp/x CROSSCHECK=0 bash benchmarks/gpu_profile.sh   # outside the tree
#
# Writes calibrate/profiles/<gpu>__<model>__bf16.parquet (the measured table, with run
# metadata: device, versions, threads, load) and simulator/profiles/<gpu>__<model>__bf16__tp1.json
# (the fitted cost profile with provenance), named by the catalogue's key for this GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python}
MODELS=${MODELS:-"tiny small llama-3.1-8b"}
REPEATS=${REPEATS:-10}
OUT=${OUT:-calibrate/profiles}  # the measured tables
PROFILES=${PROFILES:-simulator/profiles}  # their fits
CROSSCHECK=${CROSSCHECK:-1}  # 0: skip the gpu-marked tests

GPU=$($PY -c "import torch, sys
if not torch.cuda.is_available(): sys.exit('gpu_profile.sh: no CUDA GPU here')
from engine.sweep import hardware_name; print(hardware_name(torch.device('cuda')))")
echo "GPU: $GPU ($($PY -c 'import torch; print(torch.cuda.get_device_name())'))"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv || true

for m in $MODELS; do
  table="$OUT/${GPU}__${m}__bf16.parquet"
  echo "== $m -> $table"
  # Shapes a serving GPU sees: decode up to 128 rows x 2k context (34 GB of KV for an 8B
  # model), prefill up to 16 x 2k tokens, mixed steps of up to 128 decode rows + a chunk.
  $PY -m servesim.cli profile --model "$m" --device cuda --dtype bf16 --out "$table" \
    --prefill-batches 1,2,4,8,16 --prompt-lens 128,256,512,1024,2048 \
    --decode-batches 1,4,16,32,64,128 --context-lens 128,512,1024,2048 \
    --mixed-batches 4,32,128 --mixed-chunks 128,512,2048 --mixed-context 512 \
    --repeats "$REPEATS" --warmup 3 --no-progress
  $PY -m servesim.cli calibrate "$table" --out "$PROFILES/${GPU}__${m}__bf16__tp1.json"
done

if [ "$CROSSCHECK" = 1 ]; then
  echo "== cross-checks (gpu marker)"
  $PY -m pytest -q -m gpu tests -p no:cacheprovider
fi
