"""The notes under ``servesim run``'s tables: what a point lost and why it missed its SLO,
clients in lockstep, servesim's track record on published runs like each deployment, and
the points that would not meet their SLO with servesim's margin from that record."""

from __future__ import annotations

import math
from typing import Any

from simulator.capacity.margin import DEFAULT_COVER, margined_slo, record_query
from simulator.metrics_slo import check_target, refusal_causes
from simulator.report import format_ms
from simulator.runner import PointResult
from simulator.track_record import (
    FigureRecord,
    deployment_record,
    experts_kind,
    load_kind,
    record_lines,
)
from simulator.workload.clients import lockstep_lengths, lockstep_text


def point_notes(r: PointResult) -> list[str]:
    """Lines on what a point lost and why (refusals counted by cause) and why it missed
    its SLO, so the table's "NO" is explained without opening the JSON."""
    where = ", ".join(f"{k}={v}" for k, v in r.labels.items())
    rejected, in_flight = (r.summary.get(k) or 0 for k in ("num_rejected", "num_in_flight"))
    out = []
    if rejected or in_flight:
        causes = r.summary.get("rejected_by_cause") or refusal_causes(r.result.requests)
        requests = r.result.requests
        reasons = requests.loc[requests["status"] == "rejected", "reason"]
        first = str(reasons.iloc[0]).split(": ") if len(reasons) else []
        eg = [f"e.g. {first[min(1, len(first) - 1)]}"] if first else []
        why = "; ".join([*(f"{n} {cause}" for cause, n in causes.items()), *eg])
        out.append(f"note: {where}: {rejected} refused" + (f" ({why})" if why else "")
                   + f", {in_flight} unfinished at the horizon")
    if r.summary.get("slo_met") is False:
        missed = [f"{k} {format_ms(c.get('value'))} ms > {c['target']:g} ms"
                  for k, c in (r.summary.get("slo") or {}).items() if not c.get("met")]
        if rejected or in_flight:
            missed.append("requests lost (above)")
        out.append(f"note: {where}: SLO not met: {'; '.join(missed)}")
    return out


def lockstep_note(results: list[PointResult]) -> list[str]:
    """A note for the points whose closed-loop clients start together with equal lengths:
    their rounds stay in lockstep (simulator/workload/clients.py ``lockstep_lengths``)."""
    where, shape = [], None
    for r in results:
        wl = r.deployment.workload
        found = lockstep_lengths(wl.arrival, wl.client_start, wl.concurrency,
                                 r.result.requests)
        if found is not None:
            where.append(", ".join(f"{k}={v}" for k, v in r.labels.items()))
            shape = found
    if shape is None:
        return []
    points = f" ({'; '.join(w for w in where if w)})" if any(where) else ""
    return [f"note{points}: {lockstep_text(*shape)}"]


def margin_lines(results: list[PointResult], cover: float = DEFAULT_COVER) -> list[str]:
    """For the points with an SLO: their targets less servesim's error on ``cover`` of the
    published runs like each deployment, measured within them (as ``plan --record-margin``
    sizes a candidate), and which points still meet them; one line per deployment."""
    groups: dict[tuple[Any, ...], list[PointResult]] = {}
    for r in results:
        slo = r.deployment.slo
        if slo is None or not slo.targets_ms:
            continue
        groups.setdefault((*_deployment(r), slo), []).append(r)
    out = []
    for (stack, gpu, gpus, load, experts, slo), points in groups.items():
        records = deployment_record(stack, gpu, load, gpus, experts=experts,
                                    **record_query(slo))
        if not records:
            continue
        planned, _ = margined_slo(slo, records, cover)
        targets = ", ".join(f"{m} {v:.4g} ms" for m, v in planned.targets_ms.items())
        met = [r for r in points if r.summary.get("slo_met")]
        flips = []
        for r in met:  # the points meeting their SLO as given that the margin would fail
            checks = r.summary.get("slo") or {}
            over = [f"{k} {c['value']:.4g} ms" for k, c in checks.items()
                    if c.get("value") is not None
                    and c["value"] > (check_target(planned, k) or math.inf)]
            if over:
                where = ", ".join(f"{k}={v}" for k, v in r.labels.items()) or "the point"
                flips.append(f"{where} ({', '.join(over)})")
        verdict = ("no point meets the SLO as given" if not met
                   else f"of the {len(met)} point(s) meeting the SLO, "
                        + (f"these would not: {'; '.join(flips)}" if flips
                           else "all still would"))
        out.append(f"with servesim's margin (the targets less its error on {cover:.0%} of "
                   f"published runs like this, measured within them; plan --record-margin "
                   f"{cover:g}): P{slo.percentile:g} {targets}; {verdict}")
    return out


def track_records(results: list[PointResult]) -> list[str]:
    """How far to trust the figures: the record of servesim's replays of published runs
    like each deployment (stack, GPU, GPUs a replica, kind of load, model kind), once for
    each."""
    seen: dict[tuple[str, str, int, str, str], list[str]] = {}
    for r in results:  # a sweep over rates is one deployment: the kind of load is the same
        seen.setdefault(_deployment(r), []).append(
            ", ".join(f"{k}={v}" for k, v in r.labels.items()))
    blocks: dict[tuple[FigureRecord, ...], list[str]] = {}
    for (stack, gpu, gpus, load, experts), where in seen.items():
        records = tuple(deployment_record(stack, gpu, load, gpus, experts=experts,
                                          tails=True))
        blocks.setdefault(records, []).extend(where)
    if len(blocks) == 1:
        return record_lines(next(iter(blocks)))
    out = []
    for records, where in blocks.items():
        out += record_lines(records, "; ".join(w for w in where if w) or "every point")
    return out


def _deployment(r: PointResult) -> tuple[str, str, int, str, str]:
    """What a point's track record is looked up by: its stack, GPU, GPUs a replica, kind of
    load and model kind (simulator/track_record.py ``deployment_record``'s arguments)."""
    dep, wl = r.deployment, r.deployment.workload
    return (dep.stack, dep.hardware.name, dep.gpus,
            load_kind(wl.arrival, wl.rate, wl.concurrency),
            experts_kind(dep.model.num_experts))
