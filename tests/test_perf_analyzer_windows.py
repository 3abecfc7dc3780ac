"""perf_analyzer's time windows (simulator/measured/perf_analyzer.py) on tiny timelines."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator.measured.perf_analyzer import LoadStopped, TimeWindows, scored_by_windows


def records(sends: list[float], ends: list[float]) -> pd.DataFrame:
    """Request records sent at ``sends`` and finished at ``ends`` (NaN: still running)."""
    ends_a = np.asarray(ends, dtype=float)
    return pd.DataFrame({"arrival_s": sends, "finish_s": ends_a,
                         "status": np.where(np.isfinite(ends_a), "finished", "in_flight")})


def test_three_windows_with_completions_stop_and_score_what_ended_in_them():
    # 12 s windows (10 s x 1.2): ends at 5 | 13, 14 | 25, 30 | 37 -> stop after the third
    req = records([0, 0, 1, 2, 14, 20, 40], [5, 13, 14, 25, 30, 37, np.nan])
    score = scored_by_windows(req, TimeWindows(interval_s=10.0))
    assert score.windows == 3 and score.stable
    assert score.end_s == pytest.approx(36.0)
    assert score.counts == (1, 2, 2)
    assert score.scored.tolist() == [True, True, True, True, True, False, False]


def test_an_empty_window_is_not_stable_so_the_windows_run_on():
    # ends at 5 | - | 30 | 40 | 50: window 2 scores nothing, so windows 3-5 are the three
    req = records([0, 1, 2, 3, 4, 70], [5, 30, 40, 50, 62, np.nan])
    score = scored_by_windows(req, TimeWindows(interval_s=10.0))
    assert score.counts == (1, 0, 1, 1, 1)
    assert score.windows == 5 and score.end_s == pytest.approx(60.0)
    assert score.scored.tolist() == [True, True, True, True, False, False]


def test_a_tight_stability_runs_to_max_trials():
    # 1, 2, 1, 2 ... completions a window: throughput varies 2x, more than 10% allows
    ends = [w * 12 + 1 + k for w in range(6) for k in range(1 + w % 2)]
    req = records([0] * len(ends) + [80], ends + [np.nan])
    score = scored_by_windows(req, TimeWindows(interval_s=10.0, stability_percentage=10,
                                               max_trials=5))
    assert not score.stable and score.windows == 5
    assert int(score.scored.sum()) == 1 + 2 + 1 + 2 + 1


def test_latency_varying_beyond_the_stability_is_not_stable():
    # one completion a window, latencies 1, 1, 5 s: max / min 5 > 1 + 100%
    req = records([4, 16, 23, 40, 53, 64, 90], [5, 17, 28, 41, 54, 65, np.nan])
    score = scored_by_windows(req, TimeWindows(interval_s=10.0, stability_percentage=100))
    assert score.counts[:3] == (1, 1, 1)
    # windows 1-3 (latencies 1, 1, 5) and 3-5 (5, 1, 1) fail; 4-6 (1, 1, 1) pass
    assert score.windows == 6 and score.end_s == pytest.approx(72.0)
    score2 = scored_by_windows(req, TimeWindows(interval_s=10.0, stability_percentage=400))
    assert score2.windows == 3  # 5 / 1 <= 1 + 400%


def test_records_whose_load_stopped_before_the_windows_could_stop_are_refused():
    req = records([0, 0, 1], [5, 13, 20])  # the last send at 1 s: window 1 ends at 12 s
    with pytest.raises(LoadStopped, match="simulate more requests"):
        scored_by_windows(req, TimeWindows(interval_s=10.0))


def test_settings_are_checked():
    with pytest.raises(ValueError, match="interval_s"):
        TimeWindows(interval_s=0)
    with pytest.raises(ValueError, match="max_trials"):
        TimeWindows(max_trials=2)
    assert TimeWindows(interval_s=60).window_s == pytest.approx(72.0)
    assert TimeWindows(interval_s=60).horizon_s == pytest.approx(720.0)


def test_windows_count_from_the_loads_start() -> None:
    # the first test's timeline, 100 s later: the same windows and requests
    sends, ends = [0, 0, 1, 2, 14, 20, 40], [5, 13, 14, 25, 30, 37, np.nan]
    later = records([s + 100 for s in sends], [e + 100 for e in ends])
    score = scored_by_windows(later, TimeWindows(interval_s=10.0))
    assert score.start_s == 100.0 and score.end_s == pytest.approx(36.0)
    assert score.counts == (1, 2, 2)
    assert scored_by_windows(later, TimeWindows(interval_s=10.0), start_s=90.0).counts[:2] == (
        0, 2)  # a load started at 90 s: ends at 105 s fall in window 2


def test_a_measured_window_count_scores_that_many_windows_even_past_a_stable_three():
    # the first timeline's ends (5 | 13, 14 | 25, 30 | 37) with more load: stable at three,
    # but a source that says its run scored five windows gets five (60 s: ends 37, 50, 55)
    req = records([0, 0, 1, 2, 14, 20, 25, 40, 70],
                  [5, 13, 14, 25, 30, 37, 50, 55, np.nan])
    score = scored_by_windows(req, TimeWindows(interval_s=10.0, measured_windows=5))
    assert score.windows == 5 and score.end_s == pytest.approx(60.0)
    assert score.counts == (1, 2, 2, 1, 2)
    assert int(score.scored.sum()) == 8
    assert TimeWindows(interval_s=10.0, measured_windows=5).horizon_s == pytest.approx(60.0)
    with pytest.raises(LoadStopped):  # the last send at 70 s: window 6 would end at 72 s
        scored_by_windows(req, TimeWindows(interval_s=10.0, measured_windows=6))


@pytest.mark.parametrize("windows", [0, 11, 2.5, True])
def test_a_measured_window_count_outside_one_to_max_trials_is_refused(windows: object):
    with pytest.raises(ValueError, match="measured_windows"):
        TimeWindows(measured_windows=windows)  # type: ignore[arg-type]
