"""Fit how often NIM 1.0's 16-bit XQA decode reads the KV cache, on the course's A100 rows.

The trtllm 0.10 preset prices decode attention over a 16-bit cache at ``1 + beta (G - 1)``
reads a step of the kernel tables' one read (G: query heads per KV head on a GPU), with
0.11's beta = 0.108 where 0.10 has an XQA kernel (G = 1 or 8), fitted on the max-throughput
tables of 0.11 (simulator/stack_presets.py TRTLLM_011_KV16_REREAD). The course's 16-bit
Llama-3-70B engines (TP 4 and 8: G = 8) read slower than that in the replay at 100-250
clients, where the cache dominates a step. This replays the course's A100 rows (the fit
set; benchmarks/published_cases_nim_dli.toml) with ``cost.decode_kv_reads = 1 + beta (G -
1)`` on the 16-bit rows whose G has an XQA kernel, for each candidate beta (the other rows
as the case file gives them), and picks the beta with the most mean-TTFT and mean-TPOT
errors within 15% (benchmarks/nim_dli_budget_fit.py ``choose``; ties: the smaller median
|TTFT error|). With ``--held-out`` it prints the H100 rows at each candidate too: they are
not used in the choice.

    python benchmarks/nim_dli_reads_fit.py               # the fit set only (~4 min)
    python benchmarks/nim_dli_reads_fit.py --held-out    # and the H100 rows (~12 min)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.nim_dli_budget_fit import fit_main  # noqa: E402
from benchmarks.nim_dli_cases import xqa_reads  # noqa: E402
from benchmarks.published import run_case  # noqa: E402
from benchmarks.published_cases import Case, burst_rate_accepted  # noqa: E402
from simulator.stack_presets import TRTLLM_011_KV16_REREAD  # noqa: E402

CANDIDATES = (0.0, 0.027, 0.054, 0.081, TRTLLM_011_KV16_REREAD)


def overrides(case: Case, beta: float) -> list[str]:
    """``case``'s settings at ``beta``: ``1 + beta (G - 1)`` reads where its cache is 16-bit
    and 0.10 has an XQA kernel for its G (:func:`xqa_reads`); else none (the preset's own
    count)."""
    reads = xqa_reads(case.model, case.tp, case.kv_dtype, beta)
    return [] if reads is None else [f"cost.decode_kv_reads={reads!r}"]


def run(cases: list[Case], beta: float) -> list[dict]:
    """The rows of ``cases`` replayed with the XQA rows' cache read ``1 + beta (G - 1)``
    times a step."""
    rate, _ = burst_rate_accepted()
    return [run_case(c, max_prompts=1000, burst_rate=rate, overrides=overrides(c, beta))
            for c in cases]


def main(argv: list[str] | None = None) -> int:
    return fit_main(argv, __doc__, CANDIDATES, run, lambda b: f"b {b:g}")


if __name__ == "__main__":
    raise SystemExit(main())
