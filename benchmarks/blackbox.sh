#!/usr/bin/env bash
# Black-box calibration end to end on this CPU (issue 10's target): serve the tiny model
# with `servesim serve`, measure two loads with `servesim measure`, fit host costs and a
# correction on a base profile with `servesim calibrate --from-run`, then predict a third
# load and another policy, each measured on the server, with `servesim validate --measured`.
#   bash benchmarks/blackbox.sh [OUT]     (about 5 minutes; prints the fit and both checks)
# BASE (default: the shipped tiny profile) is the kernel-level profile the fit corrects.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-results/blackbox}
BASE=${BASE:-simulator/profiles/cpu__tiny__fp32__tp1.json}
S=scenarios/validate-cpu.toml
BIN=${BIN:-.venv/bin}
PORT=${PORT:-8123}
mkdir -p "$OUT"
serve() {  # serve POLICY KNOB...: start the server (the scenario's knobs), wait for it
  local policy=$1; shift
  "$BIN/servesim" serve --model tiny --policy "$policy" "$@" --threads 1 \
    --kv-blocks 4096 --port "$PORT" 2>"$OUT/serve-$policy.log" &
  SERVER=$!
  for _ in $(seq 120); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && return 0; sleep 0.5
  done
  echo "server did not start" >&2; exit 1
}
measure() {  # measure POLICY RATE DIR (skipped when DIR holds a measurement already)
  [ -f "$3/summary.json" ] && return 0
  "$BIN/servesim" measure --endpoint "http://127.0.0.1:$PORT/v1" --workload "$S" \
    --set "policy.name='$1'" --set "workload.rate=$2" --no-progress --out "$3" >/dev/null
}
serve continuous --max-num-seqs 8
measure continuous 3.0 "$OUT/c3"; measure continuous 6.0 "$OUT/c6"; measure continuous 9.0 "$OUT/c9"
kill "$SERVER"; wait "$SERVER" || true
serve dynamic --set max_batch_size=8 --set max_wait_s=0.25
measure dynamic 6.0 "$OUT/d6"
kill "$SERVER"; wait "$SERVER" || true
"$BIN/servesim" calibrate --from-run "$OUT/c3" "$OUT/c6" --scenario "$S" \
  --set "policy.name='continuous'" --base "$BASE" --out "$OUT/blackbox.json"
for check in "continuous 9.0 c9" "dynamic 6.0 d6"; do
  set -- $check
  echo "== predicted with the fitted profile: $1 at $2 req/s (not used in the fit)"
  "$BIN/servesim" validate "$S" --set "policy.name='$1'" --set "workload.rate=$2" \
    --set "cost.profile='$OUT/blackbox.json'" --measured "$OUT/$3" --out "$OUT/v-$3" \
    | grep -E "simulated with|(ttft|tpot|e2el) +mean|within"
  echo "== the base profile alone, same point"
  "$BIN/servesim" validate "$S" --set "policy.name='$1'" --set "workload.rate=$2" \
    --set "cost.profile='$BASE'" --set "cost.force=true" --measured "$OUT/$3" \
    --out "$OUT/b-$3" | grep -E "(ttft|tpot|e2el) +mean"
done
