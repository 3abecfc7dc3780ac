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
    python benchmarks/prefill_scale_fit.py --passes 0.63 # the pass at k weight passes

``--passes k`` sets the preset's weight pass to k passes per case (``cost.prefill_pass_s`` =
k x weight bytes / TP / HBM bandwidth) instead of its 0.95: the grid docs/stacks.md quotes
("TensorRT-LLM 0.10's prefill steps, in proportion") is this at k = 0.63, 0.80 and 0.95.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.nim_dli_budget_fit import fit_main  # noqa: E402
from benchmarks.published import run_case  # noqa: E402
from benchmarks.published_cases import Case, burst_rate_accepted  # noqa: E402
from simulator.costs.prefill_pass import weight_pass_s  # noqa: E402
from simulator.specs.hardware import get_hardware  # noqa: E402
from simulator.specs.models import get_model  # noqa: E402

CANDIDATES = (1.0, 1.03, 1.06, 1.09, 1.12, 1.15)


def overrides(case: Case, scale: float, passes: float | None) -> list[str]:
    """``case``'s settings at ``scale``, and at ``passes`` weight passes when given."""
    out = [f"cost.prefill_scale={scale}"]
    if passes is not None:
        pass_s = passes * weight_pass_s(get_model(case.model), get_hardware(case.gpu), case.tp,
                                        case.weight_dtype)
        out.append(f"cost.prefill_pass_s={pass_s!r}")
    return out


def run(cases: list[Case], scale: float, passes: float | None = None) -> list[dict]:
    """The rows of ``cases`` replayed with prefill-only steps ``scale`` x the tables (and
    ``passes`` weight passes instead of the preset's)."""
    rate, _ = burst_rate_accepted()
    return [run_case(c, max_prompts=1000, burst_rate=rate,
                     overrides=overrides(c, scale, passes)) for c in cases]


def main(argv: list[str] | None = None) -> int:
    return fit_main(argv, __doc__, CANDIDATES, run, lambda s: f"x {s:g}", option="passes")


if __name__ == "__main__":
    raise SystemExit(main())
