"""Fit the SM cycles a decode walk takes per context token and layer (TensorRT-LLM engines
without multi-block mode, simulator/costs/decode_walk.py) to NIM 1.0's one-client A100 rows.

At one client a step's decode attention is one sequence's walk per head, heads side by
side, so the inter-token latency grows by layers x walk_s per context token. The slopes come
from benchmarks/nim_dli_check.py (six lengths per setting); the fit is the median slope of
the four A100 settings times the A100's boost clock. Held out: the eight H100 settings,
whose slopes the fit predicts through the H100's clock, and every multi-client row.

    python benchmarks/decode_walk_fit.py
"""

from __future__ import annotations

import statistics

from nim_dli_check import decode_slopes, table

from simulator.specs.hardware import BOOST_CLOCK_GHZ
from simulator.stack_presets import TRTLLM_WALK_CYCLES

GPUS = {"A100-SXM4-80GB": "a100-80gb", "H100_80GB_HBM3": "h100-sxm"}


def main() -> None:
    slopes = decode_slopes(table())
    a100 = [s for key, _, s in slopes if key[1] == "A100-SXM4-80GB"]
    cycles = statistics.median(a100) * BOOST_CLOCK_GHZ["a100-80gb"]
    print(f"A100 one-client slopes (ns per context token and layer): "
          f"{', '.join(f'{s:.1f}' for s in a100)}; median x 1.41 GHz = {cycles:.1f} cycles "
          f"(the trtllm 0.10/0.11 presets: {TRTLLM_WALK_CYCLES:g})")
    print("held out: H100 settings, measured slope vs the fit's cycles / 1.98 GHz")
    predicted = cycles / BOOST_CLOCK_GHZ["h100-sxm"]
    for key, _, slope in slopes:
        if key[1] != "H100_80GB_HBM3":
            continue
        print(f"   {key[0]:26s} x{key[2]} {key[3]:5s} measured {slope:5.1f} ns, fit "
              f"{predicted:4.1f} ns ({predicted / slope - 1:+.0%})")


if __name__ == "__main__":
    main()
