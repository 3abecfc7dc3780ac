"""Which run to measure next: the load that best separates the terms a fit left loose.

A fit's terms are loose (calibrate/fit_spread.py) when the runs move the errors alike with
them: one load cannot tell slower steps from a queue at the API server, light loads cannot
tell a request's latency from its admission. Another run at another load may; which one is
a question the simulator can answer before anyone measures it. For each candidate load, a
run of the measured runs' own requests (their (prompt, output) pairs, resampled) is
replayed with the fitted calibration, and its rows join the linear model at the answer as
if measured so (residuals 0): the terms' shares with that run added say how well it would
separate them. The candidates are a burst (every request at once), Poisson arrivals at
a quarter, half and 80% of the rate the deployment serves those requests at (a burst's
completed requests over its span, replayed with the calibration), and two other mixes of
the lengths the runs hold, at half their own served rate: long prompts with short replies
(prefill-heavy) and the other way round (decode-heavy). Some terms differ only in how a
step's time splits between its kernels and its fixed host work (``time_scale`` and
``step_s``), which a load does not change and a mix of lengths does.

This is design, not evidence: it assumes the fitted calibration, so a run it proposes
separates the terms as the model of the server has them. The proposal is the candidate
whose largest share over the seen terms is least.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from calibrate.fit_spread import SHARED_WARN, TermSpread, spread_of
from calibrate.from_run import Calibration, Target, _simulated, _theta, linear_model, replay
from calibrate.run_records import MeasuredRun
from simulator.costs.host import FIT_TERMS

LOADS = (0.25, 0.5, 0.8)  # Poisson candidates, as fractions of the served rate
SHAPES = ("long prompts", "long outputs")  # and other mixes of the runs' lengths (_pairs)
MAX_REQUESTS = 300  # requests in a candidate run (fewer when the runs had fewer)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A run one could measure next and how well it would separate the fitted terms."""

    label: str  # "a burst of 300" or "4.2 req/s (50% of 8.4)"
    rate: float  # req/s; inf for a burst
    requests: pd.DataFrame  # the run to send: request_id, arrival_s, prompt/output tokens
    spread: list[TermSpread]  # the terms with this run beside the measured ones

    @property
    def worst(self) -> float:
        """The largest share over the terms the runs see (1 where none is seen)."""
        seen = [s.shared for s in self.spread if s.seen]
        return max(seen) if seen else 1.0


def _pairs(targets: Sequence[Target], n: int, rng: np.random.Generator,
           shape: str = "as measured") -> pd.DataFrame:
    """``n`` (prompt, output) pairs resampled from the runs' requests: as measured, or
    ``long prompts`` (prompts from the longest quarter, outputs from the shortest) or
    ``long outputs`` (the other way round): lengths the server has served, in other mixes."""
    pool = pd.concat([t.run.requests[["prompt_tokens", "output_tokens"]] for t in targets],
                     ignore_index=True)
    if shape == "as measured":
        return pool.iloc[rng.integers(0, len(pool), n)].reset_index(drop=True)
    p, o = pool["prompt_tokens"].to_numpy(), pool["output_tokens"].to_numpy()
    long_p, short_o = p[p >= np.quantile(p, 0.75)], o[o <= np.quantile(o, 0.25)]
    short_p, long_o = p[p <= np.quantile(p, 0.25)], o[o >= np.quantile(o, 0.75)]
    prompts, outputs = (long_p, short_o) if shape == "long prompts" else (short_p, long_o)
    return pd.DataFrame({"prompt_tokens": rng.choice(prompts, n),
                         "output_tokens": rng.choice(outputs, n)})


def _run(target: Target, cal: Calibration, pairs: pd.DataFrame, sends: np.ndarray,
         label: str) -> Target:
    """A run of ``pairs`` sent at ``sends`` on ``target``'s deployment, its 'measured'
    latencies the replay's with ``cal``."""
    table = pairs.assign(request_id=np.arange(len(pairs)), arrival_s=sends)[
        ["request_id", "arrival_s", "prompt_tokens", "output_tokens"]]
    stand_in = MeasuredRun(label, table, np.ones(len(table)), np.ones(len(table)),
                           np.ones(len(table)), per_request=True)
    base = replace(target, run=stand_in, warm_prompts=0)
    _, (ttft, tpot, e2e) = _simulated(base, cal)
    return replace(base, run=replace(stand_in, ttft_s=ttft, tpot_s=tpot, e2e_s=e2e))


def served_rate(target: Target, cal: Calibration, pairs: pd.DataFrame) -> float:
    """Requests a second the deployment serves ``pairs`` at, sent all at once."""
    burst = _run(target, cal, pairs, np.zeros(len(pairs)), "burst")
    span = float(np.nanmax(burst.run.e2e_s))
    return len(pairs) / span if span > 0 else math.inf


def candidates(targets: Sequence[Target], cal: Calibration, terms: Sequence[str],
               seed: int = 0) -> list[Candidate]:
    """Each candidate load (module docstring) with the terms' shares were it measured."""
    rng = np.random.default_rng(seed)
    n = min(MAX_REQUESTS, max(len(t.run.requests) for t in targets))
    pairs = _pairs(targets, n, rng)
    theta = _theta(cal)
    idx = [FIT_TERMS.index(t) for t in terms]
    parts = [linear_model(t.run, replay(t, cal, terms), theta) for t in targets]
    a = np.vstack([p[0] for p in parts])
    r = a @ theta + np.concatenate([p[1] for p in parts])
    rate = served_rate(targets[0], cal, pairs)
    runs = [(pairs, math.inf, f"a burst of {n}")] + [
        (pairs, f * rate, f"{f * rate:.3g} req/s ({f:.0%} of {rate:.3g})") for f in LOADS]
    for shape in SHAPES:  # other mixes of the lengths, at half the rate they are served at
        mixed = _pairs(targets, n, rng, shape)
        half = 0.5 * served_rate(targets[0], cal, mixed)
        runs.append((mixed, half, f"{shape}, {half:.3g} req/s (50%)"))
    out = []
    for run_pairs, load, label in runs:
        sends = (np.zeros(n) if math.isinf(load)
                 else np.cumsum(rng.exponential(1.0 / load, n)))
        extra = _run(targets[0], cal, run_pairs, sends, label)
        a_new, b_new = linear_model(extra.run, replay(extra, cal, terms), theta)
        spread = spread_of(np.vstack([a, a_new])[:, idx],
                           np.concatenate([r, a_new @ theta + b_new]), terms)
        out.append(Candidate(label, load, extra.run.requests, spread))
    return out


def proposal(found: Sequence[Candidate]) -> Candidate:
    """The candidate whose largest share is least (the first on ties: a burst)."""
    return min(found, key=lambda c: c.worst)


def advice(found: Sequence[Candidate]) -> str:
    """One sentence for a report: the run to measure next, or that none would do."""
    if not found:
        return ""
    best = proposal(found)
    listed = ", ".join(f"{c.label} {c.worst:.0%}" for c in found)
    if best.worst >= SHARED_WARN:
        return (f"no run tried separates the loose terms (at best {best.worst:.0%} shared, "
                f"with {best.label}): fit fewer of them (candidates, replayed with this "
                f"fit: {listed})")
    return (f"measure next: {best.label}, which would leave no term above "
            f"{best.worst:.0%} shared (candidates, replayed with this fit: {listed})")

