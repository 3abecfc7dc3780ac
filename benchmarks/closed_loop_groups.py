"""How a replayed closed loop's rounds group, and what other starts or caches would read.

    python benchmarks/closed_loop_groups.py groups CASE  # a case id
    python benchmarks/closed_loop_groups.py starts     # NIM 1.8's closed loops, three starts
    python benchmarks/closed_loop_groups.py warm       # the SGLang cookbook, fewer cached prompts

``groups CASE`` (e.g. ``nim1.0-dli-h100-sxm-llama-3-8b-fp8-tp1-200-200-c100``) replays one
published case and prints its first steps that prefill (start, prompt tokens, decode
rows), the sizes of the prompt groups the steps of its second round take in (a group: the
prompts one step prefills), and its mean TTFT and p95 ITL against the published ones.
With fixed lengths a closed loop's rounds keep the groups its first round formed
(docs/gpu-profiles.md, "What stop 69 looked at").

``starts`` replays NIM 1.8's closed-loop cases three ways: clients at random phases (the
cases' own start), all together, and the NIM 1.0 course's ramp (client k first sends
k x 1.5 ms in; benchmarks/nim_dli_cases.py), and prints each case's mean TTFT error and
how many of them read within 15%.

``warm`` replays the SGLang cookbook's cases with only the warm-up request's prompt cached
(``warm_prompts`` 1, where the cases keep the prompts of the page's earlier run) and prints
each case's mean TTFT error both ways.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.published import WITHIN, replay_point, run_case, select  # noqa: E402
from benchmarks.published_cases import Case, load_cases  # noqa: E402
from simulator.runner import run_point  # noqa: E402

RAMP_S_PER_CLIENT = 1.5e-3  # the course's first-round spread (benchmarks/nim_dli_cases.py)


def prefill_groups(case: Case, steps_shown: int = 8) -> tuple[list[tuple[float, int, int]],
                                                               Counter[int]]:
    """The replay's first ``steps_shown`` steps that prefill, as (start s, prompt tokens,
    decode rows), and the prompt groups of its second round: prompts a step prefilled,
    counted by size (each prompt the case's ``prompt_tokens`` long)."""
    point, _ = replay_point(case, max_prompts=1000, burst_rate=1e9)
    steps = run_point({}, point).result.steps
    prefills = steps[steps["num_prefill_tokens"] > 0]
    first = [(float(r.start_s), int(r.num_prefill_tokens), int(r.num_decode_seqs))
             for r in prefills.head(steps_shown).itertuples()]
    return first, round_groups(prefills["num_prefill_tokens"].tolist(),
                               int(case.workload["prompt_tokens"]),
                               int(case.workload["concurrency"]))


def round_groups(prefill_tokens: list[int], prompt: int, clients: int) -> Counter[int]:
    """The second round's groups, counted by size, from the prompt tokens of the steps that
    prefill in order (the first round's ``clients`` prompts, then the second's), each
    prompt ``prompt`` tokens long."""
    sizes: Counter[int] = Counter()
    seen = 0
    for tokens in prefill_tokens:
        seen += tokens // prompt
        if seen > clients:
            sizes[tokens // prompt] += 1
        if seen >= 2 * clients:
            break
    return sizes


def _error(row: dict, key: str = "mean_ttft_ms") -> float | None:
    cell = (row.get("metrics") or {}).get(key)
    return None if cell is None else cell["error"]


def nim18_closed_loops() -> list[Case]:
    """NIM 1.8's closed-loop cases (its AIPerf concurrency sweeps)."""
    return [c for c in load_cases() if c.stack_version == "nim-1.8"
            and c.workload.get("arrival") == "closed"]


def starts(cases: list[Case]) -> dict[str, list[float | None]]:
    """The mean TTFT errors of ``cases`` under each start, in their order."""
    out: dict[str, list[float | None]] = {}
    for start in ("random", "together", "ramp"):
        errors = []
        for c in cases:
            sets = [f"workload.client_start='{start}'"]
            if start == "ramp":
                ramp_s = int(c.workload["concurrency"]) * RAMP_S_PER_CLIENT
                sets.append(f"workload.client_ramp_s={ramp_s}")
            errors.append(_error(run_case(c, max_prompts=1000, burst_rate=1e9, overrides=sets)))
        out[start] = errors
    return out


def _show(error: float | None) -> str:
    return "-" if error is None else f"{error:+.0%}"


def _within(errors: list[float | None]) -> int:
    return sum(1 for e in errors if e is not None and abs(e) <= WITHIN)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("groups").add_argument("case")
    sub.add_parser("starts")
    sub.add_parser("warm")
    args = ap.parse_args(argv)
    if args.what == "groups":
        chosen = select(load_cases(), [args.case], None)  # an id, or its start
        case = next((c for c in chosen if c.id == args.case), chosen[0])
        first, sizes = prefill_groups(case)
        print(f"{case.id}: the first steps that prefill (start s, prompt tokens, decode rows)")
        for start, tokens, rows in first:
            print(f"  {start:9.4f}  {tokens:6d}  {rows:4d}")
        print("  the second round's groups (prompts a step prefilled: steps): "
              + ", ".join(f"{k}: {v}" for k, v in sorted(sizes.items())))
        row = run_case(case, max_prompts=1000, burst_rate=1e9)
        for key in ("mean_ttft_ms", "p95_itl_ms"):
            cell = row["metrics"].get(key)
            if cell is not None:
                print(f"  {key}: published {cell['published']:.1f}, replay {cell['simulated']:.1f}")
    elif args.what == "starts":
        cases = nim18_closed_loops()
        found = starts(cases)
        print(f"{'case':60s} " + " ".join(f"{s:>9s}" for s in found))
        for i, cid in enumerate(c.id for c in cases):
            print(f"{cid:60s} " + " ".join(
                f"{'-' if v[i] is None else f'{v[i]:+.0%}':>9s}" for v in found.values()))
        print(f"{'within 15%':60s} " + " ".join(f"{_within(v):>9d}" for v in found.values()))
    else:
        cases = [c for c in load_cases() if c.workload.get("warm_prompts")
                 and c.id.startswith("sglang0.5.6-cookbook")]
        print(f"{'case':75s} {'as cased':>9s} {'warm-up only':>13s}")
        for c in cases:
            cold = dataclasses.replace(c, workload={**c.workload, "warm_prompts": 1})
            a, b = (_error(run_case(x, max_prompts=1000, burst_rate=1e9)) for x in (c, cold))
            print(f"{c.id:75s} {_show(a):>9s} {_show(b):>13s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
