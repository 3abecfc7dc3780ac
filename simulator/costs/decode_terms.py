"""A pure-decode step's price as a sum of terms, for the simulator's step-by-step loop.

A piecewise profile prices a pure-decode step of D rows, C context tokens and F requests
finishing as ``base(D) + context_s * C + admitted + finish_s * F`` (left to right; ``base``
is the partial sum of the terms of D alone: simulator/costs/piecewise.py). A decode run
keeps D and adds D to C each step, so :func:`simulator.fastforward.plan_short_run` reads
the terms once and sums each step's price inline, in the same order, instead of calling
a pricer per step (a generic call boxes three ints and a float: ~440 instructions, most
of a short run's per-step cost when compiled). Every float is the call's.

Compiled (simulator/accel.py), so ``plan_short_run`` reads the fields natively.
"""

from __future__ import annotations

from collections.abc import Callable


class DecodeTerms:
    """``price(d, c, f) = base(d) + context_s * c + admitted + finish_s * f``, callable as a
    :data:`~simulator.costs.base.DecodePricer`; ``base(d)`` is computed once per row count."""

    __slots__ = ("_base_of", "_bases", "context_s", "admitted", "finish_s")

    def __init__(self, base_of: Callable[[int], float], context_s: float, admitted: float,
                 finish_s: float) -> None:
        self._base_of = base_of  # the partial sum of the terms of D (left-associated)
        self._bases: dict[int, float] = {}
        self.context_s = context_s  # seconds per context token read
        self.admitted = admitted  # the admitted-requests term of a decode step (0 rows)
        self.finish_s = finish_s  # seconds per request finishing

    def base(self, d: int) -> float:
        """The terms of ``d`` decode rows, summed (kept per ``d``)."""
        base = self._bases.get(d)
        if base is None:
            base = self._bases[d] = self._base_of(d)
        return base

    def __call__(self, d: int, c: int, num_finished: int) -> float:
        return self.base(d) + self.context_s * float(c) + self.admitted \
            + self.finish_s * float(num_finished)
