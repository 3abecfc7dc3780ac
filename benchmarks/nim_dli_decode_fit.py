"""Fit NIM 1.0's 16-bit decode factor on the course's A100 rows.

At one client, NIM 1.0's FP16 / BF16 engines (TensorRT-LLM 0.10) take 4-9% longer a token
than the 1.x kernel tables price, with the trtllm 0.10 preset's fitted decode walk and
all-reduce handshake in place, on both GPUs (the A100's 8B TP 1-2 and 70B TP 4-8, and the
H100's); the same course's FP8 engines read within a few percent. This replays the course's
A100 rows (the fit set, all 16-bit; benchmarks/published_cases_nim_dli.toml) with
``cost.decode_scale = D`` on the 16-bit rows for each candidate D (simulator/costs/
prefill_pass.py: every step with decode rows D x as long; steps that only prefill keep
the preset's own factor), and picks the D with the most mean-TTFT and mean-TPOT errors
within 15% (benchmarks/nim_dli_budget_fit.py ``choose``; ties: the smaller median |TTFT
error|). With ``--held-out`` it prints the H100 rows at each candidate too (FP8 rows
unchanged): they are not used in the choice.

    python benchmarks/nim_dli_decode_fit.py               # the fit set only (~5 min)
    python benchmarks/nim_dli_decode_fit.py --held-out    # and the H100 rows (~15 min)
    python benchmarks/nim_dli_decode_fit.py --sync 1.7    # the handshake at k NCCL latencies

``--sync k`` sets the all-reduce handshake to k x the GPU's NCCL small-message latency per
multi-GPU case (``cost.allreduce_sync_s``) instead of the preset's 1.27: the joint grid
docs/stacks.md quotes ("NIM 1.0's 16-bit decode steps") is this at k = 1.7.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.nim_dli_budget_fit import fit_main  # noqa: E402
from benchmarks.nim_dli_cases import SIXTEEN_BIT  # noqa: E402
from benchmarks.published import run_case  # noqa: E402
from benchmarks.published_cases import Case, burst_rate_accepted  # noqa: E402
from simulator.costs.collectives import allreduce_curve  # noqa: E402

CANDIDATES = (1.0, 1.04, 1.08, 1.10, 1.12, 1.14, 1.16)


def overrides(case: Case, scale: float, sync: float | None = None) -> list[str]:
    """``case``'s settings at ``scale``: its decode factor if its weights are 16-bit, else
    none (the FP8 rows as the case file gives them); with ``sync``, its all-reduce
    handshake at ``sync`` NCCL latencies where it has more than one GPU."""
    out = [f"cost.decode_scale={scale}"] if case.weight_dtype in SIXTEEN_BIT else []
    curve = allreduce_curve(case.gpu, case.tp) if sync is not None and case.tp > 1 else None
    if curve is not None:
        out.append(f"cost.allreduce_sync_s={sync * curve.latency_s!r}")
    return out


def run(cases: list[Case], scale: float, sync: float | None = None) -> list[dict]:
    """The rows of ``cases`` replayed with the 16-bit rows' decode steps ``scale`` x the
    tables (and the handshake at ``sync`` NCCL latencies when given)."""
    rate, _ = burst_rate_accepted()
    return [run_case(c, max_prompts=1000, burst_rate=rate, overrides=overrides(c, scale, sync))
            for c in cases]


def main(argv: list[str] | None = None) -> int:
    return fit_main(argv, __doc__, CANDIDATES, run, lambda d: f"x {d:g}", option="sync")


if __name__ == "__main__":
    raise SystemExit(main())
