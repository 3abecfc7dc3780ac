"""Black-box calibration: fit host costs and a time correction to measured serving runs.

For a stack we cannot instrument (vLLM, SGLang, our own server) the request timelines of a
measured run (:mod:`calibrate.run_records`) are what we have. The parameters are

    time_scale  (> 0)  multiplies the base cost profile's step times (kernel-level)
    step_s, admit_s, finish_s, token_s, seq_s  (>= 0)  blocking host work (costs/host.py)
    request_s   (>= 0)  non-blocking latency before a request reaches the engine

For each candidate the SAME requests (ids, send times, lengths) are replayed through the
simulator with the deployment's policy and KV cache, the base cost model wrapped as
``HostCost(ScaledCost(base, time_scale), overhead)``, no step jitter (deterministic). The
residuals are relative errors: per request ``sim/measured - 1`` of TTFT and of TPOT (mean
inter-token time) when send times are known, else of the mean and the 5th..95th
percentiles (every 10) of each. The loss is ``soft_l1`` (a few requests far off, e.g. an
OS hiccup, do not steer the fit).

The fit is Gauss-Newton on the simulator: for the schedule a replay took, TTFT and TPOT
are exactly linear in the parameters (calibrate/replay_jacobian.py), so each iteration
solves the bounded linear problem (``scipy.optimize.least_squares``, host terms in ms so
every parameter is of order 1) and replays at the answer, shortening the step until the
true loss falls (the schedule may change with the parameters). Finite differences were
tried first and stalled on a ridge: a small change of a parameter moves a request into
another batch, so the loss is piecewise smooth with small jumps.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from calibrate.replay_jacobian import latency_jacobians
from calibrate.run_records import MeasuredRun
from simulator.cluster import ClusterSpec, simulate
from simulator.cluster_spec import SimResult
from simulator.costs.base import CostModel
from simulator.costs.host import DEFAULT_FIT_TERMS, FIT_TERMS, Overhead, calibrated_cost
from simulator.errors import ConfigError
from simulator.workload.prefixes import START, STOP, PrefixSegments, from_lists

QUANTILES = np.linspace(0.05, 0.95, 10)  # distribution targets when send times are unknown
STATS = ("mean", "p50", "p90")
METRICS = ("ttft", "tpot", "e2e")
LOSS_SCALE = 0.05  # soft_l1: residuals beyond ~5% relative error count linearly, not squared
BESIDE_GAIN = 0.05  # the least relative loss a seq_s beside the step must gain to be kept (fit)
RESTART_GAIN = 0.01  # and an answer from a start that shares a queue term's time (fit)
# The API server's queue (simulator/token_stream.py): its terms move a latency through the
# queue, not a step, so their derivatives are a replay's finite difference, 10% of the
# value and at least this floor (intake_s: a request; stream_s: a token)
QUEUE_FLOORS_S = {"intake_s": 1e-4, "stream_s": 1e-6}
QUEUE_STEP = 0.1
WARM_GAP_S = 600.0  # warming prompts are served this long before the run (with_warm_prompts)


@dataclass(frozen=True, slots=True)
class Target:
    """A measured run and the deployment that replays it (its cost: the base, no host)."""

    run: MeasuredRun
    spec: ClusterSpec  # policy, KV, replicas, router; ``cost`` is the kernel-level base
    # the policy forms each step while the GPU runs the last (policies/continuous.py
    # overlaps), so a candidate's seq_s runs beside the step, as the deployment will run it
    overlap: bool = False
    # the run's first prompts the server had served (and cached) before it: replayed first,
    # not scored (:func:`with_warm_prompts`)
    warm_prompts: int = 0


@dataclass(frozen=True, slots=True)
class Calibration:
    """A candidate (or the answer): time_scale on the base, plus host overhead."""

    time_scale: float = 1.0
    overhead: Overhead = field(default_factory=Overhead)

    def value(self, term: str) -> float:
        """The term in seconds (time_scale: a ratio)."""
        return self.time_scale if term == "time_scale" else float(getattr(self.overhead, term))

    def with_values(self, values: dict[str, float]) -> Calibration:
        """A copy with some terms replaced (seconds; time_scale a ratio)."""
        ts = values.get("time_scale", self.time_scale)
        host = replace(self.overhead, **{k: v for k, v in values.items() if k != "time_scale"})
        return Calibration(ts, host)

    def cost(self, base: CostModel, overlap: bool = False) -> CostModel:
        """The base cost model with this correction and overhead on top (``overlap``: its
        per-row host work beside each step, costs/host.py)."""
        return calibrated_cost(base, self.time_scale, self.overhead, overlap)


@dataclass(frozen=True, slots=True)
class Predicted:
    """Per-request simulated TTFT, TPOT and E2E (seconds), in the run's request order, and
    the derivatives of TTFT and TPOT by the parameters (rows x FIT_TERMS) for this schedule."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    ttft_jac: np.ndarray
    tpot_jac: np.ndarray


def replay(target: Target, cal: Calibration, terms: Sequence[str] = ()) -> Predicted:
    """Simulate the run's requests with ``cal`` on the base cost model (``terms``: those
    being fitted; each of the API server's queue among them, :data:`QUEUE_FLOORS_S`, costs
    one more replay, its finite difference)."""
    sim, latencies = _simulated(target, cal)
    ids = target.run.requests["request_id"].to_numpy()
    jt, jp = latency_jacobians(sim.requests, sim.steps, target.spec.cost, ids,
                               cal.overhead.request_s,
                               beside=_theta(cal) if target.overlap else None)
    for term in (t for t in QUEUE_FLOORS_S if t in terms):
        # the server takes requests in and streams tokens one at a time, in one queue: its
        # share of a latency runs through that queue, not a step, so it is differenced
        value = cal.value(term)
        h = max(QUEUE_STEP * value, QUEUE_FLOORS_S[term])
        _, moved = _simulated(target, cal.with_values({term: value + h}))
        col = FIT_TERMS.index(term)
        jt[:, col], jp[:, col] = ((np.nan_to_num(m - b) / h) for m, b in
                                  zip(moved[:2], latencies[:2], strict=True))
    return Predicted(*latencies, jt, jp)


def _simulated(target: Target, cal: Calibration
               ) -> tuple[SimResult, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The replay of ``target`` with ``cal``, and its (TTFT, TPOT, E2E) per request, in the
    run's request order."""
    spec = replace(target.spec, cost=cal.cost(target.spec.cost, target.overlap),
                   request_s=cal.overhead.request_s)
    table, segments = (with_warm_prompts(target.run.requests, target.warm_prompts)
                       if target.warm_prompts else (target.run.requests, None))
    sim = simulate(table, spec, max_concurrency=target.run.max_concurrency, segments=segments)
    ids = target.run.requests["request_id"].to_numpy()
    rec = sim.requests.set_index("request_id").reindex(ids)
    arrival = rec["arrival_s"].to_numpy(np.float64)
    first, last = rec["first_token_s"].to_numpy(np.float64), rec["finish_s"].to_numpy(np.float64)
    out = rec["output_tokens"].to_numpy(np.float64)
    tpot = np.divide(last - first, out - 1, out=np.full(len(out), np.nan), where=out > 1)
    return sim, (first - arrival, tpot, last - arrival)


def _summary_weights(values: np.ndarray) -> np.ndarray:
    """W with ``W @ values`` = (mean, the QUANTILES) of ``values`` (numpy's linear rule)."""
    n = len(values)
    order = np.argsort(values, kind="stable")
    w = np.zeros((len(QUANTILES) + 1, n))
    w[0] = 1.0 / n
    for k, q in enumerate(QUANTILES, 1):
        h = (n - 1) * q
        lo = int(np.floor(h))
        w[k, order[lo]] += 1.0 - (h - lo)
        w[k, order[min(lo + 1, n - 1)]] += h - lo
    return w


def linear_model(run: MeasuredRun, pred: Predicted, theta: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(A, b): the run's residuals are ``A @ theta' + b`` while the schedule holds.

    Relative errors of TTFT and TPOT per request, or of their distributions (module
    docstring). A request the replay did not finish gets a fixed residual of 10.
    """
    a_parts, b_parts = [], []
    for sim, meas, jac in ((pred.ttft_s, run.ttft_s, pred.ttft_jac),
                           (pred.tpot_s, run.tpot_s, pred.tpot_jac)):
        c = sim - jac @ theta  # exact: sim = jac @ theta + c for this schedule
        valid = np.isfinite(meas) & (meas > 0)
        if run.per_request:
            ok = valid & np.isfinite(sim)
            scale = np.where(ok, 1.0 / np.where(ok, meas, 1.0), 0.0)
            a_parts.append(jac * scale[:, None])
            b_parts.append(np.where(ok, np.nan_to_num(c) * scale - 1.0,
                                    np.where(valid, 10.0, 0.0)))
            continue
        ok_s = np.isfinite(sim)
        w = _summary_weights(sim[ok_s])
        m = _summary_weights(meas[valid]) @ meas[valid]
        weight = np.sqrt(len(run.requests) / len(m))  # as heavy as n requests
        a_parts.append(w @ jac[ok_s] / m[:, None] * weight)
        b_parts.append((w @ c[ok_s] / m - 1.0) * weight)
    return np.vstack(a_parts), np.concatenate(b_parts)


def _loss(r: np.ndarray) -> float:
    """The soft_l1 loss: f^2 * sum(sqrt(1 + (r / f)^2) - 1), f = LOSS_SCALE."""
    return float(LOSS_SCALE**2 * np.sum(np.sqrt(1.0 + (r / LOSS_SCALE) ** 2) - 1.0))


@dataclass(frozen=True, slots=True)
class FitResult:
    """The fitted calibration, how well it fits, and what the fit cost."""

    calibration: Calibration
    terms: tuple[str, ...]  # the fitted terms (the others were held at their start values)
    errors: dict[str, dict[str, float]]  # per run name: in-sample relative errors (errors())
    evaluations: int  # replays of all the runs (one per candidate calibration)
    wall_s: float  # seconds the fit took
    # the runs' scheduler overlaps its steps, so seq_s was priced beside each step
    beside_step: bool = False


def _theta(cal: Calibration) -> np.ndarray:
    return np.array([cal.value(t) for t in FIT_TERMS])


def fit(targets: Sequence[Target], terms: Sequence[str] = DEFAULT_FIT_TERMS,
        start: Calibration | None = None, max_iterations: int = 25) -> FitResult:
    """Gauss-Newton fit of ``terms`` to every target run (module docstring).

    Under an overlap scheduler ``seq_s`` moves a step only where it outlasts the rest of the
    step, so from a start where it nowhere does its derivative is 0 and the fit would leave
    it there. It is then fitted from two starts, the given one and one where the rows' host
    work just outlasts the steps of the largest batch (:func:`_binding_start`). The second
    answer is kept only where its loss is lower by more than :data:`BESIDE_GAIN`, and its
    ``seq_s`` only where it outlasts some step: one that nowhere does changes no replay, so
    the runs cannot tell it from the given start's (0 by default), and a larger one would
    slow the bigger batches of a what-if that the runs never showed.

    Where an API server queue term is fitted, the answer is also refitted from starts that
    share its time with each other host term (:func:`_shared_starts`), kept for a loss
    :data:`RESTART_GAIN` lower: from one start a burst alone settled on slower steps and
    no intake, which its errors allowed within 3%."""
    unknown = [t for t in terms if t not in FIT_TERMS]
    if unknown or not terms:
        raise ConfigError(f"--fit: {unknown or 'nothing'}: choose among {', '.join(FIT_TERMS)}")
    if not targets:
        raise ConfigError("nothing to fit: no measured runs")
    t0 = time.perf_counter()
    cal = start or Calibration()
    starts = [cal]
    if "seq_s" in terms and any(t.overlap for t in targets):
        starts.append(_binding_start(targets, cal))
    evaluations, best = 0, None
    for first in starts:
        got, loss, used = _gauss_newton(targets, tuple(terms), first, max_iterations)
        evaluations += used
        if best is None or loss < best[1] * (1.0 - BESIDE_GAIN):
            best = (got, loss)
    assert best is not None
    for first in _shared_starts(best[0], terms):
        got, loss, used = _gauss_newton(targets, tuple(terms), first, max_iterations)
        evaluations += used
        if loss < best[1] * (1.0 - RESTART_GAIN):
            best = (got, loss)
    cal = best[0].with_values({t: 0.0 for t in terms
                               if t != "time_scale" and best[0].value(t) < 1e-9})
    if len(starts) > 1 and cal.overhead.seq_s > 0 and not _binds(targets, cal):
        cal = cal.with_values({"seq_s": 0.0})  # outlasts no step: unseen, so none (above)
    errs = {t.run.name: errors(t.run, replay(t, cal)) for t in targets}
    return FitResult(cal, tuple(terms), errs, evaluations, time.perf_counter() - t0,
                     any(t.overlap for t in targets))


def _shared_starts(cal: Calibration, terms: Sequence[str]) -> list[Calibration]:
    """Starts that share a queue term's time with another host term: each of the API
    server's queue terms being fitted (:data:`QUEUE_FLOORS_S`) and each other fitted host
    term, both set to half their sum at ``cal``. A queue term's column is a finite
    difference, and where few requests queue it moves the errors as a latency does: the
    fit can settle with all of the time on one of the two (a paced run's intake read as
    ``request_s``) although a burst beside it says how it splits."""
    out = []
    for q in (t for t in terms if t in QUEUE_FLOORS_S):
        for p in (t for t in terms if t not in ("time_scale", q)):
            half = 0.5 * (cal.value(q) + cal.value(p))
            if half > 0:
                out.append(cal.with_values({q: half, p: half}))
    return out


def _gauss_newton(targets: Sequence[Target], terms: tuple[str, ...], cal: Calibration,
                  max_iterations: int) -> tuple[Calibration, float, int]:
    """(the fitted calibration, its loss, replays used) from ``cal`` (module docstring)."""
    idx = [FIT_TERMS.index(t) for t in terms]
    unit = np.array([1.0 if t == "time_scale" else 1e-3 for t in terms])  # x (ms) -> seconds
    low = np.array([0.05 if t == "time_scale" else 0.0 for t in terms])
    high = np.array([20.0 if t == "time_scale" else np.inf for t in terms])
    evaluations = 0

    def evaluate(c: Calibration) -> tuple[float, np.ndarray, np.ndarray]:
        nonlocal evaluations
        evaluations += 1
        theta = _theta(c)
        parts = [linear_model(t.run, replay(t, c, terms), theta) for t in targets]
        a, b = np.vstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        return _loss(a @ theta + b), a, b

    loss, a, b = evaluate(cal)
    for _ in range(max_iterations):
        theta = _theta(cal)
        x = np.clip(theta[idx] / unit, low, high)
        a_x = a[:, idx] * unit
        b_x = b + a @ theta - a_x @ x
        # a term no residual moves (seq_s beside steps it nowhere outlasts) stays where it
        # is: the solver would otherwise wander along it, unseen by these runs
        moves = np.any(a_x != 0.0, axis=0)

        def propose(free: np.ndarray, x: np.ndarray = x, a_x: np.ndarray = a_x,
                    b_x: np.ndarray = b_x) -> np.ndarray:
            """The linear answer for the ``free`` terms, the others held at ``x``."""
            step = x.copy()
            if free.any():
                a_m, b_m = a_x[:, free], b_x + a_x[:, ~free] @ x[~free]
                lo_m, hi_m = low[free], high[free]
                inside = np.minimum(np.maximum(x[free], lo_m + 0.01), hi_m)  # trf stalls on
                step[free] = least_squares(                                  # a bound
                    lambda v, a_m=a_m, b_m=b_m: a_m @ v + b_m, inside,
                    jac=lambda v, a_m=a_m: a_m, bounds=(lo_m, hi_m), loss="soft_l1",
                    f_scale=LOSS_SCALE).x
            return step

        # every term's answer at once; where no step along it lowers the true loss (a
        # schedule that shifts with the step), each term's own answer in turn
        found = None
        for free in (moves, *(moves & (np.arange(len(terms)) == k)
                              for k in range(len(terms)) if len(terms) > 1 and moves[k])):
            step = propose(free)
            for alpha in (1.0, 0.5, 0.25, 0.1):
                x_new = x + alpha * (step - x)
                cand = cal.with_values(dict(zip(terms, (x_new * unit).tolist(), strict=True)))
                new_loss, a_new, b_new = evaluate(cand)
                if new_loss < loss:
                    found = (x_new, cand, new_loss, a_new, b_new)
                    break
            if found is not None:
                break
        if found is None:
            break  # no step along any linear answer lowers the true loss
        x_new, cand, new_loss, a_new, b_new = found
        moved = float(np.max(np.abs(x_new - x) / np.maximum(np.abs(x), 1.0)))
        cal, loss, a, b = cand, new_loss, a_new, b_new
        if moved < 1e-3:
            break
    return cal, loss, evaluations


def with_warm_prompts(requests: pd.DataFrame, warm: int) -> tuple[pd.DataFrame,
                                                                  PrefixSegments]:
    """The run's requests after its first ``warm`` prompts were served once (one output
    token each, all at once, :data:`WARM_GAP_S` before its first send; the run's sends move
    later by as much as that would put before 0), and the prefix
    identity of both: prompt ``i`` (the ``i``-th request sent) is one segment, the same in
    the warming copy and the run, as an earlier run of the same prompts (vLLM's and SGLang's
    benchmark clients draw the same prompts at the same seed) left them in a server's prefix
    cache. An open loop only (a closed loop's sends are not times)."""
    sent = requests["arrival_s"].to_numpy(np.float64)
    if not 1 <= warm <= len(requests) or np.isnan(sent).any():
        raise ConfigError(f"warm prompts {warm}: 1 to the run's {len(requests)} requests, "
                          "of an open loop (send times known)")
    order = np.argsort(sent, kind="stable")
    prompts = requests["prompt_tokens"].to_numpy(np.int64)[order]
    first_id = int(requests["request_id"].max()) + 1
    shift = max(0.0, WARM_GAP_S - float(sent.min()))  # the replay's clock starts at 0
    warming = pd.DataFrame({"request_id": np.arange(first_id, first_id + warm),
                            "arrival_s": np.full(warm, sent.min() + shift - WARM_GAP_S),
                            "prompt_tokens": prompts[:warm], "output_tokens": 1})
    run = requests.iloc[order].assign(arrival_s=sent[order] + shift)
    table = pd.concat([warming, run], ignore_index=True)
    segments, start, stop = from_lists([[(i, int(p))] for i, p in enumerate(prompts[:warm])]
                                       + [[(i, int(p))] for i, p in enumerate(prompts)])
    return table.assign(**{START: start, STOP: stop}), segments


def _overlap_steps(targets: Sequence[Target], cal: Calibration) -> list[pd.DataFrame]:
    """The step logs of the overlapping targets replayed with ``cal``."""
    return [_simulated(t, cal)[0].steps for t in targets if t.overlap]


def _binds(targets: Sequence[Target], cal: Calibration) -> bool:
    """Whether ``cal``'s ``seq_s`` x rows outlasts the rest of any step of the overlapping
    targets' replays (such a step lasts exactly that)."""
    for steps in _overlap_steps(targets, cal):
        rows = steps["num_decode_seqs"].to_numpy(np.float64) * cal.overhead.seq_s
        took = (steps["end_s"] - steps["start_s"]).to_numpy(np.float64)
        if np.any((rows > 0) & np.isclose(took, rows, rtol=1e-9, atol=0.0)):
            return True
    return False


def _binding_start(targets: Sequence[Target], cal: Calibration) -> Calibration:
    """``cal`` with ``seq_s`` where the rows' host work just outlasts the busiest decode
    steps (the median step of the most rows, of the overlapping targets replayed with
    ``cal``): the kink of the largest batches, from which the fit can move either way."""
    per_row = []
    for steps in _overlap_steps(targets, cal):
        rows = steps["num_decode_seqs"].to_numpy(np.float64)
        took = (steps["end_s"] - steps["start_s"]).to_numpy(np.float64)
        if rows.max(initial=0.0) > 0:
            busiest = rows == rows.max()
            per_row.append(took[busiest] / rows[busiest])
    every = np.concatenate(per_row) if per_row else np.zeros(0)
    return cal.with_values({"seq_s": float(np.median(every)) if len(every) else 1e-3})


def errors(run: MeasuredRun, pred: Predicted) -> dict[str, float]:
    """``<metric>_<stat>``: simulated / measured - 1 for mean, P50, P90 of TTFT, TPOT, E2E."""
    out = {}
    for metric, sim, meas in zip(METRICS, (pred.ttft_s, pred.tpot_s, pred.e2e_s),
                                 (run.ttft_s, run.tpot_s, run.e2e_s), strict=True):
        s, m = sim[np.isfinite(sim)], meas[np.isfinite(meas)]
        for stat in STATS:
            f = np.mean if stat == "mean" else (lambda v, q=int(stat[1:]): np.percentile(v, q))
            out[f"{metric}_{stat}"] = float(f(s) / f(m) - 1.0) if len(s) and len(m) else np.nan
    return out


def leave_one_out(targets: Sequence[Target], terms: Sequence[str] = DEFAULT_FIT_TERMS,
                  start: Calibration | None = None) -> dict[str, dict[str, float]]:
    """Per run: its errors as predicted by a fit on the other runs (needs >= 2 runs)."""
    return {name: errs for name, (errs, _) in leave_one_out_fits(targets, terms, start).items()}


def leave_one_out_fits(targets: Sequence[Target], terms: Sequence[str] = DEFAULT_FIT_TERMS,
                       start: Calibration | None = None
                       ) -> dict[str, tuple[dict[str, float], Calibration]]:
    """Per run: its errors as predicted by a fit on the other runs, and that fit."""
    out = {}
    for i, held in enumerate(targets):
        others = [t for j, t in enumerate(targets) if j != i]
        cal = fit(others, terms, start).calibration
        out[held.run.name] = (errors(held.run, replay(held, cal)), cal)
    return out


# Term sets ``select_terms`` tries, smallest first: which host costs a stack's runs can
# support is an empirical question (admit_s and request_s differ only under load; step_s
# and time_scale are one intercept on decode steps), so the runs answer it, held out.
CANDIDATE_TERMS: tuple[tuple[str, ...], ...] = (
    ("time_scale", "request_s"),
    ("time_scale", "token_s", "request_s"),
    ("time_scale", "step_s", "token_s", "request_s"),
    ("time_scale", "admit_s", "token_s", "request_s"),
    DEFAULT_FIT_TERMS,
)
# and where the runs' scheduler overlaps its steps, the row cost beside them (fit), which
# none of the sets above holds: the time a batch's bookkeeping outlasts its kernels
BESIDE_TERMS: tuple[str, ...] = ("time_scale", "seq_s", "request_s")
# and where a run sent many requests at once, the API server's intake, one at a time
INTAKE_TERMS: tuple[str, ...] = ("time_scale", "token_s", "request_s", "intake_s")
BURST_REQUESTS = 10  # requests sent at one instant that make a run a burst (select_terms)
SCORE_STATS = ("ttft_mean", "ttft_p50", "ttft_p90", "tpot_mean", "tpot_p50", "tpot_p90",
               "e2e_mean", "e2e_p50", "e2e_p90")


def heldout_score(heldout: dict[str, dict[str, float]]) -> float:
    """Mean |held-out error| over the runs' TTFT, TPOT and E2E mean, P50 and P90."""
    errs = [abs(e[k]) for e in heldout.values() for k in SCORE_STATS if np.isfinite(e[k])]
    return float(np.mean(errs)) if errs else float("inf")


def select_terms(targets: Sequence[Target], start: Calibration | None = None,
                 candidates: Sequence[tuple[str, ...]] = CANDIDATE_TERMS,
                 ) -> tuple[tuple[str, ...], dict[tuple[str, ...], float]]:
    """The term set with the least leave-one-run-out error (needs >= 2 runs), and every
    candidate's score (:data:`BESIDE_TERMS` a candidate too where the runs' steps overlap,
    :data:`INTAKE_TERMS` where a run is a burst).
    Within 5% (relative) or 0.2 points of the best, the smaller set wins: a term the runs
    cannot pin down only adds variance to a prediction elsewhere."""
    if len(targets) < 2:
        raise ConfigError("choosing terms needs two runs (each predicted by a fit on the "
                          "others); give --fit TERMS for one run")
    if any(t.overlap for t in targets) and BESIDE_TERMS not in candidates:
        candidates = (*candidates, BESIDE_TERMS)
    if any(_burst(t) for t in targets) and INTAKE_TERMS not in candidates:
        candidates = (*candidates, INTAKE_TERMS)
    scores = {tuple(c): heldout_score(leave_one_out(targets, c, start)) for c in candidates}
    best = min(scores.values())
    chosen = next(c for c in scores if scores[c] <= best * 1.05 + 0.002)
    return chosen, scores


def _burst(target: Target) -> bool:
    """Whether the run sent at least :data:`BURST_REQUESTS` requests at one instant."""
    _, counts = np.unique(target.run.requests["arrival_s"].to_numpy(), return_counts=True)
    return bool(counts.max(initial=0) >= BURST_REQUESTS)


def describe_terms(cal: Calibration, terms: Sequence[str]) -> list[tuple[str, str]]:
    """(term, value in words) for a report: time_scale as a ratio, the rest in ms."""
    return [(t, f"{cal.value(t):.4g}" if t == "time_scale" else f"{cal.value(t) * 1e3:.4g} ms")
            for t in terms]
