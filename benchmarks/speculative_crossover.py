"""Where speculative decoding stops paying: its speed-up by batch size, simulated.

For a scenario (its model, GPU, tp, policy, [speculative] draft and acceptance), runs a
closed loop of ``d`` clients (so ``d`` requests decode together) with fixed prompt and
output lengths, once with ``num_tokens = 0`` and once with ``k``, and prints per ``d`` the
mean TPOT of each, the TPOT speed-up (plain TPOT / speculative TPOT), output throughput
and its speed-up (speculative / plain, at the same ``d``), and the mean tokens a
speculative row emitted per step. Short prompts and long outputs keep prefill out of the
figures (chunked prefill steals budget from the verify, and prefill chunks in plain steps
lengthen its TPOT). The speed-up is simulated (acceptance
drawn per row per step), not computed from the closed form. Usage::

    python benchmarks/speculative_crossover.py scenarios/speculative-chat.toml \
        [--k 4] [--alpha 0.7] [--batches 1,2,4,...] [--prompt 128] [--output 1024]
"""

from __future__ import annotations

import argparse
from typing import Any

from simulator.runner import run_point
from simulator.scenario import apply_overrides, load_scenario

BATCHES = "1,2,4,8,16,32,64,128,256"


def point(path: str, d: int, k: int, alpha: float | None, prompt: int, output: int,
          extra: list[str]) -> dict[str, Any]:
    """The scenario at ``d`` closed-loop clients and ``k`` drafts (one point, no sweep)."""
    raw = load_scenario(path)
    sets = ["workload.arrival='closed'", f"workload.concurrency={d}",
            f"workload.num_requests={max(2 * d, 8)}", "workload.think_time_s=0.0",
            f"workload.prompt={{dist='fixed', tokens={prompt}}}",
            f"workload.output={{dist='fixed', tokens={output}}}",
            f"speculative.num_tokens={k}", f"policy.max_num_seqs={max(d, 1)}", *extra]
    if alpha is not None:
        sets.append(f"speculative.acceptance={alpha}")
    raw = apply_overrides(raw, sets)
    raw["workload"].pop("rate", None)
    raw["slo"] = {}
    return raw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=None, help="default: the scenario's")
    ap.add_argument("--batches", default=BATCHES)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--output", type=int, default=1024)
    ap.add_argument("--set", action="append", default=[], help="more section.key=value")
    args = ap.parse_args()
    print(f"{args.scenario}: k={args.k}, alpha={args.alpha or 'scenario'}, prompt "
          f"{args.prompt}, output {args.output}, closed loop of d clients")
    print(f"{'d':>5} {'TPOT k=0 ms':>12} {'TPOT spec ms':>13} {'speed-up':>9} "
          f"{'tok/s k=0':>10} {'tok/s spec':>11} {'speed-up':>9} {'tokens/step':>12}")
    crossed: dict[str, int] = {}
    for d in (int(x) for x in args.batches.split(",")):
        res = [run_point({}, point(args.scenario, d, k, args.alpha, args.prompt, args.output,
                                   args.set)).summary for k in (0, args.k)]
        plain, spec = res
        up = plain["mean_tpot_ms"] / spec["mean_tpot_ms"]
        up_tput = spec["output_throughput"] / plain["output_throughput"]
        for name, value in (("TPOT", up), ("throughput", up_tput)):
            if value < 1:
                crossed.setdefault(name, d)
        print(f"{d:>5} {plain['mean_tpot_ms']:>12.3f} {spec['mean_tpot_ms']:>13.3f} "
              f"{up:>8.3f}x {plain['output_throughput']:>10.1f} "
              f"{spec['output_throughput']:>11.1f} {up_tput:>8.3f}x "
              f"{spec['spec_mean_accepted_tokens_per_step']:>12.3f}")
    for name in ("TPOT", "throughput"):
        at = crossed.get(name)
        print(f"{name} speed-up first below 1x at d = {at}" if at else
              f"{name} speed-up >= 1x throughout")


if __name__ == "__main__":
    main()
