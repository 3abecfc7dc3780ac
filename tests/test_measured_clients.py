"""The one loader of measured runs on the real client files in ../shared/clients (GuideLLM
0.8.1 and AIPerf 0.13.0 against ``servesim serve``; skipped when absent). The expected
values were read by hand from the files (request order = send order)."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibrate.run_records import read_runs
from simulator.errors import ConfigError
from simulator.measured import load_measured

CLIENTS = Path(__file__).resolve().parents[2] / "shared" / "clients"
GUIDELLM, AIPERF = CLIENTS / "guidellm-benchmarks.json", CLIENTS / "aiperf-profile_export.jsonl"
pytestmark = pytest.mark.skipif(not GUIDELLM.is_file() or not AIPERF.is_file(),
                                reason="no ../shared/clients files")


def test_guidellm_requests_by_hand() -> None:
    run = load_measured(GUIDELLM)
    r = run.requests
    assert run.format == "guidellm" and len(r) == 30 and (r["status"] == "finished").all()
    assert (r["prompt_tokens"] == 64).all() and (r["output_tokens"] == 32).all()
    # successful[0]: start 1796129791.3134181 (the first), TTFT 279.594 ms, last token at
    # 1796129799.3475313; the next send: start 1796129791.8139925, TTFT 319.764 ms, last
    # token 1796129801.898561
    assert r.loc[0, ["arrival_s", "ttft_s", "e2e_s"]].tolist() == pytest.approx(
        [0.0, 0.27959442, 8.0341132], abs=1e-6)
    assert r.loc[1, ["arrival_s", "ttft_s", "e2e_s"]].tolist() == pytest.approx(
        [0.5005744, 0.31976366, 10.0845685], abs=1e-6)
    assert run.gaps_s is None and any(m.startswith("ITL distribution") for m in run.missing)


def test_guidellm_summary_marks_itl_missing() -> None:
    s = load_measured(GUIDELLM).summary()
    assert s["completed"] == 30
    assert s["mean_ttft_ms"] == pytest.approx(406.48176670)  # GuideLLM's own mean TTFT
    assert s["mean_itl_ms"] is None and s["p99_itl_ms"] is None  # missing, not a guess
    assert s["mean_queue_ms"] is None and s["utilisation"] is None
    assert s["mean_tpot_ms"] is not None


def test_aiperf_requests_by_hand() -> None:
    run = load_measured(AIPERF)
    r = run.requests
    assert run.format == "aiperf" and len(r) == 30 and (r["status"] == "finished").all()
    assert any("0 warm-up request(s) left out" in n for n in run.notes)  # all profiling
    assert (r["prompt_tokens"] == 64).all() and (r["output_tokens"] == 32).all()
    # line 1: start_ns ...853354439409, TTFT 158.711943 ms, request_latency 2823.667081 ms;
    # line 2: start_ns ...853549536211, TTFT 159.318689 ms, latency 2718.00996 ms
    assert r.loc[0, ["arrival_s", "ttft_s", "e2e_s"]].tolist() == pytest.approx(
        [0.0, 0.158711943, 2.823667081], abs=1e-9)
    assert r.loc[1, ["arrival_s", "ttft_s", "e2e_s"]].tolist() == pytest.approx(
        [0.195096802, 0.159318689, 2.71800996], abs=1e-9)
    assert len(run.gaps_s[1]) == 31  # one per chunk after the first
    assert run.gaps_s[1][:3].tolist() == pytest.approx([0.053122003, 0.052615522, 0.051761148])


def test_aiperf_summary_agrees_with_aiperfs_own() -> None:
    s = load_measured(AIPERF).summary()
    # profile_export_aiperf.json: TTFT avg 197.7555626, request_latency avg 2344.4952483,
    # inter_chunk_latency avg 69.2496673 (ms)
    assert s["mean_ttft_ms"] == pytest.approx(197.7555626)
    assert s["mean_e2el_ms"] == pytest.approx(2344.4952483)
    assert s["mean_itl_ms"] == pytest.approx(69.2496673)


def test_aiperf_summary_file_is_refused_with_a_pointer() -> None:
    with pytest.raises(ConfigError, match="profile_export.jsonl"):
        load_measured(CLIENTS / "aiperf-profile_export_aiperf.json")


def test_calibrate_from_run_reads_both_files() -> None:
    [g] = read_runs(GUIDELLM)
    [a] = read_runs(AIPERF)
    assert len(g.requests) == len(a.requests) == 30 and g.per_request and a.per_request
    assert g.ttft_s[1] == pytest.approx(0.31976366) and a.e2e_s[0] == pytest.approx(2.823667081)
    assert a.tpot_s[0] == pytest.approx((2.823667081 - 0.158711943) / 31)
