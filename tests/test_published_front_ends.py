"""benchmarks/published_front_ends.py: the servers in front of NIM's engines.

NIM 1.8.0's server takes each request in before its engine sees it (``request_s``) and
streams the tokens one at a time (``stream_s``); NIM 1.0's course gets the stream only. By
hand: one client's requests find the engine idle and nothing else in the stream, so the
request time adds to every first token exactly.
"""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import pytest

from simulator.runner import run_point

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
fe = importlib.import_module("benchmarks.published_front_ends")
pc = importlib.import_module("benchmarks.published_cases")

ONE_CLIENT = "nim1.8.0-h100-sxm-llama-3.1-8b-fp8-tp1-200-200-c1"


def test_each_nim_release_gets_its_servers_terms() -> None:
    assert fe.front_end_host("nim-1.8") == {"stream_s": 1 / 13348, "request_s": 2.837e-3}
    assert fe.front_end_host("nim-1.0") == {"stream_s": 1 / 13348}
    assert fe.front_end_host("0.10") == {}
    assert "2.837 ms a request" in fe.front_end_note("nim-1.8")
    assert "a request" not in fe.front_end_note("nim-1.0")


def one_client_mean_ttft_ms(request_s: float) -> float:
    """NIM 1.8.0's one-client 200/200 row replayed with the server's ``request_s``."""
    case = next(c for c in pc.load_cases() if c.id == ONE_CLIENT)
    point, _ = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                 burst_rate=math.inf)
    point, _ = pc.stack_accepted(point, case)
    assert point["cost"]["overhead"]["request_s"] == fe.NIM_18_REQUEST_S  # the case's own
    point["cost"]["overhead"]["request_s"] = request_s
    return float(run_point({}, point).summary["mean_ttft_ms"])


def test_one_clients_first_tokens_wait_the_request_time_exactly() -> None:
    with_it, without = one_client_mean_ttft_ms(fe.NIM_18_REQUEST_S), one_client_mean_ttft_ms(0.0)
    assert with_it - without == pytest.approx(fe.NIM_18_REQUEST_S * 1e3, abs=1e-6)
