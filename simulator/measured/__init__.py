"""Measured runs from any client, read by one loader (:func:`load_measured`).

``servesim validate --measured``, ``servesim calibrate --from-run`` and the dashboard's
Validation page read GuideLLM, AIPerf, vLLM bench and servesim's own results through this
package; each gives a :class:`MeasuredRun` (per-request send time, lengths, TTFT, E2E,
status, per-token gaps when the format has them, and the figures it cannot give).
"""

from simulator.measured.load import FORMATS, load_measured, load_measured_runs
from simulator.measured.run import MEASURED_COLUMNS, MeasuredRun

__all__ = ["FORMATS", "MEASURED_COLUMNS", "MeasuredRun", "load_measured", "load_measured_runs"]
