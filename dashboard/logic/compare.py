"""Policy comparison: points over policies x rates, their table, and a recommendation.

Every point draws the same requests (one seed), so policies are compared on identical
traffic. The recommendation names the policy (and its knobs) that meets the SLO up to
the highest rate, where "up to r" means at every rate tried from the lowest to r.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from dashboard.logic.feature_knobs import (
    PrefixKnobs,
    SpecKnobs,
    supports_prefix,
    supports_spec,
)
from dashboard.logic.scenario_form import (
    Knobs,
    apply_knobs,
    knobs_from_point,
    policy_label,
    policy_table,
)

DEFAULT_RATES = (2.0, 5.0, 10.0, 15.0, 20.0)
DEFAULT_REQUESTS = 400  # per point: 4 policies x 5 rates stay within a few seconds
POLICY_SHORT = {"static": "static", "dynamic": "dynamic", "continuous": "continuous",
                "chunked": "chunked prefill"}
# the summary keys the table gains when a feature was on in some point (None elsewhere)
FEATURE_COLUMNS = ("prefix_hit_rate", "prefill_tokens_saved",
                   "spec_mean_accepted_tokens_per_step", "spec_acceptance_rate")


def parse_rates(text: str) -> list[float]:
    """``"2, 5, 10"`` -> ``[2.0, 5.0, 10.0]`` (sorted, unique); ValueError naming a bad piece."""
    rates = []
    for piece in text.replace(";", ",").split(","):
        if not piece.strip():
            continue
        try:
            rate = float(piece)
        except ValueError:
            raise ValueError(f"rates: {piece.strip()!r} is not a number") from None
        if not math.isfinite(rate) or rate <= 0:
            raise ValueError(f"rates: {piece.strip()!r} must be a rate > 0 (req/s)")
        rates.append(rate)
    if not rates:
        raise ValueError("rates: give at least one request rate, e.g. 2, 5, 10")
    return sorted(set(rates))


def policy_knobs(base: dict[str, Any], policies: Sequence[str]) -> dict[str, Knobs]:
    """Each policy's knobs as the base scenario sets them (``[policy.<name>]`` included)."""
    out = {}
    for policy in policies:
        point = copy.deepcopy(base)
        point.setdefault("policy", {})["name"] = policy
        out[policy] = knobs_from_point(point)
    return out


def with_features(knobs: Mapping[str, Knobs], prefix: PrefixKnobs,
                  spec: SpecKnobs) -> tuple[dict[str, Knobs], str | None]:
    """Every policy's knobs with the page's prefix-caching and speculative settings, and a
    note naming the policies that run without a feature they do not take (static and
    dynamic batching pad every prompt and decode one token a step; the simulator refuses
    both features for them). The system prompt is traffic: every policy gets it."""
    out, skipped = {}, []
    for policy, own in knobs.items():
        p_on, s_on = prefix.on and supports_prefix(policy), spec.on and supports_spec(policy)
        if (prefix.on and not p_on) or (spec.on and not s_on):
            skipped.append(policy_label(policy))
        out[policy] = replace(own, prefix=replace(prefix, on=p_on),
                              spec=replace(spec, on=s_on))
    if not skipped:
        return out, None
    features = " and ".join(name for name, on in (("prefix caching", prefix.on),
                                                  ("speculative decoding", spec.on)) if on)
    return out, (f"{', '.join(skipped)}: run without {features}, which only the continuous "
                 "policies take (a padded batch prefills every prompt in full and decodes "
                 "one token a step).")


def policy_points(base: dict[str, Any], knobs: Mapping[str, Knobs],
                  rates: Sequence[float]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(labels, scenario)`` for every policy in ``knobs`` x rate (open loop at that rate)."""
    points = []
    for policy, own in knobs.items():
        for rate in rates:
            arrival = "poisson" if own.arrival in ("closed", "trace") else own.arrival
            k = replace(own, policy=policy, rate=float(rate), arrival=arrival)
            points.append(({"policy": policy, "rate": float(rate)},
                           apply_knobs(copy.deepcopy(base), k)))
    return points


def _p(summary: dict[str, Any], stat: str, metric: str) -> float:
    value = summary.get(f"{stat}_{metric}_ms")
    return math.nan if value is None else float(value)


def comparison_table(points: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> pd.DataFrame:
    """One row per ``(labels, summary)``: the prefix-cache and speculative metrics of the
    features some point had on (FEATURE_COLUMNS), latency percentiles (ms), throughput,
    goodput, SLO."""
    rows = []
    for labels, s in points:
        rows.append({
            "series": POLICY_SHORT.get(labels["policy"], labels["policy"]),
            "policy": labels["policy"], "rate": labels["rate"],
            **{key: s.get(key) for key in FEATURE_COLUMNS},  # first: in sight when on
            "p50_ttft_ms": _p(s, "median", "ttft"), "p99_ttft_ms": _p(s, "p99", "ttft"),
            "p50_tpot_ms": _p(s, "median", "tpot"), "p99_tpot_ms": _p(s, "p99", "tpot"),
            "request_throughput": s.get("request_throughput") or 0.0,
            "request_goodput": s.get("request_goodput") or 0.0,
            "output_throughput": s.get("output_throughput") or 0.0,
            "slo_met": bool(s.get("slo_met")),
        })
    table = pd.DataFrame(rows)
    unused = [key for key in FEATURE_COLUMNS if key in table and table[key].isna().all()]
    return table.drop(columns=unused)


def max_rate_met(table: pd.DataFrame) -> dict[str, float | None]:
    """Per policy: the highest rate r with the SLO met at every rate tried up to r (None: none)."""
    out: dict[str, float | None] = {}
    for policy, part in table.groupby("policy", sort=False):
        best = None
        for row in part.sort_values("rate").itertuples():
            if not row.slo_met:
                break
            best = float(row.rate)
        out[str(policy)] = best
    return out


def knob_text(knobs: Knobs) -> str:
    """``max_num_seqs=256, max_num_batched_tokens=2048``: the policy's own knobs."""
    table = policy_table(knobs)
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in table.items() if k != "name")


def recommend(table: pd.DataFrame, knobs: Mapping[str, Knobs], slo_text: str) -> str:
    """A plain-language recommendation: which policy, with which knobs, up to which rate."""
    if table.empty:
        return "Nothing was simulated."
    reach = max_rate_met(table)
    top = max(table["rate"])

    def score(policy: str) -> tuple[float, float]:
        r = reach[policy]
        at = table[(table["policy"] == policy) & (table["rate"] == (r or table["rate"].min()))]
        return (r if r is not None else -1.0, float(at["request_goodput"].max()))

    best = max(reach, key=score)
    if reach[best] is None:
        low = table[table["rate"] == table["rate"].min()]
        lead = low.sort_values("p99_ttft_ms").iloc[0]
        return (f"No policy meets {slo_text} even at {low['rate'].iloc[0]:g} req/s. Closest: "
                f"{policy_label(lead['policy'])} (P99 TTFT {lead['p99_ttft_ms']:.0f} ms). "
                "Lower the rate, add replicas or choose a faster GPU.")
    limit = reach[best]
    head = (f"Recommended: **{policy_label(best)}** ({knob_text(knobs[best])}) meets "
            f"{slo_text} up to **{limit:g} req/s**")
    head += (" (every rate tried; try higher rates to find its limit)." if limit == top
             else "; at the next rate tried it misses.")
    others = [f"{policy_label(p)}: " + (f"up to {r:g} req/s" if r is not None
                                         else "at no rate tried")
              for p, r in reach.items() if p != best]
    return head + ("\n\nOthers: " + "; ".join(others) + "." if others else "")
