"""The memory guard follows ``[run] step_log``: only "full" keeps a step log that grows
with the requests, so "summary" and "none" are estimated at the bytes a request costs
without one (simulator/memory_guard.py: 1,536 bytes a request with the full step log,
768 without, 128 more for the request table, 264 a step row)."""

from __future__ import annotations

import pytest

from simulator import memory_guard
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.memory_guard import check_fits, estimate_bytes, step_row_budget
from simulator.runner import preflight, run_point

GIB = 2**30


def test_the_constants_the_figures_below_use() -> None:
    assert (memory_guard.BYTES_PER_REQUEST, memory_guard.BYTES_PER_REQUEST_NO_STEP_LOG,
            memory_guard.TABLE_BYTES_PER_REQUEST, memory_guard.BYTES_PER_STEP_ROW,
            memory_guard.ROWS_PER_REQUEST) == (1536, 768, 128, 264, 4)
    # 1000 requests: 1000 x (1536 + 128) with the step log, 1000 x (768 + 128) without
    assert estimate_bytes(1000) == estimate_bytes(1000, step_log="full") == 1_664_000
    assert estimate_bytes(1000, step_log="summary") == 896_000
    assert estimate_bytes(1000, step_log="none") == 896_000
    # 10 of them before the horizon: 1000 x 128 of table + 10 x 768
    assert estimate_bytes(1000, 10, step_log="summary") == 135_680


def test_a_million_requests_in_one_gib_fit_without_the_full_step_log() -> None:
    # summary/none: 10^6 x 896 = 896,000,000 bytes <= 1 GiB = 1,073,741,824: fits (refused
    # before, at 2,176 bytes a request whatever the mode); full: 10^6 x 1664 = 1.55 GiB
    check_fits(10**6, available=GIB, step_log="summary")
    check_fits(10**6, available=GIB, step_log="none")
    with pytest.raises(ConfigError) as e:
        check_fits(10**6, available=GIB, step_log="full")
    text = str(e.value)
    assert "1.5 GiB (1,664 bytes per request, step log included)" in text
    assert f"at most about {GIB // 1664:,}" in text and "run.step_log = 'summary'" in text
    # summary, 1.2 x 10^6 requests: 1.0752e9 bytes > 1 GiB: refused, with its own figures
    with pytest.raises(ConfigError, match=r"896 bytes per request, step_log = 'summary'.*"
                       f"at most about {GIB // 896:,}"):
        check_fits(1_200_000, available=GIB, step_log="summary")


def test_preflight_passes_the_points_step_log() -> None:
    def point(mode: str) -> dict[str, object]:
        return {"workload": {"rate": 10.0, "num_requests": 10**6}, "run": {"step_log": mode}}

    preflight(resolve(point("summary")), available=GIB)
    with pytest.raises(ConfigError, match="simulating 1,000,000 of them"):
        preflight(resolve(point("full")), available=GIB)


def test_the_step_row_budget_follows_the_mode() -> None:
    # full: the 4 rows each of 1000 requests hold, plus the rest of 1 GiB at 264 bytes;
    # summary: 2 x 8192 rows per replica held to be folded, plus the rest at 264 bytes
    assert step_row_budget(1000, available=GIB) == 4000 + (GIB - 1_664_000) // 264
    assert step_row_budget(1000, available=GIB, step_log="summary", replicas=2) == (
        2 * 16_384 + (GIB - 896_000) // 264)


def _small(mode: str) -> dict[str, object]:
    # 2000 requests of 8 + 2 tokens at 10 req/s on a 10 ms step
    return {"name": "guard", "seed": 0, "policy": {"name": "continuous"},
            "workload": {"arrival": "poisson", "rate": 10.0, "num_requests": 2000,
                         "prompt": {"dist": "fixed", "tokens": 8},
                         "output": {"dist": "fixed", "tokens": 2}},
            "cost": {"form": "linear", "step_s": 0.01}, "run": {"step_log": mode}}


def test_a_run_refused_before_in_summary_mode_now_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2.5 MB available: full needs 2000 x 1664 = 3,328,000 bytes (refused); summary needs
    # 2000 x 896 = 1,792,000 (and needed 2000 x 2176 = 4,352,000 before: refused)
    monkeypatch.setattr("simulator.runner.available_bytes", lambda: 2_500_000)
    with pytest.raises(ConfigError, match="simulating 2,000 of them needs about 3.2 MiB"):
        run_point({}, _small("full"))
    result = run_point({}, _small("summary"))
    assert (result.result.requests["status"] == "finished").sum() == 2000
    assert result.summary["step_log"] == "summary"
