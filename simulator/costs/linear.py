"""The fitted linear cost model (design.md, "Cost models"):

    t = b0 + b1*P + b2*A + b3*D + b4*C + b5*(admitted + finished)

P prefill tokens (padding included), A prefill attention work (sum over chunks of
n * (ctx + n/2)), D decode rows, C decode context tokens summed; the last term is the
per-request CPU work (tokenise on admission, detokenise and respond on finish).
Coefficients come from non-negative least squares over a profile table (calibrate/),
so each is a physical time and must be >= 0.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields

import numpy as np

from simulator.costs.base import DecodePricer, Num, check_number
from simulator.errors import ConfigError
from simulator.shapes import StepShape, StepShapes


@dataclass(frozen=True, slots=True)
class LinearCost:
    """Step time linear in the step's shape; every coefficient is seconds per unit."""

    step_s: float = 0.0  # b0: fixed cost of any step (launches, scheduling, sampling)
    prefill_token_s: float = 0.0  # b1: per prefill token (P)
    prefill_attn_s: float = 0.0  # b2: per unit of prefill attention work (A, tokens^2)
    decode_seq_s: float = 0.0  # b3: per decoding row (D)
    decode_context_s: float = 0.0  # b4: per decode context token attended (C)
    request_s: float = 0.0  # b5: per request admitted or finished this step

    def __post_init__(self) -> None:
        for f in fields(self):
            check_number(f.name, getattr(self, f.name))
        if not any(astuple(self)):
            raise ConfigError("LinearCost: all coefficients are 0, every step would take 0 s")

    def _price(self, p: Num, a: Num, d: Num, c: Num, n_req: Num) -> Num:
        # Written once over floats or arrays, so step_time and step_times agree exactly.
        return (
            self.step_s
            + self.prefill_token_s * p
            + self.prefill_attn_s * a
            + self.decode_seq_s * d
            + self.decode_context_s * c
            + self.request_s * n_req
        )

    def step_time(self, shape: StepShape) -> float:
        n_req = shape.num_admitted + shape.num_finished
        # A speculative step's drafts verified (S) are priced as decode rows, their
        # query-key pairs (W) as prefill attention work (docs/speculative.md).
        return float(
            self._price(
                shape.num_prefill_tokens,
                shape.prefill_attn_work + shape.spec_attn_work,
                shape.num_decode_seqs + shape.num_spec_tokens,
                shape.decode_context_tokens,
                n_req,
            )
        )

    def decode_pricer(self) -> DecodePricer:
        """:meth:`step_time` of a pure-decode step, without building its shape."""
        return lambda d, c, f: float(self._price(0, 0.0, d, c, 0 + f))

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        n_req = shapes.num_admitted + shapes.num_finished
        return np.asarray(
            self._price(
                shapes.num_prefill_tokens.astype(np.float64),
                shapes.prefill_attn_work,
                shapes.num_decode_seqs.astype(np.float64),
                shapes.decode_context_tokens.astype(np.float64),
                n_req.astype(np.float64),
            ),
            dtype=np.float64,
        )
