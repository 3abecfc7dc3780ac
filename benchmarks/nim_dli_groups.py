"""Where the NIM 1.0 course cases miss: a published.py JSON of them, grouped.

Prints, from the rows of ``python benchmarks/published.py --cases-file
benchmarks/published_cases_nim_dli.toml --json F``:

1. per input/output length and concurrency band (1-5, 10-50, 100-250 clients): the share of
   cases within 15% and the signed median error of the mean TTFT;
2. per setting (GPU, model, precision, GPU count): the one-client ITL error at the shortest
   (200/200) and the longest (7000/1000) context;
3. per setting, at 200/2000: measured minus simulated ITL in ms (a fixed time per step shows
   as the same gap at every client count), 1 to 100 clients;
4. per GPU, model and precision (both GPU counts), held-out rows at 10 clients or more:
   cases, signed median error and share within 15% of the ITL and the throughput;
5. per GPU, the in-sample A100 rows (FIT_GPU) apart from the held-out H100 rows, every
   metric the cases compare: cases, median |error|, share within 15%, signed median
   (published.py's group table, which leaves the in-sample rows out);
6. per GPU, prompt (200 tokens or longer) and concurrency band: the mean TTFT's and the p95
   TTFT's share within 15% and signed median (a replay whose rounds prefill together reads
   the p95 right and the mean high where the runs' rounds split);
7. per GPU, precision and concurrency band: the mean TPOT's and the mean TTFT's share within
   15% and signed median (what a factor on one precision's steps moves).

    python benchmarks/nim_dli_groups.py F
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from nim_dli_cases import FIT_GPU, REPEAT, course_rows, parse_id, parse_setting
from published import WITHIN, group_table

BANDS = ("1-5", "10-50", "100-250", ">250")  # concurrency bands, in order


def band(clients: int) -> str:
    """The concurrency band of ``clients`` (one of BANDS)."""
    return BANDS[(clients > 5) + (clients > 50) + (clients > 250)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", type=Path, help="published.py --json output of the course cases")
    rows = course_rows(ap.parse_args(argv).json)
    ttft: dict[tuple[str, str], list[float]] = defaultdict(list)
    itl: dict[str, dict[str, float]] = defaultdict(dict)
    gap: dict[str, dict[int, float]] = defaultdict(dict)
    busy: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        setting, lengths, clients = parse_id(r["id"])
        ttft[(lengths, band(clients))].append(r["metrics"]["mean_ttft_ms"]["error"])
        tpot = r["metrics"]["mean_tpot_ms"]
        if clients == 1:
            itl[setting][lengths] = tpot["error"]
        if lengths == "200/2000" and clients <= 100 and not r["id"].endswith(REPEAT):
            gap[setting][clients] = tpot["published"] - tpot["simulated"]
        if clients >= 10 and not r.get("fitted"):
            gpu, model, precision, _ = parse_setting(setting)
            kind = f"{gpu}-{model}-{precision}"
            for metric in ("mean_tpot_ms", "output_throughput"):
                busy[kind][metric].append(r["metrics"][metric]["error"])
    print("1. mean TTFT by lengths and clients: cases, within 15%, signed median error")
    for (lengths, clients), errors in sorted(ttft.items()):
        within = sum(abs(e) <= WITHIN for e in errors) / len(errors)
        print(f"   {lengths:10s} {clients:>7s} clients  {len(errors):3d}  {within:4.0%}  "
              f"{statistics.median(errors):+7.1%}")
    print("2. one-client ITL error, 200/200 and 7000/1000")
    for setting, errors in sorted(itl.items()):
        print(f"   {setting:34s} {errors.get('200/200', float('nan')):+7.1%}  "
              f"{errors.get('7000/1000', float('nan')):+7.1%}")
    print("3. ITL measured minus simulated, ms, 200/2000, by clients")
    for setting, by_clients in sorted(gap.items()):
        print(f"   {setting:34s} " + " ".join(f"c{c}:{g:+5.1f}"
                                              for c, g in sorted(by_clients.items())))
    print("4. held out, 10 clients or more: cases; ITL and throughput signed median, within 15%")
    for kind, metrics in sorted(busy.items()):
        cells = [f"{statistics.median(v):+7.1%} {sum(abs(e) <= WITHIN for e in v) / len(v):4.0%}"
                 for v in metrics.values()]
        print(f"   {kind:28s} {len(metrics['mean_tpot_ms']):3d}  ITL {cells[0]}  "
              f"throughput {cells[1]}")
    print("5. per GPU, every metric: cases, median |error|, within 15%, signed median")
    for g in gpu_table(rows):
        if g["group"] != "all":
            print(f"   {g['group']:24s} {g['metric']:18s} {g['n']:4d}  "
                  f"{g['median_abs_error']:6.1%}  {g['within_15']:4.0%}  "
                  f"{g['signed_median']:+7.1%}")
    print("6. mean and p95 TTFT by GPU, prompt and clients: cases; within 15%, signed median")
    for key, cells in mean_and_tail(rows).items():
        print(f"   {' '.join(key):28s} {cells['n']:4d}  mean {cells['mean_ttft_ms'][0]:4.0%} "
              f"{cells['mean_ttft_ms'][1]:+7.1%}  p95 {cells['p95_ttft_ms'][0]:4.0%} "
              f"{cells['p95_ttft_ms'][1]:+7.1%}")
    print("7. mean TPOT and TTFT by GPU, precision and clients: cases; within 15%, signed median")
    for key, cells in by_precision(rows).items():
        print(f"   {' '.join(key):28s} {cells['n']:4d}  TPOT {cells['mean_tpot_ms'][0]:4.0%} "
              f"{cells['mean_tpot_ms'][1]:+7.1%}  TTFT {cells['mean_ttft_ms'][0]:4.0%} "
              f"{cells['mean_ttft_ms'][1]:+7.1%}")


def shares(rows: list[dict], key_of: Callable[[str, str, int], tuple[str, str, str]],
           metrics: tuple[str, ...]) -> dict[tuple[str, str, str], dict]:
    """Per key (``key_of(setting, lengths, clients)``; its last field a concurrency band),
    sorted with the bands in order: the rows' count and, per metric, (share within 15%,
    signed median error)."""
    errors: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list))
    for r in rows:
        key = key_of(*parse_id(r["id"]))
        for metric in metrics:
            errors[key][metric].append(r["metrics"][metric]["error"])
    out = {}
    for key in sorted(errors, key=lambda k: (k[0], k[1], BANDS.index(k[2]))):
        cells: dict = {"n": len(errors[key][metrics[0]])}
        for metric, v in errors[key].items():
            cells[metric] = (sum(abs(e) <= WITHIN for e in v) / len(v), statistics.median(v))
        out[key] = cells
    return out


def mean_and_tail(rows: list[dict]) -> dict[tuple[str, str, str], dict]:
    """Per (GPU, "short" (200-token) or "long" prompts, concurrency band), in that order:
    the rows' count and, for the mean and the p95 TTFT, (share within 15%, signed median
    error)."""
    def key(setting: str, lengths: str, clients: int) -> tuple[str, str, str]:
        prompt = "short" if lengths.split("/")[0] == "200" else "long"
        return parse_setting(setting)[0], prompt, band(clients)
    return shares(rows, key, ("mean_ttft_ms", "p95_ttft_ms"))


def by_precision(rows: list[dict]) -> dict[tuple[str, str, str], dict]:
    """Per (GPU, precision, concurrency band): the rows' count and, for the mean TPOT and
    the mean TTFT, (share within 15%, signed median error)."""
    def key(setting: str, lengths: str, clients: int) -> tuple[str, str, str]:
        gpu, _, precision, _ = parse_setting(setting)
        return gpu, precision, band(clients)
    return shares(rows, key, ("mean_tpot_ms", "mean_ttft_ms"))


def gpu_table(rows: list[dict]) -> list[dict]:
    """published.py's group table of ``rows`` grouped by GPU, the in-sample rows kept (they
    are FIT_GPU's, so they stay apart from the held-out ones)."""
    by_gpu = []
    for r in rows:
        gpu = parse_setting(parse_id(r["id"])[0])[0]
        label = f"{gpu} ({'in sample' if gpu == FIT_GPU else 'held out'})"
        by_gpu.append({**r, "group": label, "fitted": ""})
    return group_table(by_gpu)


if __name__ == "__main__":
    main()
