"""Fit the 0.10 engines' extra weight passes a prefill step (simulator/costs/prefill_pass.py)
to NIM 1.0's one-client A100 rows of 200-token prompts.

At one client a 200-token prompt is one prefill step, and the measured TTFT runs over the
simulated by about the time one pass over a GPU's weights takes at peak bandwidth. Per
setting (GPU, model, precision, GPU count) the gap is the median over its three 200-token
rows (200/200, 200/1000, 200/2000) of measured minus simulated mean TTFT, from a run
without the term::

    python benchmarks/published.py --cases-file benchmarks/published_cases_nim_dli.toml \\
        --set cost.prefill_pass_s=0 --json F
    python benchmarks/prefill_pass_fit.py F

k = gap / (weight bytes per GPU / HBM bandwidth); the fit is the median k of the four A100
settings (in sample); the eight H100 settings are held out, as is every longer prompt and
every multi-client row. The preset's 0.95 was read so before the 0.10 steps' factor
(TRTLLM_010_PREFILL_SCALE); with the factor in place this rule reads 0.63, and the preset
keeps 0.95, which a joint grid on the course fits' rule prefers (docs/stacks.md,
"TensorRT-LLM 0.10's prefill steps, in proportion").
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from nim_dli_cases import (
    FIT_GPU,
    course_rows,
    fitted_k,
    parse_id,
    parse_setting,
    print_fit,
)

from simulator.costs.prefill_pass import weight_pass_s
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model
from simulator.stack_presets import TRTLLM_010_PREFILL_PASSES

SHORT_PROMPT = "200/"  # the lengths whose one-client TTFT is one short prefill step


def one_client_gaps(rows: list[dict]) -> dict[str, float]:
    """Per setting: median over its 200-token rows of measured minus simulated one-client
    mean TTFT, s."""
    gaps: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        setting, lengths, clients = parse_id(r["id"])
        ttft = r["metrics"].get("mean_ttft_ms") or {}
        if clients == 1 and lengths.startswith(SHORT_PROMPT) and ttft.get("simulated"):
            gaps[setting].append((ttft["published"] - ttft["simulated"]) / 1e3)
    return {s: statistics.median(v) for s, v in gaps.items()}


def passes(gaps: dict[str, float]) -> list[tuple[str, float, float, float]]:
    """(setting, gap in s, one weight pass in s, k) per setting."""
    out = []
    for setting, gap in sorted(gaps.items()):
        gpu, model, precision, tp = parse_setting(setting)
        one = weight_pass_s(get_model(model), get_hardware(gpu), tp,
                            "fp8" if precision == "fp8" else "fp16")
        out.append((setting, gap, one, gap / one))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", type=Path, help="published.py --json of the course cases, "
                    "run with --set cost.prefill_pass_s=0")
    rows = course_rows(ap.parse_args(argv).json)
    found = passes(one_client_gaps(rows))
    fit = fitted_k(found)
    print(f"fit on {FIT_GPU}: k = {fit:.2f} weight passes a prefill step "
          f"(the trtllm 0.10 preset: {TRTLLM_010_PREFILL_PASSES:g})")
    print_fit(found, fit, 1e3, "ms", "gap", "one pass")


if __name__ == "__main__":
    main()
