"""Fit TensorRT-LLM 0.10's factor on its prefill-only steps on NIM 1.0's A100 rows.

The trtllm 0.10 preset adds one fitted pass over the weights to a step that only prefills
(simulator/costs/prefill_pass.py; benchmarks/prefill_pass_fit.py, from the one-client
200-token rows). Longer prompts read slow beyond it: at one client, 2,000 and 7,000-token
prompts take 3-27% longer than the 1.x kernel tables price, on both GPUs. This replays the
course's A100 rows (the fit set; benchmarks/published_cases_nim_dli.toml, their first round
spread as the case file says) with ``cost.prefill_scale = S`` for each candidate S, scored
as published.py scores them, and picks the S with the most mean-TTFT and mean-TPOT errors
within 15% (benchmarks/nim_dli_budget_fit.py ``choose``; ties: the smaller median |TTFT
error|). With ``--held-out`` it prints the H100 rows at each candidate too: they are not
used in the choice.

    python benchmarks/prefill_scale_fit.py               # the fit set only (~4 min)
    python benchmarks/prefill_scale_fit.py --held-out    # and the H100 rows (~10 min)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.nim_dli_budget_fit import fit_main  # noqa: E402
from benchmarks.published import run_case  # noqa: E402
from benchmarks.published_cases import Case, burst_rate_accepted  # noqa: E402

CANDIDATES = (1.0, 1.03, 1.06, 1.09, 1.12, 1.15)


def run(cases: list[Case], scale: float) -> list[dict]:
    """The rows of ``cases`` replayed with prefill-only steps ``scale`` x the tables."""
    rate, _ = burst_rate_accepted()
    return [run_case(c, max_prompts=1000, burst_rate=rate,
                     overrides=[f"cost.prefill_scale={scale}"]) for c in cases]


def main(argv: list[str] | None = None) -> int:
    return fit_main(argv, __doc__, CANDIDATES, run, lambda s: f"x {s:g}")


if __name__ == "__main__":
    raise SystemExit(main())
