"""Progress of long commands goes to stderr as plain lines when stderr is not a terminal."""

from __future__ import annotations

import io

from servesim.progress import plan_progress, request_progress


def test_request_progress_prints_each_tenth_of_a_long_run() -> None:
    out = io.StringIO()
    with request_progress(out) as tell:
        for done in range(0, 200_001, 200):
            tell(done, 200_000)
    lines = out.getvalue().splitlines()
    assert lines == [f"simulating: {k * 20_000:,}/200,000 requests done" for k in range(1, 11)]


def test_a_short_run_prints_nothing() -> None:
    out = io.StringIO()
    with request_progress(out) as tell:
        for done in range(1, 5001):
            tell(done, 5000)
    assert out.getvalue() == ""


def test_plan_progress_prints_when_a_candidate_is_settled() -> None:
    out = io.StringIO()
    with plan_progress(out) as tell:
        for points, done in [(1, 0), (2, 0), (3, 1), (4, 1), (5, 2)]:
            tell(points, done, 2)
    assert out.getvalue().splitlines() == [
        "plan: 0/2 candidates done, 1 points simulated",
        "plan: 1/2 candidates done, 3 points simulated",
        "plan: 2/2 candidates done, 5 points simulated",
    ]
