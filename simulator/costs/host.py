"""Host (CPU) overhead on top of any cost model: the serving stack's work outside the kernels.

vLLM's own profile of Llama-3-8B on an H100 once found a third of the time in its API
server and another third in scheduling: host work is first-order. :class:`HostCost` adds
it to a kernel-level cost model in two kinds:

*Blocking* (the engine loop does it, so every request in the step waits), per step::

    t = inner(step) + step_s + admit_s * admitted + finish_s * finished
        + token_s * (D + admitted) + seq_s * D

- ``step_s``: scheduling, input preparation, launching (per step);
- ``admit_s`` / ``finish_s``: per request admitted / finishing in the step;
- ``token_s``: per output token sampled (sampling, detokenising, streaming). A step samples
  one token per decode row (D) plus one per request whose prompt completes. A
  :class:`~simulator.shapes.StepShape` does not say which prefill chunks complete a prompt,
  so ``D + admitted`` stands for it: exact without chunked prefill (a prompt is admitted
  and completed in one step); with chunked prefill each request's first token is priced at
  its first chunk rather than its last (the same count per request, a few steps early);
  a recompute after preemption is not counted again;
- ``seq_s``: per running decode row (Python bookkeeping that grows with the batch).

Under an overlap scheduler (``policy.overlap_schedule``: SGLang's from 0.4, vLLM's async
scheduling) the engine forms step N+1 on the CPU while the GPU runs step N, so the per-row
bookkeeping runs beside the step instead of after it (:func:`overlapped`)::

    t = max(inner(step) + step_s + admit_s * admitted + finish_s * finished
            + token_s * (D + admitted),  seq_s * D)

The other terms stay in series: they were fitted as the time a step loses whichever way the
engine schedules.

And a step above the stack's CUDA-graph limit: a pure-decode step of more than
``graph_max_rows`` rows (0: no limit) costs ``eager_s`` more. Stacks capture decode steps as
CUDA graphs only up to a batch size (SGLang's ``cuda_graph_max_bs``) and launch a larger
batch's kernels one by one from Python; the kernel tables time the kernels, not the
launches. ``graph_max_rows`` is a count of rows, the one term here not in seconds.

*Non-blocking* ``request_s``: latency each request spends before it reaches the engine (API
server, tokenising, HTTP). It is not a step cost and occupies no engine time; the cost
model only carries it to the simulator (``ClusterSpec.request_s``), which delivers each
request ``request_s`` after its arrival, so TTFT and E2E include it and TPOT does not.

*Non-blocking* ``stream_s``: seconds the API server spends on each output token it streams
(detokenising, framing, writing), one token at a time: a queue in front of each replica
(simulator/token_stream.py) that adds nothing while it keeps up and caps the replica's
output at ``1 / stream_s`` tokens a second when it does not. The replica reads it from its
cost model (:func:`stream_token_s`); a black-box fit does not (a client's token times
alone cannot tell the queue from the steps).

*Non-blocking* ``intake_s``: seconds the API server spends taking in each request (reading
it, templating and tokenising its prompt, handing it to the engine), one at a time, in the
same first-in, first-out queue as its ``stream_s`` tokens (simulator/token_stream.py). A
request reaches the engine when the server has taken it in, so a burst of N reaches it over
N x ``intake_s``; and a token the engine emits while the server is still taking requests in
waits behind them, so no client of a burst sees a first token before the server has taken
in the requests sent before it was emitted. One request alone pays ``intake_s`` once.

A scenario adds these with ``[cost] overhead = {step_s = ..., request_s = ...}``; a cost
profile (contract 3) stores them as its optional ``overhead`` object.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

from simulator.costs.base import (
    CostModel,
    DecodePricer,
    Num,
    ScaledCost,
    check_number,
    decode_pricer,
)
from simulator.errors import ConfigError
from simulator.shapes import StepShape, StepShapes


@dataclass(frozen=True, slots=True)
class Overhead:
    """Host costs in seconds (see the module docstring); all >= 0, all 0 by default."""

    step_s: float = 0.0  # per step
    admit_s: float = 0.0  # per request admitted in the step
    finish_s: float = 0.0  # per request finishing in the step
    token_s: float = 0.0  # per output token sampled in the step (D + admitted)
    seq_s: float = 0.0  # per decode row in the step
    request_s: float = 0.0  # per request, before it reaches the engine (non-blocking)
    stream_s: float = 0.0  # per output token the API server streams (non-blocking, a FIFO)
    intake_s: float = 0.0  # per request the API server takes in (non-blocking, the same FIFO)
    eager_s: float = 0.0  # per pure-decode step of more than graph_max_rows rows
    graph_max_rows: float = 0.0  # rows, not s: the largest decode step a graph replays (0: any)

    def __post_init__(self) -> None:
        for f in fields(self):
            check_number(f.name, getattr(self, f.name))

    @classmethod
    def from_mapping(cls, values: object, where: str) -> Overhead:
        """From a TOML/JSON table; errors name ``<where>.<key>`` and show the bad value."""
        if not isinstance(values, Mapping):
            raise ConfigError(f"{where}={values!r} must be a table of host costs "
                              f"({', '.join(OVERHEAD_KEYS)}), in seconds "
                              f"({', '.join(COUNT_TERMS)} in rows)")
        for key, value in values.items():
            if key not in OVERHEAD_KEYS:
                raise ConfigError(f"{where}.{key} is not a host cost; known: "
                                  f"{', '.join(OVERHEAD_KEYS)}")
            check_number(f"{where}.{key}", value)
        return cls(**{k: float(v) for k, v in values.items()})

    def to_dict(self) -> dict[str, float]:
        """The non-zero terms (what a profile's ``overhead`` object stores)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}

    def describe(self) -> str:
        """``step 0.2 ms, request 5 ms``: the non-zero terms, for a run's cost source."""
        terms = self.to_dict()
        if not terms:
            return "none"
        return ", ".join(f"graph rows {v:g}" if k in COUNT_TERMS
                         else f"{k.removesuffix('_s')} {v * 1e3:.4g} ms"
                         for k, v in terms.items())


OVERHEAD_KEYS = tuple(f.name for f in fields(Overhead))
COUNT_TERMS = ("graph_max_rows",)  # the terms that are counts, not seconds
# What black-box calibration (calibrate/from_run.py) can fit: a correction on the base
# profile's times, and every host term but the CUDA-graph pair (a limit is read from the
# stack, not fitted, and a client's token times cannot place it); the API server's queue
# (intake_s, stream_s) by a replay's finite difference, not the linear model. The default
# leaves out finish_s and seq_s, which a client's token times barely separate from step_s
# and token_s, and the queue, which a run at one load cannot tell from request_s and slower
# steps.
FIT_TERMS = ("time_scale", *(k for k in OVERHEAD_KEYS if k not in ("eager_s", *COUNT_TERMS)))
DEFAULT_FIT_TERMS = ("time_scale", "step_s", "admit_s", "token_s", "request_s")


class HostCost:
    """``inner``'s step times plus blocking host work (its per-row part beside the step when
    ``overlapped``: an overlap scheduler); carries ``request_s`` for the simulator."""

    def __init__(self, inner: CostModel, overhead: Overhead, overlapped: bool = False) -> None:
        self.inner = inner
        self.overhead = overhead
        # the per-row bookkeeping (seq_s) runs beside the step (an overlap scheduler), not
        # after it: the module docstring
        self.overlapped = overlapped
        # decode rows past which a pure-decode step pays eager_s (inf: never), decided once
        # so a step without the term pays one comparison
        priced = overhead.eager_s > 0 and overhead.graph_max_rows > 0
        self._eager_past = overhead.graph_max_rows if priced else math.inf

    @property
    def request_s(self) -> float:
        """Seconds from a request's arrival to the engine seeing it (not a step cost)."""
        return self.overhead.request_s

    def _host(self, d: Num, admitted: Num, finished: Num) -> Num:
        """The blocking host seconds of a step (numbers) or of many steps (arrays), every
        term in series."""
        h = self.overhead
        return (h.step_s + h.admit_s * admitted + h.finish_s * finished
                + h.token_s * (d + admitted) + h.seq_s * d)

    def _beside(self, kernel_s: Num, host_s: Num, d: Num) -> Num:
        """A step under an overlap scheduler: its kernels and serial host terms, or its
        rows' host work (``seq_s`` x ``d``, part of ``host_s``) if that is longer."""
        rows = self.overhead.seq_s * d
        serial = kernel_s + host_s - rows
        if isinstance(serial, float):  # one step: no numpy on the hot path
            return serial if serial >= rows else rows
        return np.maximum(serial, rows)

    def step_time(self, shape: StepShape) -> float:
        d = float(shape.num_decode_seqs)
        host = float(self._host(d, float(shape.num_admitted), float(shape.num_finished)))
        t = self.inner.step_time(shape)
        t = float(self._beside(t, host, d)) if self.overlapped else t + host
        if d > self._eager_past and shape.num_prefill_tokens == 0:
            t += self.overhead.eager_s
        return t

    def decode_pricer(self) -> DecodePricer | None:
        inner = decode_pricer(self.inner)
        if inner is None:
            return None
        host, past, eager = self._host, self._eager_past, self.overhead.eager_s
        if self.overlapped:
            beside = self._beside
            return lambda d, c, f: (float(beside(inner(d, c, f),
                                                 float(host(float(d), 0.0, float(f))),
                                                 float(d)))
                                    + (eager if d > past else 0.0))
        if past == math.inf:
            return lambda d, c, f: inner(d, c, f) + float(host(float(d), 0.0, float(f)))
        return lambda d, c, f: (inner(d, c, f) + float(host(float(d), 0.0, float(f)))
                                + (eager if d > past else 0.0))

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        d = shapes.num_decode_seqs.astype(np.float64)
        a = shapes.num_admitted.astype(np.float64)
        f = shapes.num_finished.astype(np.float64)
        kernels, host = self.inner.step_times(shapes), self._host(d, a, f)
        out = np.asarray(self._beside(kernels, host, d)) if self.overlapped else kernels + host
        if self._eager_past < math.inf:
            out = out + self.overhead.eager_s * ((shapes.num_prefill_tokens == 0)
                                                 & (d > self._eager_past))
        return out


def with_overhead(cost: CostModel, overhead: Overhead) -> CostModel:
    """``cost`` with ``overhead`` added (``cost`` itself when every term is 0)."""
    return HostCost(cost, overhead) if overhead.to_dict() else cost


def overlapped(cost: CostModel) -> CostModel:
    """``cost`` under an overlap scheduler: its per-row host work (``seq_s``) runs beside
    each step, not after it (the module docstring); ``cost`` itself when it has none."""
    if isinstance(cost, HostCost) and cost.overhead.seq_s > 0 and not cost.overlapped:
        return HostCost(cost.inner, cost.overhead, overlapped=True)
    return cost


def calibrated_cost(cost: CostModel, time_scale: float, overhead: Overhead,
                    overlap: bool = False) -> CostModel:
    """``cost`` x ``time_scale`` (a fitted correction), plus ``overhead`` (host work): what a
    calibrated profile and a black-box candidate both price steps with. ``overlap``: the
    deployment's scheduler overlaps its steps, so ``seq_s`` runs beside each step
    (:func:`overlapped`; a profile leaves that to the deployment, which knows its policy)."""
    scaled = cost if time_scale == 1.0 else ScaledCost(cost, time_scale)
    priced = with_overhead(scaled, overhead)
    return overlapped(priced) if overlap else priced


def split_host(cost: CostModel) -> tuple[CostModel, Overhead]:
    """(the kernel-level cost model, its host overhead): undo :func:`with_overhead`."""
    if isinstance(cost, HostCost):
        return cost.inner, cost.overhead
    return cost, Overhead()


def stream_token_s(cost: CostModel) -> float:
    """Seconds the API server spends streaming each output token (``stream_s``; 0 without
    host overhead): simulator/token_stream.py."""
    return cost.overhead.stream_s if isinstance(cost, HostCost) else 0.0


def intake_request_s(cost: CostModel) -> float:
    """Seconds the API server spends taking in each request, one at a time (``intake_s``;
    0 without host overhead): simulator/token_stream.py."""
    return cost.overhead.intake_s if isinstance(cost, HostCost) else 0.0


def request_delay_s(cost: CostModel) -> float:
    """The non-blocking per-request latency ``cost`` carries (0 without host overhead)."""
    return cost.request_s if isinstance(cost, HostCost) else 0.0
