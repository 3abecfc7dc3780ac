"""``calibrate --from-run`` on a real server's runs: llm-k8s's four vLLM 0.8.3 runs.

    python benchmarks/from_run_llmk8s.py [--fit TERMS]

The four ``--save-result`` files in benchmarks/published_runs/ (Llama-3.3-70B on eight
A100-40GB, vLLM 0.8.3's V1 engine, prefix caching on; 200 ShareGPT prompts at 1, 4, 16
req/s and all at once, one run after another on one server, so every run after the first
found its 200 prompts cached, and the first its warm-up prompt) are what a user would
calibrate with: per-request TTFT and inter-token times. This prints how the shipped
``vllm-v1`` 0.8 preset reads them (its host terms were fitted on aggregates of the same
runs: docs/stacks.md, "The 0.8 line's front end"), with and without replaying each run's
cached prompts first (``--warm``), and then what a per-request fit of ``--fit`` (default
``time_scale,request_s,intake_s``, the preset's step and row costs held) finds, held out
run by run, and how firmly the runs pin each term (calibrate/fit_spread.py). The replays
are simulations: the figures are the same on any machine.

The scenario is the published cases' deployment (:data:`SCENARIO`); a user runs the same
with ``servesim calibrate --from-run A B ... --warm B=200 ... --scenario S --fit TERMS``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from calibrate.fit_check import assess  # noqa: E402
from calibrate.fit_spread import describe_spread  # noqa: E402
from calibrate.from_run import describe_terms, errors, fit, leave_one_out_fits, replay  # noqa: E402
from calibrate.from_run_setup import match_points, targets  # noqa: E402
from calibrate.next_run import advice  # noqa: E402
from calibrate.run_records import read_runs  # noqa: E402
from simulator.scenario import expand_sweep  # noqa: E402

RUNS = Path(__file__).with_name("published_runs")
NAMES = ("qps01", "qps04", "qps16", "qpsinf")
# prompts the server had cached before each run: the warm-up prompt, then the run before's
WARM = {"qps01": 1, "qps04": 200, "qps16": 200, "qpsinf": 200}
SCENARIO = {  # the published cases' deployment (benchmarks/published_cases_vllm_v1.toml)
    "name": "llmk8s-vllm-0.8.3",
    "model": {"name": "llama-3.1-70b", "weight_dtype": "bf16", "kv_dtype": "bf16"},
    "hardware": {"gpu": "a100-40gb", "tp": 8},
    "stack": {"name": "vllm-v1", "version": "0.8"},
    "workload": {"arrival": "poisson", "rate": 1.0, "num_requests": 1,  # a replay takes
                 "prompt": {"dist": "fixed", "tokens": 1},  # the runs' own requests
                 "output": {"dist": "fixed", "tokens": 2}},
}
SHOWN = ("ttft_mean", "ttft_p50", "ttft_p90", "tpot_mean", "e2e_mean")


def paths() -> list[str]:
    """The four runs' files, in the order they ran."""
    return [str(RUNS / f"llmk8s-a100-40gb-llama-3.3-70b-tp8-sharegpt200-{n}.json")
            for n in NAMES]


def warm_map(warm: bool) -> dict[str, int]:
    """Each file's cached prompts (or none)."""
    return {p: WARM[n] for p, n in zip(paths(), NAMES, strict=True)} if warm else {}


def fitted_targets(warm: bool) -> tuple[list, object]:
    """The runs as fitting targets on the preset's deployment, and the preset's calibration
    (its time scale and host terms: the fit's start)."""
    files = paths()
    pairs = match_points([read_runs(p) for p in files], expand_sweep(SCENARIO), files)
    out, start, _, _ = targets(pairs, None, warm_map(warm))
    return out, start


def _row(name: str, errs: dict[str, float]) -> str:
    return f"  {name:<8}" + "".join(f"{errs[k]:>+11.1%}" for k in SHOWN)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit", default="time_scale,request_s,intake_s",
                    help="terms to fit (default time_scale,request_s,intake_s)")
    args = ap.parse_args(argv)
    header = "  " + " " * 8 + "".join(f"{k:>11}" for k in SHOWN)
    for warm in (True, False):
        ts, start = fitted_targets(warm)
        print(f"the preset ({start.overhead.describe()}), cached prompts "
              f"{'replayed first' if warm else 'not replayed'}: simulated / measured - 1")
        print(header)
        for t, name in zip(ts, NAMES, strict=True):
            print(_row(name, errors(t.run, replay(t, start))))
    ts, start = fitted_targets(True)
    terms = tuple(t.strip() for t in args.fit.split(",") if t.strip())
    result = fit(ts, terms, start)
    got = ", ".join(f"{t} {v}" for t, v in describe_terms(result.calibration, terms))
    print(f"fitted per request on all four ({result.evaluations} replays): {got}")
    loo = leave_one_out_fits(ts, terms, start)
    spread, nexts = assess(ts, result, [c for _, c in loo.values()])
    print("how firmly the four pin each term (calibrate/fit_spread.py):")
    for s in spread:
        print(f"  {s.term:<11} {describe_spread(s)}")
    if nexts:
        print(f"  {advice(nexts)}")
    print("each run held out (predicted by a fit on the other three):")
    print(header)
    for (errs, _), name in zip(loo.values(), NAMES, strict=True):
        print(_row(name, errs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
