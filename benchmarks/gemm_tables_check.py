"""AIConfigurator's GEMM tables against the GPU at hand: the same (m, n, k), timed here.

Two halves, run on two machines:

    python benchmarks/gemm_tables_check.py --measure OUT.csv        # on a CUDA GPU
    python benchmarks/gemm_tables_check.py --compare OUT.csv --data <aiconfigurator_core/systems>

``--measure`` times ``torch.nn.functional.linear`` in bf16 (what vLLM's table calls
``torch.nn.functional.linear``) and ``torch._scaled_mm`` in fp8 e4m3 with per-tensor scales
(cuBLASLt; vLLM's table times CUTLASS's kernel, SGLang's sgl-kernel's, so the fp8 rows
compare kernels of one family, not the same kernel) at the tables' grid points: the
aligned m and m + 1 (the tables' saw-tooth, docs/gpu-profiles.md "Small mixed steps") for
six (n, k) pairs that Llama-3.1-8B's and 70B's projections sit near. Each point is the
median of 7 event-timed loops of 20 calls, cycling over enough weight copies that the
weights do not stay in L2 (METHOD.md: never time a cached weight), on random inputs.
Where cuBLASLt refuses an m that is not a multiple of 16, the fp8 row pads m up, as
vLLM's torch fallback does, and says so (``padded``).

``--compare`` joins the CSV with each framework's table for the GPU it names (``gpu``
column, the catalogue key engine/sweep.py ``hardware_name`` gives the device; its
AIConfigurator system from calibrate/aic_backends.py ``systems``) and prints measured /
table per (dtype, m) over the (n, k) pairs, median and range, and the jump from m to m + 1
in both. No torch there.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script

M_GRID = (1, 2, 4, 8, 16, 32, 33, 64, 65, 128, 129, 256, 257, 512, 513, 1024, 1025,
          2048, 2049, 4096, 4097, 8192, 16384)
NK = ((4096, 4096), (6144, 4096), (16384, 4096), (4096, 16384), (8192, 8192),
      (10240, 8192))
L2_BYTES = 64 << 20


def measure(out: Path) -> int:
    """Time every (dtype, m, n, k) on this CUDA GPU; write one CSV row per point."""
    import torch

    from engine.sweep import hardware_name

    if not torch.cuda.is_available():
        sys.exit("gemm_tables_check --measure: no CUDA GPU here")
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(dev)
    gpu = hardware_name(dev)
    rows = ["device,gpu,dtype,m,n,k,latency_ms,padded"]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    one = torch.ones((), device=dev, dtype=torch.float32)
    for n, k in NK:
        copies = max(2, -(-3 * L2_BYTES // (2 * n * k)))  # weights well past L2 across a loop
        w16 = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(copies)]
        w8 = [w.to(torch.float8_e4m3fn) for w in w16]
        for m in M_GRID:
            x16 = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            pad = -(-m // 16) * 16
            x8 = torch.randn(pad, k, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
            calls = {
                "bfloat16": (lambda i, x=x16, w=w16: torch.nn.functional.linear(x, w[i % len(w)]),
                             False),
                "fp8": (lambda i, x=x8, w=w8: torch._scaled_mm(
                    x, w[i % len(w)].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                        pad != m),
            }
            for dtype, (call, padded) in calls.items():
                for i in range(5):  # warm-up: handles, heuristics, clocks
                    call(i)
                times = []
                for _ in range(7):
                    start.record()
                    for i in range(20):
                        call(i)
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end) / 20)
                rows.append(f"{name},{gpu},{dtype},{m},{n},{k},{statistics.median(times):.6f},"
                            f"{int(padded)}")
        del w16, w8
        torch.cuda.empty_cache()
    out.write_text("\n".join(rows) + "\n")
    print(f"wrote {len(rows) - 1} points on {name} to {out}")
    return 0


def compare(csv: Path, data: Path) -> int:
    """Measured over each framework's table, per dtype and m."""
    import pandas as pd

    from calibrate.aic_backends import systems

    here = pd.read_csv(csv)
    gpu = str(here["gpu"].iloc[0])
    if gpu not in systems("trtllm"):
        sys.exit(f"{csv}: no AIConfigurator system for GPU {gpu!r}")
    system = systems("trtllm")[gpu][0]
    root = data / system if (data / system).is_dir() else data / "data" / system
    print(f"{csv}: {len(here)} points on {here['device'].iloc[0]} vs {root}/gemm")
    for table in sorted((root / "gemm").glob("*/*/gemm_perf.parquet")):
        tab = pd.read_parquet(table)
        tab = tab[tab["kernel_source"].isin(["torch.nn.functional.linear", "torch_flow",
                                             "sglang_torch_linear",
                                             "CutlassFP8ScaledMMLinearKernel",
                                             "sglang_sgl_kernel_fp8_scaled_mm"])]
        both = here.merge(tab, left_on=["dtype", "m", "n", "k"],
                          right_on=["gemm_dtype", "m", "n", "k"])
        if both.empty:
            continue
        both["ratio"] = both["latency_ms"] / both["latency"]
        print(f"\n{table.parent.parent.name} {table.parent.name}: measured / table "
              "(median over the (n, k) pairs, [min, max]); m+1 jump = time(m+1) / time(m)")
        for dtype, part in both.groupby("dtype"):
            kernels = ", ".join(sorted(part["kernel_source"].unique()))
            print(f"  {dtype} ({kernels}):")
            for m, g in part.groupby("m"):
                line = (f"    m {m:>6}: {g['ratio'].median():5.2f} "
                        f"[{g['ratio'].min():.2f}, {g['ratio'].max():.2f}]")
                nxt = part[part["m"] == m + 1]
                if m + 1 in set(part["m"]) and m > 16:
                    j = g.merge(nxt, on=["n", "k"], suffixes=("", "_1"))
                    here_jump = (j["latency_ms_1"] / j["latency_ms"]).median()
                    table_jump = (j["latency_1"] / j["latency"]).median()
                    line += f"   m+1 jump here {here_jump:.2f}, table {table_jump:.2f}"
                print(line)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--measure", type=Path, metavar="OUT.csv")
    ap.add_argument("--compare", type=Path, metavar="OUT.csv")
    ap.add_argument("--data", type=Path, help="aiconfigurator_core/systems (with --compare)")
    args = ap.parse_args()
    if args.measure:
        return measure(args.measure)
    if args.compare and args.data:
        return compare(args.compare, args.data)
    ap.error("give --measure OUT.csv, or --compare OUT.csv --data DIR")
    return 2


if __name__ == "__main__":
    sys.exit(main())
