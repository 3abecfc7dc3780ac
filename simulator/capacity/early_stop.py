"""Stopping a plan's simulation once its SLO verdict is decided (a fail no later request can undo).

The verdict of a point (``search.passes``) is: every percentile target met and no request
lost. For a per-request metric (TTFT, TPOT, E2E) judged at percentile ``q`` over the ``n``
values the finished run will hold, numpy's percentile (linear interpolation) is at least the
value at sorted index ``f = floor(q / 100 * (n - 1))``: it lies between ``v[f]`` and
``v[f + 1] >= v[f]``, and its rounding never goes below ``v[f]``. So once ``n - f`` values
exceed the target, ``v[f]`` does, and the percentile misses whatever the other requests do.
A request's record is final when it leaves (finished or refused), so the count only grows.
Two more cases fail at once: a refused request (a lost request fails the point), and a
request that leaves unfinished. If some request never finishes the point fails anyway (in
flight), and fewer values than ``n`` can only come with a lost request, so the rule never
calls a passing point failed. It needs every request of the table to arrive: a run with a
horizon is never watched.

At P99 over 10,000 requests, ``f = 9,899`` and 101 values over the target decide it; over
100 requests, 2 do (``fail_threshold(100, 99) == 2``). ITL (per step) and mean queue targets
are not watched: they only decide at the end, as before.

:class:`SLOWatch` counts per request (``simulate(..., on_leave=)``) and raises
:class:`Decided` when the verdict is a fail; the planner uses it only on points whose
figures it never reports (``sizer.py``), and a decided point's summary says so
(``decided_summary``).

The scan up from the low rate (``search.RateSearch``) reports the closest miss among the
rates it tried, so there a fail alone does not decide a point: it stops only once its
miss is certainly larger than the closest one so far (``bound``, its factor: value over
target). With every watched threshold at ``bound x target`` (``bound >= 1``), a count that
decides the percentile over it makes the point's miss factor exceed ``bound``, so the
point fails and is not the closest miss (the search keeps a later miss only when it is
strictly smaller); a lost request's factor is infinite, never smaller. ``bound = inf``
(the closest miss so far lost requests) watches lost requests alone.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from simulator.capacity.search import figures
from simulator.metrics_stats import percentile_word
from simulator.runner import run_point
from simulator.slo import SLO

WATCHED = ("ttft", "tpot", "e2el")  # per-request metrics whose percentile a count decides
DECIDED = "decided_early"  # summary key of a point stopped once its verdict was decided


def fail_threshold(n: int, q: float) -> int:
    """Values over the target, of ``n``, that make the ``q``-th percentile miss it:
    ``n - floor(q / 100 * (n - 1))``. The index is taken a hair low (never above
    numpy's own), which can only ask for one value more, never one fewer."""
    h = q / 100 * (n - 1)
    f = max(0, math.floor(h - 1e-7 * max(1.0, h)))
    return n - f


class Decided(Exception):  # noqa: N818 (a verdict, not an error)
    """The run's verdict is a fail; args: ``(reason, after, n, key, value_ms)``.

    SimPy re-raises a process's exception as ``type(e)(*e.args)``, so all of it is in args.
    """

    @property
    def reason(self) -> str:
        """Why, in words (the target and the count that decided it)."""
        return str(self.args[0])

    @property
    def after(self) -> int:
        """Requests that had left (finished or refused) when it was decided."""
        return int(self.args[1])

    @property
    def n(self) -> int:
        """Requests in the point's table."""
        return int(self.args[2])

    @property
    def key(self) -> str:
        """The summary key of the target that decided it ('' for a lost request)."""
        return str(self.args[3])

    @property
    def value_ms(self) -> float:
        """A lower bound of that target's percentile: the deciding count's smallest value."""
        return float(self.args[4])


class SLOWatch:
    """Counts, request by request, the values over each watched target; raises
    :class:`Decided` as soon as one count reaches :func:`fail_threshold`."""

    def __init__(self, slo: SLO, table: pd.DataFrame, bound: float = 1.0) -> None:
        n = len(table)
        outputs = table["output_tokens"].to_numpy()
        sizes = {"ttft": n, "e2el": n, "tpot": int(np.count_nonzero(outputs > 1))}
        self.n = n
        self.left = 0
        self.slo = slo
        watched = [] if math.isinf(bound) else WATCHED
        self.need = {m: fail_threshold(sizes[m], slo.percentile)
                     for m in watched if m in slo.targets_ms and sizes[m] > 0}
        # a value counts when over its threshold: the target, or bound x target
        self.over_ms = {m: slo.targets_ms[m] * bound for m in self.need}
        self.over: dict[str, list[float]] = {m: [] for m in self.need}

    def __call__(self, seq: Any, sent_s: float) -> None:
        """``seq`` left (finished or refused); its client sent it at ``sent_s``."""
        self.left += 1
        if seq.reason or seq.num_generated != seq.output_tokens:
            cause = seq.reason.split(": ", 1)[0] if seq.reason else "left unfinished"
            raise Decided(f"request {seq.request_id} lost ({cause}): a lost request fails "
                          "the point", self.left, self.n, "", math.nan)
        ttft_ms = (seq.first_token_s - sent_s) * 1000.0  # as metrics.request_metrics
        e2el_ms = (seq.finish_s - sent_s) * 1000.0
        values = {"ttft": ttft_ms, "e2el": e2el_ms}
        if seq.output_tokens > 1:
            values["tpot"] = (e2el_ms - ttft_ms) / (float(seq.output_tokens) - 1.0)
        for metric, need in self.need.items():
            value = values.get(metric)
            if value is None or not value > self.over_ms[metric]:
                continue
            over = self.over[metric]
            over.append(value)
            if len(over) >= need:
                target = self.over_ms[metric]
                key = f"p{percentile_word(self.slo.percentile)}_{metric}_ms"
                raise Decided(f"{len(over)} requests over {metric} {target:g} ms, the "
                              f"{need} that decide {key} over {self.n:,} requests",
                              self.left, self.n, key, min(over))


def decided_summary(slo: SLO, decided: Decided) -> dict[str, Any]:
    """What the planner keeps of a decided point: the verdict (a fail), the target that
    decided it with a lower bound of its value, and ``decided_early`` saying how far the
    run got. No other figure: the run did not finish, so none would be the point's."""
    checks: dict[str, Any] = {}
    if decided.key:
        metric = decided.key.split("_")[1]
        checks[decided.key] = {"target": slo.targets_ms[metric], "value": decided.value_ms,
                               "met": False, "lower_bound": True}
    return {"slo": checks, "num_rejected": 0 if decided.key else 1, "num_in_flight": 0,
            "rejected_by_cause": {} if decided.key else {"lost (decided early)": 1},
            DECIDED: {"after_requests": decided.after, "of": decided.n,
                      "reason": decided.reason}}


def verdict_job(point: dict[str, Any]) -> dict[str, Any]:
    """:func:`search.summary_job` of ``point``, stopped as soon as its verdict is a fail:
    then :func:`decided_summary`. A point with a horizon (not every request arrives) or
    without an SLO runs to the end."""
    return bounded_job((point, 1.0))


def bounded_job(item: tuple[dict[str, Any], float]) -> dict[str, Any]:
    """:func:`verdict_job` of ``point``, stopped once its miss factor certainly exceeds
    ``bound`` (>= 1; 1: once it fails; module docstring)."""
    point, bound = item
    horizon = (point.get("run") or {}).get("horizon_s")
    if horizon is not None or not point.get("slo"):
        return figures(run_point({}, point))
    slo = SLO.from_dict(point["slo"])
    try:
        return figures(run_point({}, point, watch=lambda table: SLOWatch(slo, table, bound)))
    except Decided as decided:
        return decided_summary(slo, decided)
