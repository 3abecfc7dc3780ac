"""A cost model that replays measured step durations, in order, and checks the shapes.

Fed an engine run's step log, the simulator then prices step ``i`` with the engine's
measured duration of step ``i``. If the simulator schedules a step the engine did not
(a different shape at the same position), :class:`ReplayMismatch` says where: this is how
the tests prove the engine and the simulator share one scheduling core.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.shapes import StepShape, StepShapes

SHAPE_FIELDS = ("num_prefill_tokens", "prefill_attn_work", "num_decode_seqs",
                "decode_context_tokens")


class ReplayMismatch(AssertionError):
    """The simulator asked for a step the recorded run did not take."""


class ReplayCost:
    """Step ``i`` costs the recorded ``end_s - start_s`` of step ``i`` (see module docstring)."""

    def __init__(self, steps: pd.DataFrame) -> None:
        self.durations = (steps["end_s"] - steps["start_s"]).to_numpy(np.float64)
        self.shapes = steps[list(SHAPE_FIELDS)].to_numpy(np.float64)
        self.next = 0  # index of the next step to price

    def _take(self, got: np.ndarray) -> np.ndarray:
        k = len(got)
        i = self.next
        if i + k > len(self.durations):
            raise ReplayMismatch(f"step {i + k - 1}: the recorded run has only "
                                 f"{len(self.durations)} steps")
        want = self.shapes[i:i + k]
        bad = np.flatnonzero(~np.isclose(got, want, rtol=1e-12, atol=1e-9).all(axis=1))
        if len(bad):
            j = int(bad[0])
            raise ReplayMismatch(
                f"step {i + j}: simulated shape {dict(zip(SHAPE_FIELDS, got[j], strict=True))}"
                f" != recorded {dict(zip(SHAPE_FIELDS, want[j], strict=True))}")
        self.next += k
        return self.durations[i:i + k]

    def step_time(self, shape: StepShape) -> float:
        row = np.array([[getattr(shape, f) for f in SHAPE_FIELDS]], dtype=np.float64)
        return float(self._take(row)[0])

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        rows = np.column_stack([getattr(shapes, f) for f in SHAPE_FIELDS]).astype(np.float64)
        return self._take(rows).copy()
