#!/usr/bin/env bash
# Real benchmark clients against `servesim serve` (issue 16): GuideLLM and/or AIPerf, each
# unchanged apart from the URL and a local tokenizer, drive smollm2-135m over the default
# /v1/chat/completions; then `servesim validate --measured` compares the simulator with
# the client's file and with the server's own records of the same run (replayed requests).
#   GUIDELLM=~/bench/bin/guidellm AIPERF=~/bench/bin/aiperf bash benchmarks/client_tools.sh [OUT]
# A tool left unset (or not found) is skipped with a note. They are not servesim extras:
# `python -m venv ~/bench && ~/bench/bin/pip install torch==<a CPU build> guidellm aiperf`.
# About 1 minute per tool here, plus this machine's smollm2 calibration if none is cached
# (`servesim calibrate --here --model smollm2-135m --threads 1`: ~20 minutes on 2 vCPUs).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(realpath -m "${1:-results/client-tools}")
BIN=$(realpath "${BIN:-.venv/bin}")
PORT=${PORT:-8131}
TOK=${TOK:-$HOME/.cache/servesim/smollm2-135m}
S=$(realpath scenarios/validate-cpu.toml)
# the server's own knobs, so the simulated side runs what was served
SETS=(--set "model.name='smollm2-135m'" --set "policy.name='continuous'" --set workload.rate=2.0
      --set policy.max_num_seqs=256 --set policy.max_num_batched_tokens=8192 --set kv.num_blocks=2048)
mkdir -p "$OUT"

run_tool() {  # run_tool NAME COMMAND...: serve, run the client in OUT/NAME, stop, validate both
  local name=$1; shift
  local dir="$OUT/$name"
  rm -rf "$dir" && mkdir -p "$dir"
  "$BIN/servesim" serve --model smollm2-135m --policy continuous --threads 1 --port "$PORT" \
    --records-out "$dir/served" --overwrite 2>"$dir/serve.log" &
  local server=$!
  for _ in $(seq 1 180); do curl -sf "localhost:$PORT/v1/models" >/dev/null && break; sleep 1; done
  (cd "$dir" && "$@" >"$dir/client.log" 2>&1) || echo "$name: the client failed (see $dir/client.log)"
  kill -INT "$server" && wait "$server" || true
  local file
  file=$(find "$dir" -name benchmarks.json -o -name profile_export.jsonl | head -1)
  for measured in "$file" "$dir/served"; do
    echo "== $name: validate --measured $measured"
    "$BIN/servesim" validate "$S" "${SETS[@]}" --measured "$measured" \
      --out "$dir/validate-$(basename "$measured" | tr . -)" --overwrite | tail -25
  done
}

if [ -n "${GUIDELLM:-}" ] && command -v "$GUIDELLM" >/dev/null; then
  run_tool guidellm "$GUIDELLM" run \
    --backend "kind=openai_http,target=http://127.0.0.1:$PORT,model=smollm2-135m" \
    --tokenizer "kind=hf_auto,model=$TOK" --profile kind=constant,rate=2 \
    --constraint kind=max_requests,count=30 \
    --data kind=synthetic_text,prompt_tokens=64,output_tokens=32 \
    --output kind=json,path=./benchmarks.json --output kind=console --disable-console-interactive
else
  echo "GuideLLM skipped: set GUIDELLM to its executable"
fi
if [ -n "${AIPERF:-}" ] && command -v "$AIPERF" >/dev/null; then
  run_tool aiperf "$AIPERF" profile --url "http://127.0.0.1:$PORT" --model smollm2-135m \
    --endpoint-type chat --streaming --tokenizer "$TOK" \
    --synthetic-input-tokens-mean 64 --output-tokens-mean 32 --request-rate 1 \
    --request-count 30 --extra-inputs ignore_eos:true --extra-inputs min_tokens:32 \
    --export-level records
else
  echo "AIPerf skipped: set AIPERF to its executable"
fi
