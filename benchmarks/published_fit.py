"""Fit a stack's host costs to SOME published cases, and score them on the others.

    python benchmarks/published_fit.py --case ID --case ID2 [--heldout PREFIX ...]
           [--terms request_s,step_s]
    python benchmarks/published_fit.py --fit-prefix trtllm0.10-h200- --heldout trtllm0.10-
           --terms token_s --flat --throughput     # one GPU's rows of a throughput table

The published cases (benchmarks/published_cases.toml) give medians and means, not the
per-request times ``servesim calibrate --from-run`` fits (calibrate/from_run.py); this is
the same black-box idea on aggregates. The parameters are the host costs a stack preset
carries (simulator/stack_presets.py), per layer of the model as the vLLM preset's are:

    request_s  (>= 0)  non-blocking: each request reaches the engine this much later, so
                       TTFT and E2E grow by it and TPOT does not (costs/host.py)
    step_s     (>= 0)  blocking: every engine step takes this much longer
    token_s    (>= 0)  blocking: per output token sampled in a step (streaming responses)
    seq_s      (>= 0)  blocking: per running decode row in a step
    eager_s    (>= 0)  blocking: per pure-decode step past the preset's CUDA-graph limit
                       (graph_max_rows; a preset without one never pays it)
    intake_s   (>= 0)  non-blocking, one request at a time: the API server takes each in
                       before it reaches the engine, and tokens wait behind its queue
                       (simulator/token_stream.py)

``--knob NAME`` fits one of the roofline prior's efficiencies instead (``attention_efficiency``,
``compute_efficiency``, ...: simulator/costs/roofline.py), for cases a prior prices: each
candidate replays them with ``[cost] form = "roofline"`` and the knob (the stack's host
costs kept, as for the prior an empty section falls back to), by a bounded search from
``--low`` to 1. ``--fixed TERM=MS`` holds a
term at a value while the others are fitted (a term fitted on
other cases first). ``--flat`` fits the terms in seconds instead (the same for every
model: host work per request or token that does not grow with the model's depth, as a
C++ batch manager's).
``--throughput`` adds each case's output-throughput error to the residuals: the only
residual of a throughput-only case (a max-throughput table). ``--fit-prefix`` fits on every
case whose id starts with it (a minority of a group: one GPU, one length pair). One term
is found by a bounded search from 0 to ``--high`` ms (default 1: per layer, or a flat
per-token cost); a flat per-step cost of a whole model (``eager_s --flat``) needs more.

Each candidate replays the fitting cases through the simulator with the stack's preset and
``[cost] overhead`` = the candidate x the model's layers, and the residuals are the
relative errors of every latency metric the cases give (TTFT, TPOT, ITL, E2E; soft_l1 at
5%, as calibrate/from_run.py). ``scipy.optimize.least_squares`` with finite differences
(the loss is piecewise smooth: a small change moves a request into another batch) and
terms in ms, so each is of order 1. It prints the fitted values, then the in-sample errors
and the held-out errors: every case matching ``--heldout`` (default: the fitting cases'
group) that was not fitted on. Nothing is written: a value worth keeping goes into the
stack's preset by hand, citing this command.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares, minimize_scalar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.published import WITHIN, scored_summary, simulated_value  # noqa: E402
from benchmarks.published_cases import (  # noqa: E402
    MEASURE_FROM,
    UNITS,
    Case,
    load_cases,
    scenario_point,
    stack_accepted,
)
from simulator.costs.roofline import EFFICIENCY_KNOBS  # noqa: E402
from simulator.runner import run_point  # noqa: E402
from simulator.specs.models import get_model  # noqa: E402

TERMS = ("request_s", "step_s", "token_s", "seq_s", "eager_s", "intake_s")
LOSS_SCALE = 0.05  # soft_l1 knee, as calibrate/from_run.py
LATENCY = tuple(k for k, u in UNITS.items() if u == "ms" and k != "batch_latency_ms")


def case_point(case: Case, per_layer_s: dict[str, float], *, flat: bool = False,
               knobs: dict[str, float] | None = None) -> dict[str, Any]:
    """The case's scenario point with host costs ``per_layer_s`` x the model's layers (x 1
    when ``flat``); with ``knobs``, priced by the roofline prior with those knobs. Both go
    over the case's own ``[cost]`` (its engine settings, a runner's or a front end's host
    terms), term by term."""
    point, _ = scenario_point(case, max_prompts=1000, use_stack=True, burst_rate=math.inf)
    point, _ = stack_accepted(point, case)
    layers = 1 if flat else get_model(case.model).num_layers
    cost: dict[str, Any] = dict(point.get("cost") or {})
    if knobs:
        cost.update({"form": "roofline", **knobs})
    if per_layer_s:
        cost["overhead"] = {**cost.get("overhead", {}),
                            **{k: v * layers for k, v in per_layer_s.items()}}
    if cost:
        point["cost"] = cost
    return point


def errors(case: Case, per_layer_s: dict[str, float], *, flat: bool = False,
           knobs: dict[str, float] | None = None) -> dict[str, float]:
    """Relative error (sim - published) / published of each metric the case gives."""
    point = case_point(case, per_layer_s, flat=flat, knobs=knobs)
    # a case whose first requests only warm a cache is scored from MEASURE_FROM on
    summary = scored_summary(run_point({}, point), point.get(MEASURE_FROM))
    out = {}
    for key, published in case.metrics.items():
        sim = simulated_value(key, summary)
        out[key] = math.nan if sim is None else (sim - published) / published
    return out


def residuals(cases: list[Case], terms: tuple[str, ...], theta_ms: np.ndarray, *,
              flat: bool = False, throughput: bool = False,
              fixed: dict[str, float] | None = None) -> np.ndarray:
    """Latency errors (and output-throughput errors when ``throughput``) of every fitting
    case at ``theta_ms`` (ms per layer, or ms when ``flat``), beside the ``fixed`` terms
    (s per layer, or s)."""
    per_layer = {**(fixed or {}),
                 **{t: max(0.0, float(v)) * 1e-3 for t, v in zip(terms, theta_ms, strict=True)}}
    return case_residuals(cases, per_layer, flat=flat, throughput=throughput)


def case_residuals(cases: list[Case], per_layer_s: dict[str, float], *, flat: bool = False,
                   throughput: bool = False, knobs: dict[str, float] | None = None
                   ) -> np.ndarray:
    """Latency errors (and output-throughput errors when ``throughput``) of every case
    with host costs ``per_layer_s`` (and roofline ``knobs``); a metric with no result
    counts as an error of 10."""
    fitted = (*LATENCY, "output_throughput") if throughput else LATENCY
    out = []
    for case in cases:
        errs = errors(case, per_layer_s, flat=flat, knobs=knobs)
        out += [errs[k] if math.isfinite(errs[k]) else 10.0 for k in errs if k in fitted]
    return np.array(out)


def bounded_soft_l1(residuals_at: Callable[[float], np.ndarray], *, high: float,
                    tolerance: float, low: float = 0.0) -> float:
    """The x in [``low``, ``high``] minimising the soft_l1 loss (knee ``LOSS_SCALE``) of
    ``residuals_at(x)``: a bounded scalar search, to ``tolerance``."""
    def loss(x: float) -> float:
        z = (residuals_at(x) / LOSS_SCALE) ** 2
        return float(np.sum(2.0 * (np.sqrt(1.0 + z) - 1.0)))
    return float(minimize_scalar(loss, bounds=(low, high), method="bounded",
                                 options={"xatol": tolerance}).x)


def fit_knob(cases: list[Case], knob: str, *, low: float = 0.05,
             throughput: bool = False) -> float:
    """The value in [``low``, 1] of the roofline prior's ``knob`` that best matches
    ``cases``' latencies (and throughputs): the bounded search of :func:`fit`, to 0.001."""
    return bounded_soft_l1(
        lambda x: case_residuals(cases, {}, throughput=throughput, knobs={knob: x}),
        high=1.0, low=low, tolerance=1e-3)


def share_within(errors: Iterable[float]) -> float:
    """The share of ``errors`` (relative, either sign) within published.py's 15%."""
    errs = list(errors)
    return sum(abs(e) <= WITHIN for e in errs) / len(errs)


def fit(cases: list[Case], terms: tuple[str, ...], *, flat: bool = False,
        throughput: bool = False, high_ms: float = 1.0,
        fixed: dict[str, float] | None = None) -> dict[str, float]:
    """The per-layer (or, ``flat``, per-model) host costs (s) that best match ``cases``'
    latencies (and throughputs), the ``fixed`` ones held where they are.

    One term: a bounded scalar search (0 to ``high_ms`` ms) of the same soft_l1 loss; least
    squares' finite differences stall on a loss this flat between batch changes."""
    if len(terms) == 1:
        best = bounded_soft_l1(lambda theta_ms: residuals(
            cases, terms, np.array([theta_ms]), flat=flat, throughput=throughput,
            fixed=fixed),
            high=high_ms, tolerance=1e-3)
        return {terms[0]: best * 1e-3}
    res = least_squares(lambda th: residuals(cases, terms, th, flat=flat,
                                             throughput=throughput, fixed=fixed),
                        np.full(len(terms), 0.05),
                        bounds=(0.0, np.inf), loss="soft_l1", f_scale=LOSS_SCALE,
                        diff_step=0.05, max_nfev=40)
    return {t: float(v) * 1e-3 for t, v in zip(terms, res.x, strict=True)}


def table(title: str, cases: list[Case], per_layer_s: dict[str, float], *,
          flat: bool = False, knobs: dict[str, float] | None = None) -> list[str]:
    """Per case and metric, the error with and without the fitted host costs or ``knobs``
    ("without": the stack preset's own), then per metric the median |error| and share
    within 15%."""
    lines = [title]
    cells: dict[str, list[tuple[float, float]]] = {}
    for case in cases:
        before = errors(case, {}, flat=flat)
        after = errors(case, per_layer_s, flat=flat, knobs=knobs)
        lines.append(f"  {case.id}")
        for key in case.metrics:
            lines.append(f"    {key:<20} without {before[key]:+7.1%}   fitted {after[key]:+7.1%}")
            cells.setdefault(key, []).append((abs(before[key]), abs(after[key])))
    for key, pairs in cells.items():
        b, a = zip(*pairs, strict=True)
        lines.append(f"  median |error| {key:<20} {statistics.median(b):6.1%} -> "
                     f"{statistics.median(a):6.1%}  within 15% {share_within(b):4.0%} -> "
                     f"{share_within(a):4.0%}  (n = {len(pairs)})")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append", default=[], help="a case to fit on (id)")
    ap.add_argument("--fit-prefix", action="append", default=[],
                    help="fit on every case whose id starts with this")
    ap.add_argument("--heldout", action="append", default=[],
                    help="id prefix of held-out cases (default: the fitted cases' groups)")
    ap.add_argument("--terms", default="request_s,step_s", help=f"of {TERMS}")
    ap.add_argument("--flat", action="store_true",
                    help="terms in s for every model (default: s per layer x layers)")
    ap.add_argument("--throughput", action="store_true",
                    help="fit output throughput too (throughput-only cases need it)")
    ap.add_argument("--high", type=float, default=1.0, metavar="MS",
                    help="one term: search 0 to this many ms (default 1, per layer or flat)")
    ap.add_argument("--fixed", action="append", default=[], metavar="TERM=MS",
                    help="a host term held at MS (per layer, or flat) beside the fitted ones "
                         "(repeatable)")
    ap.add_argument("--knob", choices=EFFICIENCY_KNOBS,
                    help="fit this roofline efficiency instead of host terms (cases a prior "
                         "prices)")
    ap.add_argument("--low", type=float, default=0.05,
                    help="--knob: search from this value to 1 (default 0.05)")
    args = ap.parse_args(argv)
    terms = tuple(t for t in args.terms.split(",") if t)
    if not set(terms) <= set(TERMS):
        print(f"published_fit: error: --terms {args.terms!r}: choose from {TERMS}",
              file=sys.stderr)
        return 2
    fixed: dict[str, float] = {}
    for item in args.fixed:
        term, _, ms = item.partition("=")
        try:
            value = float(ms)
        except ValueError:
            value = math.nan
        if term not in TERMS or term in terms or not value >= 0:
            print(f"published_fit: error: --fixed {item!r}: TERM=MS with TERM of {TERMS}, "
                  "not fitted, and MS >= 0", file=sys.stderr)
            return 2
        fixed[term] = value * 1e-3
    cases = load_cases()
    fitting = [c for c in cases if c.id in args.case
               or any(c.id.startswith(p) for p in args.fit_prefix)]
    known = {c.id for c in cases}
    if set(args.case) - known or not fitting:
        what = (f"unknown case(s) {sorted(set(args.case) - known)}" if set(args.case) - known
                else f"no case matches --case / --fit-prefix {args.fit_prefix}")
        print(f"published_fit: error: {what}", file=sys.stderr)
        return 2
    groups = {c.group for c in fitting}
    chosen = {c.id for c in fitting}
    held = [c for c in cases if c.id not in chosen and (
        any(c.id.startswith(p) for p in args.heldout) if args.heldout else c.group in groups)]
    if not args.high > 0:
        print(f"published_fit: error: --high {args.high}: must be > 0 ms", file=sys.stderr)
        return 2
    if args.knob:
        if not 0 < args.low < 1:
            print(f"published_fit: error: --low {args.low}: must be in (0, 1)", file=sys.stderr)
            return 2
        value = fit_knob(fitting, args.knob, low=args.low, throughput=args.throughput)
        print(f"fitted roofline knob: {args.knob} = {value:.3f}")
        knobs = {args.knob: value}
        print("\n".join(table(f"in sample ({len(fitting)} cases):", fitting, {}, knobs=knobs)))
        print("\n".join(table(f"held out ({len(held)} cases):", held, {}, knobs=knobs)))
        return 0
    per_layer = fit(fitting, terms, flat=args.flat, throughput=args.throughput,
                    high_ms=args.high, fixed=fixed)
    unit = "" if args.flat else " per layer"
    print(f"fitted host costs{unit}: " + ", ".join(
        f"{t} = {v * 1e3:.4f} ms" for t, v in per_layer.items())
        + "".join(f" (held: {t} = {v * 1e3:.4f} ms)" for t, v in fixed.items()))
    per_layer = {**fixed, **per_layer}
    print("\n".join(table(f"in sample ({len(fitting)} cases):", fitting, per_layer,
                          flat=args.flat)))
    print("\n".join(table(f"held out ({len(held)} cases):", held, per_layer, flat=args.flat)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
