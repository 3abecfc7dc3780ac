"""Every published serving case (benchmarks/published_cases.toml) through the simulator.

    python benchmarks/published.py                      # all cases, the report
    python benchmarks/published.py --case ID --case ID2 # some cases (id or id prefix)
    python benchmarks/published.py --group trtllm-1.0/h100-sxm --json out.json
    python benchmarks/published.py --max-prompts 300    # quicker, smaller samples
    python benchmarks/published.py --case ID --set policy.max_num_seqs=256   # a what-if

Per case: simulated vs published for each metric the source gives, and the relative
error (simulated - published) / published. Then, per group (stack and version x GPU, and
all) and metric, the median |error| and the share of cases within 15% (issue 12's
targets), and the five worst cases. The group table leaves out the cases a preset was
fitted on (``fitted`` in the case file: in sample), so it scores held-out cases only. A
case whose model or GPU is not in servesim's catalogues is listed as skipped.

Bursts ("all requests at once") use ``workload.rate = inf``. A case that gives only
throughput runs at most ``--max-prompts`` of its prompts (said per case): a burst's
throughput is set by the steady state, which a sample of several hundred requests
reaches. ShareGPT cases run every prompt: their longest outputs' small-batch tail is a
fixed time, so a sample's share of it is larger than the source's. A case that gives
latencies (TTFT, TPOT, E2E) runs all of its prompts: in a burst they grow with the queue,
so a smaller sample would read low.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.published_cases import (  # noqa: E402
    CASES_GLOB,
    HEADLINE,
    MEASURE_FROM,
    PA_WINDOWS,
    UNITS,
    Case,
    burst_rate_accepted,
    case_files,
    catalogue_status,
    load_cases,
    scenario_point,
    stack_accepted,
)
from benchmarks.trtllm_kv_memory import BUFFER_READINGS  # noqa: E402
from benchmarks.trtllm_xqa import priced_reads  # noqa: E402
from simulator.errors import ConfigError  # noqa: E402
from simulator.measured.perf_analyzer import LoadStopped, TimeWindows, scored_by_windows  # noqa: E402
from simulator.metrics import summarize  # noqa: E402
from simulator.runner import PointResult, run_point  # noqa: E402
from simulator.scenario import apply_overrides  # noqa: E402
from simulator.track_record import WITHIN  # noqa: E402  (issue 12: within 15%)


def simulated_value(key: str, summary: dict[str, Any]) -> float | None:
    """The simulated figure for metric ``key`` (a summary key, or one derived from it)."""
    duration = summary.get("duration")
    if key == "batch_latency_ms":
        return None if duration is None else duration * 1000.0
    if key == "input_throughput":
        tokens = summary.get("total_input_tokens")
        return None if not duration or tokens is None else tokens / duration
    value = summary.get(key)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def replay_point(case: Case, *, max_prompts: int, burst_rate: float,
                 trtllm_buffers: str = "log") -> tuple[dict[str, Any], list[str]]:
    """The scenario point ``case`` is replayed as (its stack, its priced reads) and notes
    on what differs from the source."""
    point, notes = scenario_point(case, max_prompts=max_prompts, use_stack=True,
                                  burst_rate=burst_rate, trtllm_buffers=trtllm_buffers)
    point, stack_note = stack_accepted(point, case)
    notes += [stack_note] if stack_note else []
    point, reads_note = priced_reads(point)
    notes += [reads_note] if reads_note else []
    return point, notes


# GenAI-Perf's percentiles (numpy's linear rule, as servesim's): its export gives p95 too
PA_PERCENTILES = (50, 90, 95, 99)


def scored_summary(res: PointResult, measure_from: tuple[int, float] | None,
                   windows: TimeWindows | None = None) -> dict[str, Any]:
    """The run's summary, or, for a case whose first requests only warm a cache
    (``MEASURE_FROM``: the first scored request id and its send time), the summary of the
    requests from that id and the steps from that time (ITL, utilisation); for a case
    measured by perf_analyzer's time ``windows``, the summary of the requests they score
    and the steps before their end (:class:`LoadStopped` when the run is too short to
    tell). The run-wide keys only the whole run has (stack, cost source, prefix-cache
    counts) stay the whole run's."""
    if windows is not None:
        requests, steps = res.result.requests, res.result.steps
        score = scored_by_windows(requests, windows)
        scored = summarize(requests[score.scored],
                           steps[steps["start_s"] < score.start_s + score.end_s],
                           res.deployment.slo, kv_blocks_total=res.deployment.kv_blocks,
                           percentiles=PA_PERCENTILES)
        return {**res.summary, **scored, "windows": score.windows,
                "window_s": windows.window_s, "windows_stable": score.stable,
                "windows_measured": windows.measured_windows is not None}
    if measure_from is None:
        return res.summary
    first, start = measure_from
    requests = res.result.requests
    steps = res.result.steps
    dep = res.deployment
    scored = summarize(requests[requests["request_id"] >= first],
                       steps[steps["start_s"] >= start], dep.slo, kv_blocks_total=dep.kv_blocks)
    return {**res.summary, **scored}


def _windowed_summary(point: dict[str, Any], doublings: int = 20) -> dict[str, Any]:
    """:func:`scored_summary` of a perf_analyzer case: the closed loop's requests doubled
    until the load still runs when its windows stop (the case's ``num_prompts`` first;
    the windows stop by ``max_trials`` at the latest, so this ends)."""
    windows = TimeWindows(*point[PA_WINDOWS])
    for run in range(1, doublings + 1):
        try:
            return {**scored_summary(run_point({}, point), None, windows),
                    "windows_runs": run}
        except LoadStopped:
            wl = point["workload"]
            point = {**point, "workload": {**wl, "num_requests": 2 * int(wl["num_requests"])}}
    raise ConfigError(f"{point['name']}: {doublings} doublings of the requests did not "
                      f"outlast perf_analyzer's windows ({windows.horizon_s:g} s)")


def run_case(case: Case, *, max_prompts: int, burst_rate: float,
             trtllm_buffers: str = "log", overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Simulate one case; a row with per-metric simulated, published and error.
    ``overrides``: ``section.key=value`` settings put on the replayed point (``--set``, as
    ``servesim run`` takes them): a what-if on every case, named in the row's notes."""
    row: dict[str, Any] = {"id": case.id, "group": case.group, "model": case.model,
                           "source": case.source, "fitted": case.fitted}
    skipped = catalogue_status(case)
    if skipped:
        return {**row, "status": skipped}
    point, notes = replay_point(case, max_prompts=max_prompts, burst_rate=burst_rate,
                                trtllm_buffers=trtllm_buffers)
    start = time.perf_counter()
    try:
        if overrides:
            point = apply_overrides(point, overrides)
            notes.append(f"--set {' '.join(overrides)}")
        summary = _windowed_summary(point) if PA_WINDOWS in point else scored_summary(
            run_point({}, point), point.get(MEASURE_FROM))
    except ConfigError as exc:
        return {**row, "status": f"refused: {exc}", "notes": notes}
    if "windows" in summary:
        runs = summary["windows_runs"]
        notes.append(f"perf_analyzer scored {summary['completed']} requests ending in "
                     f"its first {summary['windows']} windows of {summary['window_s']:g} s"
                     + (" (as many as its published count says)"
                        if summary["windows_measured"]
                        else "" if summary["windows_stable"] else " (max_trials: not stable)")
                     + (f"; simulated {runs} times, the requests doubled until the load "
                        "outlasted the windows" if runs > 1 else ""))
    metrics = {}
    for key, published in case.metrics.items():
        sim = simulated_value(key, summary)
        err = None if sim is None else (sim - published) / published
        metrics[key] = {"published": published, "simulated": sim, "error": err,
                        "unit": UNITS[key]}
    lost = (summary.get("num_rejected") or 0) + (summary.get("num_in_flight") or 0)
    if lost:
        causes = ", ".join(f"{n} {c}" for c, n in (summary.get("rejected_by_cause") or {})
                           .items())
        notes.append(f"{lost} requests refused or unfinished" + (f": {causes}" if causes else ""))
    return {**row, "status": "ok", "metrics": metrics, "notes": notes,
            "stack": summary.get("stack"), "cost_profile": summary.get("cost_profile"),
            "preemptions": summary.get("num_preemptions"),
            "wall_s": round(time.perf_counter() - start, 2)}


def group_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median |error|, share within 15% and signed median per (group, metric), then per
    metric overall.

    ``n`` counts every case giving the metric; ``no_result`` those the simulator could not
    produce it for (they are outside 15%, and left out of the medians)."""
    cells: dict[tuple[str, str], list[float | None]] = {}
    for r in rows:  # a metric the run could not give (requests refused) counts as a miss
        if r.get("fitted"):
            continue  # in sample: a preset was fitted on it
        for key, m in (r.get("metrics") or {}).items():
            for group in (r["group"], "all"):
                cells.setdefault((group, key), []).append(m["error"])
    # the metrics in UNITS' order; one a JSON of an older case file has (a key since
    # renamed) after them
    order = {k: i for i, k in enumerate([*HEADLINE, *UNITS])}
    out = []
    for (group, key), all_errs in sorted(cells.items(),
                                         key=lambda kv: (kv[0][0] == "all", kv[0][0],
                                                         order.get(kv[0][1], len(order)))):
        errs = [e for e in all_errs if e is not None]
        out.append({"group": group, "metric": key, "n": len(all_errs),
                    "no_result": len(all_errs) - len(errs),
                    "median_abs_error": statistics.median(map(abs, errs)) if errs else None,
                    "within_15": sum(abs(e) <= WITHIN for e in errs) / len(all_errs),
                    "signed_median": statistics.median(errs) if errs else None})
    return out


# Issue 12's three figures, read from whichever form a source gives
HEADLINE_FORMS = {"TTFT (mean, else median)": ("mean_ttft_ms", "median_ttft_ms"),
                  "TPOT (median, else mean)": ("median_tpot_ms", "mean_tpot_ms"),
                  "output throughput": ("output_throughput",)}


def headline_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per stack (all versions and GPUs), per stack version (all GPUs) and overall, for
    each of issue 12's three figures in the first form a case gives: n, median |error|,
    share within 15%, signed median. Held-out cases only, as group_table."""
    cells: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r.get("fitted") or not r.get("metrics"):
            continue
        for name, keys in HEADLINE_FORMS.items():
            key = next((k for k in keys if k in r["metrics"]), None)
            if key is None:
                continue
            err = r["metrics"][key]["error"]
            version = r["group"].split("/")[0]  # e.g. trtllm-0.15, vllm-v0-0.6
            for group in (r["group"].split("-")[0], version, "all"):
                cells.setdefault((name, group), []).append(math.inf if err is None else err)
    return [{"figure": name, "stack": group, "n": len(errs),
             "median_abs_error": statistics.median(abs(e) for e in errs),
             "within_15": sum(abs(e) <= WITHIN for e in errs) / len(errs),
             "signed_median": statistics.median(errs)}
            for (name, group), errs in sorted(cells.items(), key=lambda kv: (
                list(HEADLINE_FORMS).index(kv[0][0]), kv[0][1] == "all", kv[0][1]))]


def worst_cases(rows: list[dict[str, Any]], n: int = 5) -> list[tuple[float, str, str]]:
    """The ``n`` cases with the largest |error| on any metric: (|error|, id, metric)."""
    worst = []
    for r in rows:
        errs = [(abs(m["error"]), k) for k, m in (r.get("metrics") or {}).items()
                if m["error"] is not None]
        if errs:
            e, k = max(errs)
            worst.append((e, r["id"], k))
    return sorted(worst, reverse=True)[:n]


def _fmt(v: float | None) -> str:
    return "-" if v is None else (f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3g}")


def report(rows: list[dict[str, Any]], header: list[str]) -> str:
    """The text report: cases, the group table, the worst five."""
    lines = [*header, ""]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"{r['id']}: {r['status']}")
            continue
        notes = ([f"IN SAMPLE: {r['fitted']}"] if r.get("fitted") else []) + r["notes"]
        extra = f"  [{'; '.join(notes)}]" if notes else ""
        lines.append(f"{r['id']} ({r['stack'] or 'no stack'}, {r['preemptions']} preemptions)"
                     f"{extra}")
        for key, m in r["metrics"].items():
            err = "-" if m["error"] is None else f"{m['error']:+.1%}"
            lines.append(f"    {key:<22} sim {_fmt(m['simulated']):>12}  pub "
                         f"{_fmt(m['published']):>12} {m['unit']:<6} error {err}")
    lines += ["", f"{'group':<24} {'metric':<22} {'n':>4} {'no result':>9} "
              f"{'median |err|':>13} {'within 15%':>11}"]
    for g in group_table(rows):
        med = "-" if g["median_abs_error"] is None else f"{g['median_abs_error']:.1%}"
        lines.append(f"{g['group']:<24} {g['metric']:<22} {g['n']:>4} {g['no_result']:>9} "
                     f"{med:>13} {g['within_15']:>11.0%}")
    lines += ["", f"{'headline figure':<26} {'stack':<13} {'n':>4} {'median |err|':>13} "
              f"{'within 15%':>11} {'signed median':>14}"]
    for h in headline_table(rows):
        lines.append(f"{h['figure']:<26} {h['stack']:<13} {h['n']:>4} "
                     f"{h['median_abs_error']:>13.1%} {h['within_15']:>11.0%} "
                     f"{h['signed_median']:>+14.1%}")
    lines += ["", "worst 5 cases (largest |error| on any metric):"]
    lines += [f"  {e:7.1%}  {cid}  ({key})" for e, cid, key in worst_cases(rows)]
    fitted = sum(bool(r.get("fitted")) for r in rows)
    lines.append(f"\n{fitted} in-sample cases (a preset was fitted on them) are left out of "
                 "the group table")
    skipped = sum(r["status"].startswith("skipped") for r in rows)
    refused = sum(r["status"].startswith("refused") for r in rows)
    lines.append(f"\n{len(rows)} cases: {len(rows) - skipped - refused} simulated, "
                 f"{skipped} skipped, {refused} refused")
    return "\n".join(lines)


def select(cases: list[Case], ids: Sequence[str],
           groups: Sequence[str] | None = None) -> list[Case]:
    """Cases whose id starts with one of ``ids`` (all when none) and whose group starts
    with one of ``groups`` (``trtllm`` or ``trtllm-1.0/h100-sxm``; all when none)."""
    groups = groups or ()
    chosen = [c for c in cases if not ids or any(c.id.startswith(i) for i in ids)]
    chosen = [c for c in chosen if not groups or any(c.group.startswith(g) for g in groups)]
    if not chosen:
        known = sorted({c.group for c in cases})
        raise ConfigError(f"no case matches --case {list(ids)} --group {list(groups)}; "
                          f"groups: {known}")
    return chosen


def head_commit() -> str:
    """The checkout's commit (short), "+ changes" when the tree has uncommitted edits: what
    the replay ran (``--json`` records it; benchmarks/track_record.py copies it)."""
    root = Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, check=True,
                             capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{sha} + changes" if dirty.strip() else sha


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", default=[], help="case id or id prefix")
    ap.add_argument("--group", action="append", default=[],
                    help="group or its start: trtllm, trtllm-1.0/h100-sxm (repeatable: "
                         "the cases of any of them)")
    ap.add_argument("--json", help="write the rows and the group table here")
    ap.add_argument("--max-prompts", type=int, default=1000,
                    help="simulate at most this many prompts of a throughput-only case "
                         "(default 1000)")
    ap.add_argument("--trtllm-buffers", choices=BUFFER_READINGS, default="log",
                    help="the 2024 TensorRT-LLM engines' runtime and decoder buffers: the 0.12 "
                         "log's reading (default) or the sourced formula "
                         "(benchmarks/trtllm_kv_memory.py)")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    metavar="SECTION.KEY=VALUE",
                    help="a setting put on every replayed case (repeatable; TOML values, "
                         "as servesim run --set): e.g. cost.overhead.seq_s=15e-6")
    ap.add_argument("--cases-file", action="append", default=None,
                    help="a case file (repeatable; default: every "
                         f"benchmarks/{CASES_GLOB})")
    args = ap.parse_args(argv)
    try:
        cases = select(load_cases(args.cases_file), args.case, args.group)
    except ConfigError as exc:
        print(f"published: error: {exc}", file=sys.stderr)
        return 2
    rate, rate_note = burst_rate_accepted()
    files = args.cases_file or [str(p) for p in case_files()]
    header = [f"{len(cases)} published cases from {', '.join(files)}; at most "
              f"{args.max_prompts} prompts simulated per throughput-only case"]
    header += [f"note: {rate_note}"] if rate_note else []
    rows = []
    for case in cases:
        rows.append(run_case(case, max_prompts=args.max_prompts, burst_rate=rate,
                             trtllm_buffers=args.trtllm_buffers,
                             overrides=args.overrides))
        print(f"  {case.id}: {rows[-1]['status']}", file=sys.stderr)
    print(report(rows, header))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "groups": group_table(rows),
                                               "headline": headline_table(rows),
                                               "commit": head_commit()},
                                              indent=1, default=str))
    if _every_case_as_shipped(args):  # the simulator's own record of these figures
        from benchmarks.track_record import stale_note

        note = stale_note(rows, {c.id: c for c in cases})
        print(note or "simulator/track_record.json: in step with this replay", file=sys.stderr)
    return 0


def _every_case_as_shipped(args: argparse.Namespace) -> bool:
    """A replay of every case with the default settings (what the track record holds)."""
    return (not args.case and not args.group and not args.overrides
            and args.cases_file is None and args.max_prompts == 1000
            and args.trtllm_buffers == "log")


if __name__ == "__main__":
    raise SystemExit(main())
