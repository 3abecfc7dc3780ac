"""``servesim plan``: the cheapest deployment that serves a target rate within an SLO.

The planning itself is ``simulator.capacity.plan``; this module parses the flags, runs
it on the executor asked for (with the point cache under ``<out>/cache``) and formats
the ranked table, the Pareto front and the verdict. ``--json`` prints the plan as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from servesim.plan_disagg import disagg_json, disagg_text, run_disaggregated
from servesim.progress import plan_progress
from simulator.atomic import atomic_write
from simulator.capacity import (
    Candidate,
    CandidateResult,
    PlanResult,
    SearchSettings,
    build_candidates,
    plan,
    price_table,
)
from simulator.capacity.headroom import headroom, headroom_lines
from simulator.capacity.margin import TargetMargin, margin_text
from simulator.errors import ConfigError
from simulator.executors import open_executor
from simulator.point_cache import PointCache
from simulator.results_folder import check_writable, default_out
from simulator.scenario import apply_overrides, load_scenario, with_trace
from simulator.scenario_types import Scenario
from simulator.slo import SLO, parse_slo_string
from simulator.track_record import FigureRecord, point_record, record_json, record_lines

_DEFAULTS = SearchSettings()
LIST_FLAGS = {  # flag -> (candidate axis, element type)
    "gpus": ("gpus", str), "tp": ("tp", int), "attention_dp": ("attention_dp", int),
    "dtypes": ("dtypes", str),
    "policies": ("policies", str), "max_num_seqs": ("max_num_seqs", int),
    "chunk": ("chunk", int),
}


def add_plan_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """The ``plan`` subcommand: the shared flags plus the target, SLO and candidates."""
    p = sub.add_parser("plan", help="cheapest deployment meeting an SLO at a target rate")
    common(p)
    p.add_argument("--rate", type=float, default=None,
                   help="target request rate, req/s (default: the scenario's workload.rate)")
    p.add_argument("--slo", default=None, metavar="KEY=MS,...",
                   help="targets, e.g. ttft_p99_ms=500,tpot_p99_ms=50 (default: [slo])")
    for flag, help_text in (("gpus", "GPU types, e.g. h100-sxm,h200"),
                            ("tp", "tensor-parallel degrees, e.g. 1,2"),
                            ("attention_dp", "attention data-parallel ranks of a MoE "
                                             "model's replica (tp 1), e.g. 1,8"),
                            ("dtypes", "weight dtypes, e.g. bf16,fp8"),
                            ("policies", "batching policies, e.g. continuous,chunked"),
                            ("max_num_seqs", "max_num_seqs values"),
                            ("chunk", "max_num_batched_tokens (chunk size) values")):
        p.add_argument(f"--{flag.replace('_', '-')}", dest=flag, default=None, metavar="A,B",
                       help=f"candidate {help_text} (replaces the scenario's list)")
    p.add_argument("--record-margin", type=float, default=None, metavar="Q",
                   help="size each candidate against its targets tightened by servesim's "
                        "error on the published runs most like it (its track record), so "
                        "the answer would hold had servesim erred as on a share Q of them, "
                        "e.g. 0.8 (default: the targets as given; docs/capacity.md)")
    p.add_argument("--prices", default=None, metavar="FILE|GPU=USD,...",
                   help="price table (TOML/JSON) or overrides (default: the shipped table)")
    p.add_argument("--min-requests", type=int, default=_DEFAULTS.min_requests,
                   help="requests per simulated point, at least (default %(default)s)")
    p.add_argument("--min-tail", type=int, default=_DEFAULTS.min_tail,
                   help="requests beyond the SLO percentile, at least (default %(default)s)")
    p.add_argument("--max-iterations", type=int, default=_DEFAULTS.max_iterations,
                   help="bisection steps per candidate, at most (default %(default)s)")
    p.add_argument("--full-search", action="store_true",
                   help="bisect each candidate's max rate to 2%% even after its replica "
                        "count is certain, and run every point to its end (same plan, "
                        "more simulation; sharper 'max req/s')")
    p.add_argument("--disaggregated", action="store_true",
                   help="also size each candidate as prefill + decode pools ([disaggregated]'s "
                        "link and pool GPUs, else both on the candidate's GPU over "
                        "InfiniBand NDR) and compare (docs/fleet.md)")
    p.add_argument("--no-early-stop", action="store_true",
                   help="run every point to its end, even once its verdict is a fail "
                        "(same plan; --full-search implies it)")


def _axes(args: argparse.Namespace) -> dict[str, list[Any]]:
    axes: dict[str, list[Any]] = {}
    for flag, (axis, kind) in LIST_FLAGS.items():
        text = getattr(args, flag, None)
        if text is None:
            continue
        items = [t.strip() for t in text.split(",")]
        try:
            axes[axis] = [kind(t) for t in items if t]
        except ValueError:
            raise ConfigError(f"--{flag.replace('_', '-')} {text!r}: expected a comma-separated "
                              f"list of {kind.__name__} values") from None
        if not axes[axis]:
            raise ConfigError(f"--{flag.replace('_', '-')} {text!r}: empty list")
    return axes


def _target(args: argparse.Namespace, raw: dict[str, Any]) -> float:
    """--rate, else the rate the scenario file itself gives (one number, not a sweep)."""
    if args.rate is not None:
        return float(args.rate)  # the planner checks it
    rate = raw.get("workload", {}).get("rate")  # as written: no rate is no target
    if isinstance(rate, bool) or not isinstance(rate, int | float):
        raise ConfigError("give the target rate with --rate (the scenario has "
                          f"workload.rate = {rate!r}; a plan needs one number)")
    return float(rate)


def plan_command(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """Run the plan; write ``<out>/plan.json``; return (plan JSON, text report)."""
    from servesim.commands import _vary

    raw = load_scenario(args.scenario)
    if getattr(args, "trace", None):
        raw = with_trace(raw, args.trace, own_arrivals=True)
    raw = apply_overrides(raw, list(args.overrides) + _vary(getattr(args, "vary", [])))
    settings = SearchSettings(min_requests=args.min_requests, min_tail=args.min_tail,
                              max_iterations=args.max_iterations,
                              stop_when_sized=not args.full_search,
                              early_stop=not (args.full_search or args.no_early_stop))
    target = _target(args, raw)
    prices = price_table(args.prices)
    section = raw.pop("disaggregated", None)  # aggregated candidates first; pools below
    candidates = build_candidates(raw, _axes(args))
    first = Scenario.from_dict(candidates[0].point, args.scenario)  # name and [slo]
    slo = parse_slo_string(args.slo) if args.slo else (first.slo or SLO())
    out = check_writable(Path(args.out) if args.out else default_out(first.name, "-plan"))
    cache = PointCache(None if args.no_cache else out / "cache")
    with open_executor(args.workers, args.dask, len(candidates)) as ex, \
            plan_progress() as progress:
        result = plan(candidates, target, slo, prices=prices, settings=settings,
                      executor=ex, cache=cache, progress=progress,
                      record_margin=args.record_margin)
    data = result.to_json()
    text = format_plan(result, first.name, out)
    records, whom = _plan_record(result, candidates)
    if records:
        data["track_record"] = [record_json(r) for r in records]
        text += "\n\n" + "\n".join(record_lines(records, whom))
    if result.best is not None:
        data["headroom"] = headroom(result.best, result.given_slo)
        text += "\n" + "\n".join(headroom_lines(result.best, result.target_rps, records,
                                                 result.given_slo))
    if args.disaggregated or (section is not None and section.get("enabled", True)):
        pools = run_disaggregated(candidates, section, result, slo, prices)
        data["disaggregated"] = disagg_json(pools)
        text += "\n" + disagg_text(pools, result)
    out.mkdir(parents=True, exist_ok=True)
    text_json = json.dumps(data, indent=2) + "\n"
    atomic_write(out / "plan.json", lambda p: p.write_text(text_json))
    return data, text


def _plan_record(result: PlanResult, candidates: list[Candidate]
                 ) -> tuple[list[FigureRecord], str]:
    """The track record (simulator/track_record.py) of the best candidate, else the
    closest (its own point: stack, GPU, GPUs a replica, the scenario's kind of load at the
    target rate; the tails nearest the SLO's percentile, which its headroom note reads),
    and which candidate it is for."""
    chosen = result.best or result.closest
    point = next((c.point for c in candidates if chosen and c.name == chosen.name), None)
    if chosen is None or point is None:
        return [], ""
    whom = f"the {'best' if result.best else 'closest'} candidate, {chosen.name}"
    return point_record(point, chosen.gpu, result.target_rps, tails=True,
                        percentile=result.slo.percentile), whom


def _money(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _row(rank: int, r: CandidateResult) -> str:
    lat = "-" if math.isinf(r.latency_ms) else f"{r.latency_ms:.0f}"
    status = {"meets_slo": "meets SLO", "misses_slo": "misses SLO"}.get(r.status, r.status)
    return (f"{rank:>4}  {r.name:<40} {r.max_rate_rps:>9.2f} {r.replicas or '-':>8} "
            f"{r.num_gpus or '-':>5} {_money(r.usd_per_hour):>8} "
            f"{_money(r.usd_per_million_output_tokens, 3):>9} {lat:>9}  {status}")


def _slo_text(slo: SLO) -> str:
    parts = [f"P{slo.percentile:g} {k} <= {v:g} ms" for k, v in slo.targets_ms.items()]
    if slo.mean_queue_ms is not None:
        parts.append(f"mean queue <= {slo.mean_queue_ms:g} ms")
    return ", ".join(parts)


def _requests_text(result: PlanResult) -> str:
    n, wanted = result.requests_per_point, result.requests_wanted
    if wanted > n:  # a trace shorter than the sample size: its every request
        return (f"{n} requests per point: every request of the trace, fewer than the "
                f"{wanted} the SLO's percentile asks for (>= {result.settings.min_tail} "
                "beyond it): a longer trace gives a steadier tail")
    return (f"{n} requests per point (>= {result.settings.min_requests} and >= "
            f"{result.settings.min_tail} beyond the percentile)")


def format_plan(result: PlanResult, name: str, out: Path) -> str:
    """The ranked table, the Pareto front and the verdict, as text."""
    lines = [
        f"capacity plan{': ' + name if name else ''}: {result.target_rps:g} req/s, "
        f"{_slo_text(result.slo)}",
        _requests_text(result) + f"; prices: {result.prices.source} ({result.prices.date})",
        "",
        f"{'rank':>4}  {'candidate':<40} {'max req/s':>9} {'replicas':>8} {'GPUs':>5} "
        f"{'$/hour':>8} {'$/M out':>9} {'P99 TTFT':>9}  status",
    ]
    lines += [_row(i + 1, r) for i, r in enumerate(result.ranked)]
    if result.settings.stop_when_sized:
        lines.append("max req/s: highest rate seen to pass on one replica; a search stops "
                     "once its replica count is certain (--full-search: to 2%)")
    lines += _margin_lines(result)
    notes = [f"  {r.name}: {r.reason}" for r in result.ranked if r.reason]  # says its miss
    if notes:
        lines += ["", "notes:", *notes]
    by_name = {r.name: r for r in result.ranked}
    front = [f"{n} (${by_name[n].usd_per_hour:.2f}/h, {by_name[n].latency_ms:.0f} ms)"
             for n in result.pareto]
    lines += ["", f"Pareto front, $/hour vs P99 TTFT at {result.target_rps:g} req/s: "
              + (" | ".join(front) if front else "empty")]
    lines.append(_verdict(result))
    decided = sum(r.decided_early for r in result.ranked)
    stopped = (f" ({decided} stopped once their verdict was a fail, figures not reported)"
               if decided else "")
    lines.append(f"points: {result.computed} simulated{stopped}, {result.reused} from the "
                 f"cache; plan written to {out / 'plan.json'}")
    return "\n".join(lines)


def _margin_lines(result: PlanResult) -> list[str]:
    """With --record-margin: the targets each candidate was sized against, candidates with
    the same ones on one line."""
    cover = result.record_margin
    if cover is None:
        return []
    texts: dict[str, list[str]] = {}
    for r in result.ranked:
        if r.slo_planned is None:
            continue
        margins = {k: TargetMargin.from_json(k, v) for k, v in r.margins.items()}
        texts.setdefault(margin_text(margins, result.slo, cover), []).append(r.name)
    lines = ["", f"sized against the targets less servesim's error on published runs like "
                 f"each candidate (--record-margin {cover:g}: the answer holds had servesim "
                 f"erred as on {cover:.0%} of them; docs/capacity.md):"]
    for text, names in texts.items():
        lines.append(f"  {', '.join(names)}: {text}")
    return lines


def _verdict(result: PlanResult) -> str:
    best = result.best
    if best is not None:
        cost = (f"${best.usd_per_hour:.2f}/hour" if best.usd_per_hour is not None
                else f"no price for {best.gpu} (--prices {best.gpu}=USD)")
        return (f"best: {best.name}, {best.replicas} replica(s) = {best.num_gpus} GPU(s), "
                f"{cost}")
    closest = result.closest
    text = f"no candidate meets the SLO at {result.target_rps:g} req/s"
    if closest is not None and closest.miss is not None:
        m = closest.miss
        if m["target"]:
            text += (f"; closest: {closest.name} misses {m['key']} by "
                     f"{(m['factor'] - 1) * 100:.0f}% ({m['value']:.1f} ms vs {m['target']:g} ms)")
        else:
            text += f"; closest: {closest.name} loses {m['value']:.0f} requests"
    return text
