"""The fitted piecewise cost model: per-kind fixed costs and a roofline knee in tokens.

    t = fixed(kind) + b1*P + k1*max(T - K1, 0) + k2*max(T - K2, 0)
        + b2*A + b3*D + b4*C + b5a*admitted + b5f*finished

P, A, D, C as in :mod:`simulator.costs.linear`; T = P + D, the tokens through the model
this step. Admitting and finishing a request are priced apart: a measured admission cost
holds per-sequence prefill work that finishing a request does not do. The step's *kind*
picks its fixed cost:

- a one-token step (T = 1: batch-1 decode, or a one-token prefill): ``single_token_step_s``.
  Its matrix products are matrix-vector kernels, which run faster than any matrix-matrix
  product (on CPU a batch-1 decode step is ~4 ms cheaper than batch 2);
- prefill tokens only: ``prefill_step_s``; decode rows only: ``decode_step_s``;
- both (chunked prefill): ``mixed_step_s``. One forward pass, so one fixed cost; when the
  profile had no mixed steps the fit sets it to max(prefill_step_s, decode_step_s).

The hinges are the roofline: a forward pass costs max(weight read, token compute), and
max(F, c*T) = F + c * max(T - F/c, 0): the floor F sits in the fixed cost and the knee
K1 = F/c is the ridge point in tokens, below which more tokens cost (almost) nothing.
A second knee K2 lets the compute slope rise again at large token counts, as measured
GPUs show at 2-4k tokens (sustained-load clocks, kernel choice). Every coefficient is
>= 0, so the time never falls when work is added and the slope only rises with T; the fit
also keeps every fixed cost >= single_token_step_s (no forward pass is cheaper than a
one-token one). Knees are fitted on a power-of-two grid (calibrate/fit.py); a knee whose
slope is 0 is inert and stored as 0.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields
from typing import Any

import numpy as np

from simulator.costs.base import Num, check_number
from simulator.costs.decode_terms import DecodeTerms
from simulator.errors import ConfigError
from simulator.frozen_pickle import reduce_frozen
from simulator.shapes import StepShape, StepShapes


@dataclass(frozen=True, slots=True)
class PiecewiseCost:
    """Step time: a fixed cost by step kind, linear terms, and two knees in tokens."""

    prefill_step_s: float = 0.0  # fixed cost of a step with prefill tokens only (T >= 2)
    decode_step_s: float = 0.0  # fixed cost of a step with decode rows only (T >= 2)
    mixed_step_s: float = 0.0  # fixed cost of a step with prefill tokens and decode rows
    single_token_step_s: float = 0.0  # fixed cost of a one-token step (matrix-vector kernels)
    prefill_token_s: float = 0.0  # per prefill token, at any token count
    knee1_tokens: float = 0.0  # K1: tokens in the step (P + D) where the first slope starts
    knee1_token_s: float = 0.0  # k1: extra seconds per token above K1
    knee2_tokens: float = 0.0  # K2: where the second slope starts
    knee2_token_s: float = 0.0  # k2: extra seconds per token above K2
    prefill_attn_s: float = 0.0  # per unit of prefill attention work (A, tokens^2)
    decode_seq_s: float = 0.0  # per decoding row (D)
    decode_context_s: float = 0.0  # per decode context token attended (C)
    admit_s: float = 0.0  # per request admitted this step (its first step)
    finish_s: float = 0.0  # per request finished this step (its last token)

    def __reduce__(self) -> tuple[Any, tuple[type, dict[str, Any]]]:
        return reduce_frozen(self)  # compiled, it could not be unpickled otherwise

    def __post_init__(self) -> None:
        for f in fields(self):
            check_number(f.name, getattr(self, f.name))
        values = astuple(self)
        if not any(values[:5] + values[6:7] + values[8:]):  # knee positions alone price nothing
            raise ConfigError("PiecewiseCost: all coefficients are 0, every step would take 0 s")

    def _price(self, fixed: Num, p: Num, h1: Num, h2: Num, a: Num, d: Num, c: Num,
               admitted: Num, finished: Num) -> Num:
        # Over arrays (step_times); step_time writes the same sum over floats, term by
        # term in this order, so the two agree exactly (tests/test_cost_form_piecewise.py,
        # test_step_times_equal_step_time_exactly).
        return (
            fixed
            + self.prefill_token_s * p
            + self.knee1_token_s * h1
            + self.knee2_token_s * h2
            + self.prefill_attn_s * a
            + self.decode_seq_s * d
            + self.decode_context_s * c
            + self.admit_s * admitted
            + self.finish_s * finished
        )

    def step_time(self, shape: StepShape) -> float:
        # A speculative step's drafts verified (S) count as decode rows (tokens through the
        # model, one sampled position each), their query-key pairs (W) as prefill attention
        # work (docs/speculative.md); both are 0 otherwise.
        p, d = shape.num_prefill_tokens, shape.num_decode_seqs + shape.num_spec_tokens
        tokens = float(p + d)
        if p + d == 1:
            fixed = self.single_token_step_s
        elif p > 0:
            fixed = self.mixed_step_s if d > 0 else self.prefill_step_s
        else:
            fixed = self.decode_step_s
        h1 = tokens - self.knee1_tokens
        h2 = tokens - self.knee2_tokens
        # _price's sum term by term, over floats (typed: compiled, native arithmetic;
        # through _price's float | array operands each term was a boxed generic call)
        return (
            fixed
            + self.prefill_token_s * float(p)
            + self.knee1_token_s * (h1 if h1 >= 0.0 else 0.0)
            + self.knee2_token_s * (h2 if h2 >= 0.0 else 0.0)
            + self.prefill_attn_s * float(shape.prefill_attn_work + shape.spec_attn_work)
            + self.decode_seq_s * float(d)
            + self.decode_context_s * float(shape.decode_context_tokens)
            + self.admit_s * float(shape.num_admitted)
            + self.finish_s * float(shape.num_finished)
        )

    def decode_pricer(self) -> DecodeTerms:
        """:meth:`step_time` of a pure-decode step, without building its shape.

        ``_price`` with P = A = admitted = 0, written out term by term in the same order.
        Its first six terms depend on the row count alone, so each row count's
        left-associated partial sum is kept (a decode run prices many steps of one D);
        the rest are added in the same order, so every float is :meth:`step_time`'s
        (tests/test_decision_costs.py)."""
        return DecodeTerms(self._decode_base, self.decode_context_s, self.admit_s * 0.0,
                           self.finish_s)

    def _decode_base(self, d: int) -> float:
        """The decode price's partial sum up to and including the decode-row term."""
        tokens = float(d)
        h1 = tokens - self.knee1_tokens
        h2 = tokens - self.knee2_tokens
        return (
            (self.single_token_step_s if d == 1 else self.decode_step_s)
            + self.prefill_token_s * 0.0
            + self.knee1_token_s * (h1 if h1 >= 0.0 else 0.0)
            + self.knee2_token_s * (h2 if h2 >= 0.0 else 0.0)
            + self.prefill_attn_s * 0.0
            + self.decode_seq_s * tokens
        )

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        if shapes.decode_rows >= 0:  # a decode run: the terms of D are one partial sum
            return self._decode_run_times(shapes)
        p = shapes.num_prefill_tokens.astype(np.float64)
        d = shapes.num_decode_seqs.astype(np.float64)
        tokens = p + d
        fixed = np.where(
            tokens == 1,
            self.single_token_step_s,
            np.where(p > 0, np.where(d > 0, self.mixed_step_s, self.prefill_step_s),
                     self.decode_step_s),
        )
        return np.asarray(
            self._price(
                fixed,
                p,
                np.maximum(tokens - self.knee1_tokens, 0.0),
                np.maximum(tokens - self.knee2_tokens, 0.0),
                np.asarray(shapes.prefill_attn_work, dtype=np.float64),
                d,
                shapes.decode_context_tokens.astype(np.float64),
                shapes.num_admitted.astype(np.float64),
                shapes.num_finished.astype(np.float64),
            ),
            dtype=np.float64,
        )

    def _decode_run_times(self, shapes: StepShapes) -> np.ndarray:
        """:meth:`step_times` of a pure-decode run (``shapes.decode_rows`` rows a step).

        ``_price`` term by term in the same order: the first six as
        :meth:`decode_pricer`'s partial sum (the same for every step), then C, admitted
        (0) and finished over the arrays, so every float is the general path's, in five
        array operations instead of ~25 (tests/test_decode_run_price.py)."""
        times = self._decode_base(shapes.decode_rows) + self.decode_context_s * (
            shapes.decode_context_tokens.astype(np.float64))
        times += self.admit_s * 0.0
        times += self.finish_s * shapes.num_finished.astype(np.float64)
        return times
