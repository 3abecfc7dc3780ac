"""The shape of one engine step: what a cost model needs to price it.

A policy turns its batch into a :class:`StepShape`; a cost model turns shapes into
seconds. :class:`StepShapes` holds many steps as numpy arrays so cost models can
price a whole fast-forwarded decode run in one vectorised call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(slots=True)
class StepShape:
    """Work done by one forward pass (one engine step). Treat it as immutable.

    Not ``frozen``: the simulator builds one per step, and a frozen dataclass's
    ``__init__`` (``object.__setattr__`` per field) costs three times a plain one's.
    """

    num_prefill_tokens: int = 0  # P: prompt tokens processed this step, padding included
    prefill_attn_work: float = 0.0  # A: sum over prefill chunks of n * (ctx + n / 2), tokens^2
    num_decode_seqs: int = 0  # D: rows decoding one token this step, padded rows included
    decode_context_tokens: int = 0  # C: sum over decode rows of tokens attended (cache + new)
    num_admitted: int = 0  # requests whose first step this is (per-request CPU overhead)
    num_finished: int = 0  # requests whose last token this step produces
    # Speculative decoding (simulator/policies/speculative.py); all 0 otherwise:
    num_spec_tokens: int = 0  # S: draft tokens verified, beyond one per decode row
    spec_attn_work: float = 0.0  # W: query-key pairs of those S tokens (each attends its
    # row's context plus the drafts before it), tokens^2
    num_draft_passes: int = 0  # draft-model decode passes before the verify, each over D rows

    def __init__(self, num_prefill_tokens: int = 0, prefill_attn_work: float = 0.0,
                 num_decode_seqs: int = 0, decode_context_tokens: int = 0,
                 num_admitted: int = 0, num_finished: int = 0, num_spec_tokens: int = 0,
                 spec_attn_work: float = 0.0, num_draft_passes: int = 0) -> None:
        # written out (the dataclass keeps it): compiled (simulator/accel.py) it is native,
        # where the one dataclasses generates stays interpreted
        self.num_prefill_tokens = num_prefill_tokens
        self.prefill_attn_work = prefill_attn_work
        self.num_decode_seqs = num_decode_seqs
        self.decode_context_tokens = decode_context_tokens
        self.num_admitted = num_admitted
        self.num_finished = num_finished
        self.num_spec_tokens = num_spec_tokens
        self.spec_attn_work = spec_attn_work
        self.num_draft_passes = num_draft_passes

    @property
    def num_tokens(self) -> int:
        """Tokens through the model this step (prefill tokens, one per decode row, and the
        drafts verified)."""
        return self.num_prefill_tokens + self.num_decode_seqs + self.num_spec_tokens


def filled(k: int, value: int) -> np.ndarray:
    """``np.full(k, value)`` of an int (int64), in two C calls: ``np.full`` is written in
    Python, and a decode run builds four such arrays."""
    out = np.empty(k, np.int64)
    out.fill(value)
    return out


@dataclass(slots=True)
class StepShapes:
    """Many steps' shapes as parallel numpy arrays (same meanings as :class:`StepShape`).

    No speculative fields: speculative steps are priced one at a time (``step_time``).
    ``decode_rows`` >= 0 says every step is a pure decode of that many rows, nobody
    admitted (:meth:`decode_run`): a cost model may price the terms of D once."""

    num_prefill_tokens: np.ndarray
    prefill_attn_work: np.ndarray
    num_decode_seqs: np.ndarray
    decode_context_tokens: np.ndarray
    num_admitted: np.ndarray
    num_finished: np.ndarray
    decode_rows: int = -1  # -1: steps of any kind

    def __len__(self) -> int:
        return len(self.num_decode_seqs)

    def head(self, k: int) -> StepShapes:
        """The first ``k`` steps."""
        return StepShapes(
            num_prefill_tokens=self.num_prefill_tokens[:k],
            prefill_attn_work=self.prefill_attn_work[:k],
            num_decode_seqs=self.num_decode_seqs[:k],
            decode_context_tokens=self.decode_context_tokens[:k],
            num_admitted=self.num_admitted[:k],
            num_finished=self.num_finished[:k],
            decode_rows=self.decode_rows,
        )

    @classmethod
    def from_shapes(cls, shapes: list[StepShape]) -> StepShapes:
        """Stack single-step shapes into arrays."""

        def col(name: str, dtype: type) -> np.ndarray:
            return np.fromiter((getattr(s, name) for s in shapes), dtype=dtype, count=len(shapes))

        return cls(
            num_prefill_tokens=col("num_prefill_tokens", np.int64),
            prefill_attn_work=col("prefill_attn_work", np.float64),
            num_decode_seqs=col("num_decode_seqs", np.int64),
            decode_context_tokens=col("decode_context_tokens", np.int64),
            num_admitted=col("num_admitted", np.int64),
            num_finished=col("num_finished", np.int64),
        )

    @classmethod
    def from_table(cls, table: Any) -> StepShapes:
        """From a table with the step columns (a step log, a profile table, a DataFrame of
        profile rows); ``num_admitted`` / ``num_finished`` are 0 where it has none."""
        def col(name: str, dtype: type) -> np.ndarray:
            if name in table:
                return np.asarray(table[name], dtype=dtype)
            return np.zeros(len(table["num_decode_seqs"]), dtype=dtype)

        return cls(
            num_prefill_tokens=col("num_prefill_tokens", np.int64),
            prefill_attn_work=col("prefill_attn_work", np.float64),
            num_decode_seqs=col("num_decode_seqs", np.int64),
            decode_context_tokens=col("decode_context_tokens", np.int64),
            num_admitted=col("num_admitted", np.int64),
            num_finished=col("num_finished", np.int64),
        )

    @classmethod
    def decode_run(
        cls, num_seqs: int, context_tokens: np.ndarray, num_finished: np.ndarray | None = None
    ) -> StepShapes:
        """Shapes of consecutive pure-decode steps with ``num_seqs`` rows each.

        ``context_tokens[i]`` is C for step i. Used by the simulator's fast-forward.
        """
        k = len(context_tokens)
        zeros = np.zeros(k, dtype=np.int64)
        return cls(
            num_prefill_tokens=zeros,
            prefill_attn_work=np.zeros(k, dtype=np.float64),
            num_decode_seqs=filled(k, num_seqs),
            decode_context_tokens=np.asarray(context_tokens, dtype=np.int64),
            num_admitted=zeros,
            num_finished=zeros if num_finished is None else np.asarray(num_finished, np.int64),
            decode_rows=num_seqs,
        )
