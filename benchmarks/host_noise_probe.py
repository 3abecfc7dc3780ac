"""Where a lent GPU machine's step-time swings come from: the host, the GPU's clocks, or a core.

    python benchmarks/host_noise_probe.py --out probe.csv [--model llama-3.1-8b] [--seconds 50]

The reference engine is eager PyTorch: at small batches a step is bound by the host
launching ~1,000 kernels, not by the GPU. On the first lent H200 (docs/gpu-profiles.md,
"The reference engine on an H200") the same 16-row decode step took 26-28 ms in some
5-second windows and 67-104 ms in others. This separates the suspects, in one series:

- each row times one probe round (engine/speed_probe.py's three shapes, 4 repeats each);
- ``spin_ms``: a fixed pure-Python loop timed just before, so a slow host shows there too;
- ``sm_mhz``: the GPU's SM clock read through NVML right after the round;
- ``steal`` / ``busy``: the machine's CPU steal and busy fractions since the last row
  (/proc/stat), i.e. time taken by the hypervisor / by every process here;
- the second half runs pinned to one core (``pinned``), the first half free to migrate.

Prints the medians and spreads per half and the correlation of step time with each
suspect; writes every row to ``--out``. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu_times() -> tuple[int, int, int]:
    """(total, busy, steal) jiffies from /proc/stat's aggregate cpu line."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    steal = fields[7] if len(fields) > 7 else 0
    return sum(fields), sum(fields) - idle - steal, steal


def spin() -> float:
    """Milliseconds for a fixed pure-Python loop: the host's single-thread speed now."""
    t0 = time.perf_counter()
    acc = 0
    for i in range(200_000):
        acc += i * i % 7
    return (time.perf_counter() - t0) * 1e3


def corr(xs: list[float], ys: list[float]) -> float:
    """Pearson correlation (0 where either series is constant)."""
    if len(xs) < 3 or any(y != y for y in ys) or len(set(xs)) < 2 or len(set(ys)) < 2:
        return 0.0  # too short, NaN (no NVML) or constant
    return statistics.correlation(xs, ys)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--seconds", type=float, default=50.0, help="per half")
    args = ap.parse_args()

    import torch

    from engine.models import build_model
    from engine.speed_probe import probe

    device = "cuda" if torch.cuda.is_available() else "cpu"
    nvml = None
    if device == "cuda":
        try:
            import pynvml

            pynvml.nvmlInit()
            nvml = (pynvml, pynvml.nvmlDeviceGetHandleByIndex(0))
        except Exception as exc:  # no NVML here: clocks are left out
            print(f"no NVML ({exc}); sm_mhz left empty")
    em = build_model(args.model, dtype="bf16" if device == "cuda" else "fp32", device=device)
    probe(em, repeats=2)  # warm-up
    rows = ["t_s,pinned,spin_ms,decode4_ms,decode1_ms,prefill128_ms,sm_mhz,steal,busy"]
    series: dict[bool, list[tuple[float, ...]]] = {False: [], True: []}
    t_start = time.perf_counter()
    last = cpu_times()
    for pinned in (False, True):
        if pinned:
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
        t_half = time.perf_counter()
        while time.perf_counter() - t_half < args.seconds:
            s = spin()
            steps = [r["time_s"] * 1e3 for r in probe(em, repeats=4)]
            mhz = (nvml[0].nvmlDeviceGetClockInfo(nvml[1], nvml[0].NVML_CLOCK_SM)
                   if nvml else float("nan"))
            now = cpu_times()
            total = max(now[0] - last[0], 1)
            steal, busy = (now[2] - last[2]) / total, (now[1] - last[1]) / total
            last = now
            row = (time.perf_counter() - t_start, s, *steps, float(mhz), steal, busy)
            series[pinned].append(row)
            rows.append(f"{row[0]:.2f},{int(pinned)},{s:.3f},{steps[0]:.3f},{steps[1]:.3f},"
                        f"{steps[2]:.3f},{mhz},{steal:.4f},{busy:.4f}")
    args.out.write_text("\n".join(rows) + "\n")
    print(f"{em.spec.name} on {device}; {len(rows) - 1} rounds; wrote {args.out}")
    for pinned, part in series.items():
        if not part:
            continue
        cols = list(zip(*part, strict=True))
        d4 = list(cols[2])
        print(f"{'pinned to one core' if pinned else 'free to migrate  '}: decode4 median "
              f"{statistics.median(d4):.1f} ms [{min(d4):.1f}, {max(d4):.1f}], spin median "
              f"{statistics.median(cols[1]):.1f} ms [{min(cols[1]):.1f}, {max(cols[1]):.1f}], "
              f"SM {statistics.median(cols[5]):.0f} MHz [{min(cols[5]):.0f}, "
              f"{max(cols[5]):.0f}], steal max {max(cols[6]):.1%}")
        print(f"   correlation of decode4 with spin {corr(d4, list(cols[1])):+.2f}, with SM clock "
              f"{corr(d4, list(cols[5])):+.2f}, with steal {corr(d4, list(cols[6])):+.2f}, with "
              f"busy {corr(d4, list(cols[7])):+.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
