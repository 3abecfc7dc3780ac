"""What NVIDIA's "Sizing LLM Inference Systems" course data says about its client and engine.

Prints, from benchmarks/published_runs/nim_dli/ (the course's GenAI-Perf exports and table):

1. Lockstep: in the per-request exports (Llama-3-8B, 200 input / 50 output tokens, 1, 2
   and 5 clients), how many rounds of C requests were sent within 1 ms of each other, and
   in how many all C first responses came within 2 ms of each other; the TTFT of the first
   round and of the rest.
2. Repeats: the table measured concurrency 5 twice per setting; how far apart the two runs'
   figures are (the noise floor of one published figure).
3. Decode at batch 1: per setting, the inter-token latency at one client against the
   context length (six input/output shapes), as a slope in ns per context token and
   layer.
4. The client's turnaround in the same exports: from a request's last response to the
   next send of a client (the n-th send of a round after the n-th end of the round before),
   its mean, spread and range, and the mean over all three exports (the think time the
   course's cases replay: benchmarks/nim_dli_cases.py CLIENT_TURNAROUND_S).
5. ITL percentiles: per concurrency, the rows whose p95 inter-token latency is below their
   mean. GenAI-Perf before 2024-06-06 (github:triton-inference-server/client f35df0fd,
   "Update ITL calculation") took its ITL statistics over every gap between two responses,
   pooled over the requests; after it, over one (E2E - TTFT) / (output - 1) a request. A
   pooled p95 falls below the mean where a few gaps hold a prefill; per-request ITLs of
   requests that share their steps hardly spread so (the course's cases compare servesim's
   pooled p95 ITL: benchmarks/nim_dli_cases.py).
6. One client's TTFT against the output asked for: per setting and prompt length, the mean
   TTFT at 200, 1,000 and 2,000 output tokens (200-token prompts) or 200 and 2,000
   (2,000-token prompts) and the least-squares slope in us per output token. A prompt's
   prefill does not depend on how many tokens are asked after it; these rise in every
   pair (docs/gpu-profiles.md, "What stop 69 looked at").

    python benchmarks/nim_dli_check.py
"""

from __future__ import annotations

import csv
import statistics
from collections import defaultdict
from pathlib import Path

from nim_dli_cases import table_rows

HERE = Path(__file__).parent / "published_runs" / "nim_dli"
LAYERS = {"meta-llama3-8b-instruct": 32, "meta-llama3-70b-instruct": 80}


def rounds(path: Path, clients: int) -> list[list[dict[str, float]]]:
    """The export's requests in send order, cut into rounds of ``clients``."""
    with open(path, newline="") as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    rows.sort(key=lambda r: r["send_us"])
    return [rows[i:i + clients] for i in range(0, len(rows) - clients + 1, clients)]


def lockstep(clients: int) -> dict[str, float]:
    """Round statistics of the export at ``clients``: rounds, rounds sent within 1 ms,
    rounds answered within 2 ms, round 1's (send after its first, TTFT) a request, mean TTFT
    of round 1 and of the rest (ms)."""
    rs = rounds(HERE / f"llama3-8b-200-50-c{clients}.csv", clients)
    sent = sum(1 for r in rs if max(x["send_us"] for x in r) - min(x["send_us"] for x in r)
               <= 1000)
    firsts = [[x["send_us"] + x["first_response_us"] for x in r] for r in rs]
    answered = sum(1 for f in firsts if max(f) - min(f) <= 2000)
    ttft = [[x["first_response_us"] / 1000 for x in r] for r in rs]
    later = [t for r in ttft[1:] for t in r]
    return {"rounds": len(rs), "sent_together": sent, "answered_together": answered,
            "first_round": [((x["send_us"] - rs[0][0]["send_us"]) / 1000,
                             x["first_response_us"] / 1000) for x in rs[0]],
            "first_round_ttft_ms": statistics.fmean(ttft[0]),
            "later_ttft_ms": statistics.fmean(later) if later else float("nan")}


def turnarounds(clients: int) -> list[float]:
    """Microseconds from an end to the next send, in every round after the first of the
    export at ``clients``: the round's sends in order, each after the previous round's
    ends in order (the client whose request ended first sends first)."""
    rs = rounds(HERE / f"llama3-8b-200-50-c{clients}.csv", clients)
    out: list[float] = []
    for before, now in zip(rs, rs[1:], strict=False):
        ends = sorted(x["send_us"] + x["last_response_us"] for x in before)
        out += [s - e for e, s in zip(ends, sorted(x["send_us"] for x in now), strict=True)]
    return out


def mean_turnaround_s() -> float:
    """The mean turnaround over the three exports' rounds, in seconds."""
    return statistics.fmean([t for c in (1, 2, 5) for t in turnarounds(c)]) / 1e6


def table_turnarounds(rows: list[dict[str, str]]) -> dict[int, list[float]]:
    """Per output length, each one-client row's time per request beyond its mean latency,
    in us: output tokens / output throughput - mean request latency (an upper bound of the
    turnaround: it also holds the first send's lead and the windows' edges)."""
    out: dict[int, list[float]] = defaultdict(list)
    for row in rows:
        if row["input_config-concurrency"] == "1":
            osl = int(row["input_config-output_tokens_mean"])
            per_request_s = float(row["num_output_token-avg"]) / float(
                row["output_token_throughput-avg"])
            out[osl].append((per_request_s - float(row["request_latency-avg"]) / 1e9) * 1e6)
    return out


def table() -> list[dict[str, str]]:
    """The sweep table's rows (benchmarks/nim_dli_cases.py TABLE)."""
    return table_rows()


def setting(row: dict[str, str]) -> tuple[str, ...]:
    """Model, GPU, GPU count, precision."""
    return (row["task_inputs-model"], row["task_inputs-GPU"], row["task_inputs-n_gpus"],
            row["task_inputs-precision"])


def repeats(rows: list[dict[str, str]]) -> dict[str, list[float]]:
    """|run 2 / run 1 - 1| per metric over the settings measured twice at one point."""
    seen: dict[tuple[str, ...], dict[str, str]] = {}
    out: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        key = (*setting(row), row["input_config-synthetic_input_tokens_mean"],
               row["input_config-output_tokens_mean"], row["input_config-concurrency"])
        if key in seen:
            for metric in ("time_to_first_token-avg", "inter_token_latency-avg",
                           "output_token_throughput-avg"):
                out[metric].append(abs(float(row[metric]) / float(seen[key][metric]) - 1))
        else:
            seen[key] = row
    return out


def decode_slopes(rows: list[dict[str, str]]) -> list[tuple[tuple[str, ...], float, float]]:
    """Per setting: the one-client ITL (ms) at the shortest context, and the least-squares
    slope of ITL against the mean context (input + output / 2) in ns per token and layer."""
    points: dict[tuple[str, ...], list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        if row["input_config-concurrency"] != "1":
            continue
        context = (float(row["input_config-synthetic_input_tokens_mean"])
                   + float(row["input_config-output_tokens_mean"]) / 2)
        points[setting(row)].append((context, float(row["inter_token_latency-avg"]) / 1e6))
    out = []
    for key, pts in sorted(points.items()):
        slope = statistics.linear_regression(*zip(*pts, strict=True)).slope  # ms a token
        shortest = min(pts)[1]
        out.append((key, shortest, slope * 1e6 / LAYERS[key[0]]))
    return out


def ttft_by_output(rows: list[dict[str, str]]
                   ) -> list[tuple[tuple[str, ...], int, list[tuple[int, float]], float]]:
    """Per setting and prompt length with two or more output lengths at one client: the
    (output tokens, mean TTFT ms) points, the first run of a repeated point, and the
    least-squares slope of TTFT against the output length in us per output token."""
    points: dict[tuple[tuple[str, ...], int], dict[int, float]] = defaultdict(dict)
    for row in rows:
        if row["input_config-concurrency"] != "1":
            continue
        where = (setting(row), int(row["input_config-synthetic_input_tokens_mean"]))
        osl = int(row["input_config-output_tokens_mean"])
        points[where].setdefault(osl, float(row["time_to_first_token-avg"]) / 1e6)
    out = []
    for (key, isl), by_osl in sorted(points.items()):
        pts = sorted(by_osl.items())
        if len(pts) < 2:
            continue
        slope = statistics.linear_regression(*zip(*pts, strict=True)).slope  # ms a token
        out.append((key, isl, pts, slope * 1e3))
    return out


def itl_p95_below_mean(rows: list[dict[str, str]]) -> dict[int, tuple[int, int]]:
    """Per concurrency: (rows, rows whose p95 inter-token latency is below its mean). Per
    request ITLs of requests that share every step sit near their mean; gaps pooled over
    every response do not: most are one decode step, a few hold a prefill."""
    out: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        counts = out[int(row["input_config-concurrency"])]
        counts[0] += 1
        counts[1] += float(row["inter_token_latency-p95"]) < float(row["inter_token_latency-avg"])
    return {c: (n, below) for c, (n, below) in sorted(out.items())}


def main() -> None:
    print("1. lockstep in the per-request exports (Llama-3-8B, 200 in / 50 out, NIM 1.0.3):")
    for clients in (1, 2, 5):
        s = lockstep(clients)
        print(f"   {clients} client(s): {s['rounds']:.0f} rounds, {s['sent_together']:.0f} sent "
              f"within 1 ms, {s['answered_together']:.0f} answered within 2 ms; mean TTFT "
              f"round 1 {s['first_round_ttft_ms']:.1f} ms, later rounds "
              f"{s['later_ttft_ms']:.1f} ms")
        print("     round 1, each request's send (ms after the first) and TTFT (ms): "
              + ", ".join(f"{sent:.2f} -> {t:.1f}" for sent, t in s["first_round"]))
    rows = table()
    print("2. the table's repeated points (concurrency 5, two runs): median |run 2 / run 1 - 1|")
    for metric, diffs in repeats(rows).items():
        p90 = sorted(diffs)[int(0.9 * len(diffs))]
        print(f"   {metric:30s} {len(diffs)} pairs: median {statistics.median(diffs) * 100:.1f}%, "
              f"90th percentile {p90 * 100:.1f}%, max {max(diffs) * 100:.1f}%")
    print("3. one client: ITL at the shortest context and its growth with context")
    for key, shortest, slope in decode_slopes(rows):
        print(f"   {key[0]:26s} {key[1]:15s} x{key[2]} {key[3]:5s}  ITL {shortest:6.2f} ms, "
              f"+{slope:5.1f} ns per context token and layer")
    print("4. the client's turnaround, last response to next send (the exports of part 1):")
    for clients in (1, 2, 5):
        t = turnarounds(clients)
        print(f"   {clients} client(s): {len(t)} sends, mean {statistics.fmean(t):.0f} us, "
              f"median {statistics.median(t):.0f}, sd {statistics.pstdev(t):.0f}, "
              f"{min(t):.0f}-{max(t):.0f} us")
    print(f"   all: mean {mean_turnaround_s() * 1e6:.0f} us")
    print("   the table's one-client rows, output tokens / throughput - mean latency:")
    for osl, gaps in sorted(table_turnarounds(rows).items()):
        print(f"   {osl:5d} output tokens: {len(gaps)} rows, median {statistics.median(gaps):.0f} "
              f"us, {min(gaps):.0f}-{max(gaps):.0f} us")
    print("5. ITL percentiles: rows whose p95 inter-token latency is below its mean")
    found = itl_p95_below_mean(rows)
    print("   " + ", ".join(f"{c} clients {below} of {n}" for c, (n, below) in found.items()))
    print(f"   all: {sum(b for _, b in found.values())} of {len(rows)} rows")
    print("6. one client's mean TTFT (ms) against the output tokens asked for")
    found6 = ttft_by_output(rows)
    for key, isl, pts, slope in found6:
        print(f"   {key[0]:26s} {key[1]:15s} x{key[2]} {key[3]:5s} {isl:5d} in: "
              + ", ".join(f"{osl} out {t:.2f}" for osl, t in pts)
              + f"; {slope:+.2f} us per output token")
    rising = sum(all(b[1] > a[1] for a, b in zip(pts, pts[1:], strict=False))
                 for _, _, pts, _ in found6)
    print(f"   rising with the output in {rising} of {len(found6)}")


if __name__ == "__main__":
    main()
