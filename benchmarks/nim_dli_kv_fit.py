"""Fit NIM 1.0's KV memory fraction on the course's A100 rows.

NIM 1.0 does not state how much of each GPU its engines gave the KV cache: TensorRT-LLM
takes 0.9 of the memory free once the engine is loaded, and what the engine's activations
and buffers hold depends on how it was built. The replay sizes the cache as the [kv]
section does (``gpu_memory_utilization`` of each GPU's memory for the weights and the
cache). At many clients the course's KV-bound rows read TTFT fast and TPOT slow with 0.9:
the replay holds more sequences than the engines did. This replays the course's A100 rows
(the fit set; benchmarks/published_cases_nim_dli.toml, with its other fits in place) at
each candidate fraction and picks the one with the most mean-TTFT and mean-TPOT errors
within 15% (benchmarks/nim_dli_budget_fit.py ``choose``; ties: the smaller median |TTFT
error|). With ``--held-out`` it prints the H100 rows at each candidate too: they are not
used in the choice.

    python benchmarks/nim_dli_kv_fit.py               # the fit set only (~6 min)
    python benchmarks/nim_dli_kv_fit.py --held-out    # and the H100 rows (~18 min)

``--free`` fits the fraction as TensorRT-LLM's own rule reads it, a share of the memory the
weights leave free (``[kv] memory_share = "free"``, the later trtllm presets' rule), over
FREE_CANDIDATES: the check behind the 0.10 preset keeping "total" (docs/stacks.md,
"TensorRT-LLM's KV cache: a share of the free memory").
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.nim_dli_budget_fit import fit_main  # noqa: E402
from benchmarks.published import run_case  # noqa: E402
from benchmarks.published_cases import Case, burst_rate_accepted  # noqa: E402

CANDIDATES = (0.75, 0.8, 0.825, 0.8375, 0.85, 0.8625, 0.875, 0.8875, 0.9)
FREE_CANDIDATES = (0.7, *CANDIDATES)  # a share of less memory reaches the same cache higher


def run(cases: list[Case], fraction: float, share: str = "total") -> list[dict]:
    """The rows of ``cases`` replayed with ``fraction`` of each GPU's memory for the
    weights and the KV cache (``share`` "free": of what the weights leave free)."""
    rate, _ = burst_rate_accepted()
    overrides = [f"kv.gpu_memory_utilization={fraction}", f"kv.memory_share='{share}'"]
    return [run_case(c, max_prompts=1000, burst_rate=rate, overrides=overrides)
            for c in cases]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    share = "free" if "--free" in args else "total"
    args = [a for a in args if a != "--free"]
    return fit_main(args, __doc__, FREE_CANDIDATES if share == "free" else CANDIDATES,
                    lambda cases, u: run(cases, u, share), lambda u: f"{u:g}")


if __name__ == "__main__":
    raise SystemExit(main())
