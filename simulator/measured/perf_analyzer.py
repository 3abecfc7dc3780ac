"""Which requests perf_analyzer's time windows score (GenAI-Perf's concurrency runs).

GenAI-Perf (2024) drives the load with perf_analyzer and computes its figures from
perf_analyzer's profile export. How that export is filled (perf_analyzer
``src/inference_profiler.cc``, July 2024, github:triton-inference-server/perf_analyzer
@ b15f4384; unchanged in 2025):

- The load starts, then measurement windows follow one another from the start: each
  sleeps ``--measurement-interval`` x 1.2 (``Measure``: ``sleep_for(measurement_window *
  1.2)``; the next window starts where the last ended, ``previous_window_end_ns_``).
- A window scores the requests whose last response falls inside it
  (``ValidLatencyMeasurement``: "Only counting requests that end within the time
  interval"); a request still running waits for the window it ends in.
- After each window perf_analyzer asks whether the last three (``stability_window``) are
  stable: each scored at least one request, and the largest over the smallest of their
  throughputs, and of their mean latencies, is at most 1 + ``--stability-percentage`` /
  100 (``DetermineStability``, ``IsInferWindowStable``, ``IsLatencyWindowStable``). It
  stops there, or after ``--max-trials`` windows (default 10).
- Every window's scored requests go to the export (``CollectData`` in each window's
  ``Summarize``; ``ProfileDataCollector::AddData`` appends), and GenAI-Perf's figures are
  over all of them, its duration from the first of their sends to the last of their
  responses (genai_perf ``profile_data_parser.py``).

So a run's figures include the first round, which every client sends at once, and then
whatever ended before the windows stopped; requests sent in the last windows and not
ended are not scored. :func:`scored_by_windows` applies that rule to simulated records.
Where a source's own request counts say how many windows a run measured (a table's mean
input length fixes the count: benchmarks/nim_dli_windows.py), ``measured_windows`` scores
exactly that many instead of deciding the stop: some published runs went on past three
windows for reasons the replay does not reproduce.
GenAI-Perf's defaults: ``--measurement-interval`` 10,000 ms, ``--stability-percentage``
999 (so, in practice, three windows each with a completion).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


class LoadStopped(ValueError):
    """The records end before perf_analyzer's windows could stop: simulate more requests."""


SLEEP_FACTOR = 1.2  # Measure sleeps measurement_window x 1.2
STABILITY_WINDOW = 3  # load_parameters_.stability_window


@dataclass(frozen=True, slots=True)
class TimeWindows:
    """perf_analyzer's time-window measurement settings (its command-line flags)."""

    interval_s: float = 10.0  # --measurement-interval, in s (GenAI-Perf's default 10,000 ms)
    stability_percentage: float = 999.0  # --stability-percentage (GenAI-Perf's default)
    max_trials: int = 10  # --max-trials (perf_analyzer's default)
    # the windows the measured run scored, where its source says (None: the stop rule's)
    measured_windows: int | None = None

    def __post_init__(self) -> None:
        if not self.interval_s > 0:
            raise ValueError(f"interval_s = {self.interval_s}: must be > 0")
        if not self.stability_percentage >= 0:
            raise ValueError(f"stability_percentage = {self.stability_percentage}: must be >= 0")
        if self.max_trials < STABILITY_WINDOW:
            raise ValueError(f"max_trials = {self.max_trials}: must be >= {STABILITY_WINDOW}")
        mw = self.measured_windows
        if mw is not None and (isinstance(mw, bool) or not isinstance(mw, int)
                               or not 1 <= mw <= self.max_trials):
            raise ValueError(f"measured_windows = {self.measured_windows}: must be 1 to "
                             f"max_trials ({self.max_trials})")

    @property
    def window_s(self) -> float:
        """One window's length: the interval x 1.2."""
        return self.interval_s * SLEEP_FACTOR

    @property
    def horizon_s(self) -> float:
        """The end of the last window perf_analyzer may measure (``max_trials`` windows,
        or the measured run's own)."""
        return (self.measured_windows or self.max_trials) * self.window_s


@dataclass(frozen=True, slots=True)
class WindowScore:
    """The windows perf_analyzer measured over a run, and which requests they scored."""

    scored: np.ndarray  # bool per request row: ended inside a measured window
    windows: int  # windows measured
    stable: bool  # stopped on stability (False: ran out of max_trials)
    start_s: float  # the load's start, s (the first window's)
    end_s: float  # end of the last measured window, s from the load's start
    counts: tuple[int, ...]  # requests scored per window


def scored_by_windows(requests: pd.DataFrame, windows: TimeWindows,
                      start_s: float | None = None) -> WindowScore:
    """Which of ``requests`` (servesim's request records: ``arrival_s``, ``finish_s``,
    ``status``) perf_analyzer's ``windows`` score, the load starting at ``start_s``
    (default: the first arrival). A request scores when it finished inside a measured
    window; the windows stop at the first three in a row that are stable, or at
    ``max_trials`` (at ``measured_windows``, when given, whatever their stability).
    Raises when the records end before that stop could be decided: a window can be
    judged only while the load still runs, so the last send must come after it
    (:class:`LoadStopped`: simulate more requests)."""
    arrivals = requests["arrival_s"].to_numpy(dtype=float)
    finishes = requests["finish_s"].to_numpy(dtype=float)
    done = (requests["status"].to_numpy() == "finished") & np.isfinite(finishes)
    t0 = float(np.nanmin(arrivals)) if start_s is None else float(start_s)
    width = windows.window_s
    index = np.full(len(finishes), -1, dtype=np.int64)
    index[done] = np.floor((finishes[done] - t0) / width).astype(np.int64)
    latency = finishes - arrivals
    last_send = float(np.nanmax(arrivals)) if np.isfinite(arrivals).any() else t0
    ips: list[float] = []
    lat: list[float] = []
    counts: list[int] = []
    limit = 1.0 + windows.stability_percentage / 100.0
    fixed = windows.measured_windows
    for w in range(fixed or windows.max_trials):
        if t0 + (w + 1) * width > last_send:
            raise LoadStopped(
                f"the last request was sent at {last_send - t0:.1f} s, before window "
                f"{w + 1} ({w * width:.0f}-{(w + 1) * width:.0f} s) ended: the load had "
                "stopped; simulate more requests")
        in_window = index == w
        n = int(in_window.sum())
        counts.append(n)
        ips.append(n / width)
        lat.append(float(latency[in_window].mean()) if n else float("inf"))
        stable = len(ips) >= STABILITY_WINDOW and _stable(ips[-STABILITY_WINDOW:],
                                                          lat[-STABILITY_WINDOW:], limit)
        if stable and fixed is None:
            return _score(index, w + 1, True, t0, width, counts)
    if fixed is not None:  # the measured run's windows; stable: whether its last three were
        return _score(index, fixed, stable, t0, width, counts)
    return _score(index, windows.max_trials, False, t0, width, counts)


def _stable(ips: list[float], lat: list[float], limit: float) -> bool:
    """perf_analyzer's test of the last windows: each scored a request, and throughput
    and mean latency each vary by at most ``limit`` (max / min)."""
    if min(ips) <= 0:
        return False
    return max(ips) / min(ips) <= limit and max(lat) / min(lat) <= limit


def _score(index: np.ndarray, windows: int, stable: bool, start_s: float, width: float,
           counts: list[int]) -> WindowScore:
    """The :class:`WindowScore` of ``windows`` measured windows from ``start_s``."""
    return WindowScore(scored=(index >= 0) & (index < windows), windows=windows,
                       stable=stable, start_s=start_s, end_s=windows * width,
                       counts=tuple(counts[:windows]))
