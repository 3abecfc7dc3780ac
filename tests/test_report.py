"""The terminal summary table: labels first, grouped percentiles, compact numbers."""

from __future__ import annotations

import pandas as pd

from simulator.metrics import summarize
from simulator.records import REQUEST_COLUMNS, STEP_COLUMNS, conform, empty_table
from simulator.report import format_ms, format_summary_table, label_keys
from simulator.slo import SLO


def summary(ttft_s: float) -> dict:
    """Two finished requests: TTFT ttft_s, 10 outputs, E2E ttft_s + 0.9 s."""
    rows = [
        dict(request_id=i, arrival_s=float(i), scheduled_s=float(i), first_token_s=i + ttft_s,
             finish_s=i + ttft_s + 0.9, prompt_tokens=100, output_tokens=10, preemptions=0,
             replica=0, status="finished", reason="")
        for i in range(2)
    ]  # fmt: skip
    requests = conform(pd.DataFrame(rows), REQUEST_COLUMNS, "requests")
    return summarize(requests, empty_table(STEP_COLUMNS), SLO(ttft_ms=200))


def test_format_ms() -> None:
    assert [format_ms(x) for x in (0, 1.234, 12.34, 123.4, 1234.5, 12345, 123456)] == [
        "0", "1.23", "12.3", "123", "1234", "12.3k", "123k",
    ]  # fmt: skip
    assert format_ms(None) == "-" and format_ms(float("nan")) == "-"


def test_label_keys_are_the_non_summary_keys() -> None:
    rows = [{"policy": "static", "rate": 2.0, **summary(0.1)}, {"gpu": "H100", **summary(0.1)}]
    assert label_keys(rows) == ["policy", "rate", "gpu"]


def test_table_has_labels_numbers_and_verdicts() -> None:
    rows = [
        {"policy": "continuous", "rate": 4.0, **summary(0.1)},
        {"policy": "static", "rate": 16.0, **summary(0.5)},
    ]
    text = format_summary_table(rows, "chat on H100")
    lines = text.splitlines()
    assert lines[0] == "chat on H100"
    assert all(len(line) <= 120 for line in lines)
    header = lines[2]
    assert header.split()[:3] == ["policy", "rate", "queue"]
    for name in ("TTFT ms", "TPOT ms", "ITL ms", "E2E ms", "req/s", "out tok/s", "goodput"):
        assert name in header
    assert "p50/p90/p99" in lines[3] and lines[3].split()[-2:] == ["req/s", "met"]
    fast, slow = lines[5], lines[6]
    # fast: queue 0, TTFT 100 ms, TPOT 900 / 9 = 100 ms, ITL none (no step log),
    # E2E 1000 ms; 2 requests and 20 tokens over 0 -> 2.0 s; both within TTFT 200 ms
    assert fast.split() == [
        "continuous", "4", "0/0/0", "100/100/100", "100/100/100", "-/-/-", "1000/1000/1000",
        "1.00", "10", "1.00", "yes",
    ]  # fmt: skip
    # slow: TTFT 500 ms, E2E 1400 ms, 2 requests over 2.4 s, none within 200 ms TTFT
    assert slow.split() == [
        "static", "16", "0/0/0", "500/500/500", "100/100/100", "-/-/-", "1400/1400/1400",
        "0.83", "8", "0.00", "NO",
    ]  # fmt: skip


def test_explicit_labels_and_missing_figures() -> None:
    text = format_summary_table([{"name": "a", "rate": 1}], "t", labels=["rate"])
    body = text.splitlines()[5]
    assert body.split()[0] == "1" and "a" not in body.split()
    assert body.split()[-1] == "-"


def test_empty_table() -> None:
    assert "(no runs)" in format_summary_table([], "nothing")
