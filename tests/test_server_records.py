"""Issue 11 item 6, the records: `servesim serve` kept every request record, step-log row
and token time for its whole life. Now at most --keep-records requests' records stay in
memory; older ones go to --records-out as they leave (merged at shutdown), or are dropped
and counted.

The tiny random-weight model on CPU: 12 requests one after another, each with a 4-token
prompt and max_tokens 3, so each runs 3 steps (a prefill that emits the first token, then
2 decode steps) and has 3 token times: 36 steps and 36 token times in all.
"""

from __future__ import annotations

import json
import threading

import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx2")

from engine.server.app import create_app, start_in_thread  # noqa: E402
from engine.server.live import LiveEngine  # noqa: E402
from engine.server.records import records_json  # noqa: E402
from servesim.cli import main  # noqa: E402
from servesim.validate_folders import check_measured, read_results  # noqa: E402
from simulator.policies import make_policy  # noqa: E402


class Sink:
    """Sets ``done`` when its one request ends."""

    def __init__(self) -> None:
        self.done_event = threading.Event()

    def token(self, seq, token_id, time_s):
        pass

    def done(self, seq):
        self.done_event.set()

    aborted = done

    def fail(self, message):
        self.done_event.set()


def serve_one_by_one(engine: LiveEngine, n: int) -> None:
    for i in range(n):
        sink = Sink()
        engine.submit([3 + i, 4, 5, 6], 3, sink)
        assert sink.done_event.wait(30)


def test_keep_records_5_keeps_the_newest_5_and_counts_7_dropped(tiny):
    em, _ = tiny
    engine = LiveEngine(em, make_policy("continuous"), 64, keep_records=5)
    engine.start()
    try:
        serve_one_by_one(engine, 12)
        snap = engine.snapshot()
    finally:
        engine.stop()
    assert snap.requests["request_id"].tolist() == [7, 8, 9, 10, 11]
    assert (snap.requests["status"] == "finished").all()
    assert snap.records_dropped == 7 and snap.records_spilled == 0
    assert sorted(engine.core.token_times) == [7, 8, 9, 10, 11]  # token times left too
    assert len(snap.tokens) == 5 * 3
    # step rows that ended before request 7 arrived left: those of requests 7..11 stay
    first_kept = snap.requests["arrival_s"].min()
    assert len(snap.steps) == 5 * 3
    assert (snap.steps["end_s"] > first_kept).all()
    body = records_json(snap)
    assert body["summary"]["records_kept"] == 5
    assert body["summary"]["records_dropped"] == 7
    assert body["summary"]["completed"] == 5
    assert "7 dropped" in body["note"]


def test_a_records_folder_gets_every_request_and_validate_reads_it(tiny, tmp_path):
    em, served = tiny
    engine = LiveEngine(em, make_policy("continuous"), 64, keep_records=5, spill_to=tmp_path)
    server = start_in_thread(create_app(engine, served, records_out=tmp_path))
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for i in range(12):
            r = http.post("/v1/completions", json={"prompt": [3 + i, 4, 5, 6], "max_tokens": 3})
            assert r.status_code == 200
        live = http.get("/servesim/records").json()
        metrics = http.get("/metrics").text
    server.stop()
    assert [r["request_id"] for r in live["requests"]] == [7, 8, 9, 10, 11]
    assert live["summary"]["records_spilled"] == 7 and live["summary"]["records_dropped"] == 0
    assert "7 written to --records-out" in live["note"]
    # Prometheus counts every request, kept or not
    assert 'vllm:request_success_total{finished_reason="length",model_name="tiny"} 12.0' \
        in metrics

    requests = pd.read_parquet(tmp_path / "requests.parquet")
    assert requests["request_id"].tolist() == list(range(12))
    assert (requests["status"] == "finished").all() and (requests["point"] == 0).all()
    tokens = pd.read_parquet(tmp_path / "tokens.parquet")
    assert tokens.groupby("request_id").size().to_dict() == {i: 3 for i in range(12)}
    steps = pd.read_parquet(tmp_path / "steps.parquet")
    assert len(steps) == 12 * 3 and steps["start_s"].is_monotonic_increasing
    assert not (tmp_path / "records-parts").exists()  # merged, then removed
    (summary,) = json.loads((tmp_path / "summary.json").read_text())
    assert summary["completed"] == 12 and summary["total_output_tokens"] == 36
    assert summary["records_spilled"] == 7 and summary["records_kept"] == 5

    check_measured(tmp_path)  # validate --measured takes it
    ((read_summary, read_requests),) = read_results(tmp_path, 1)
    assert len(read_requests) == 12 and read_summary["completed"] == 12
    # the folder says what produced it, and that clients (not a scenario) sent its requests
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert (manifest["kind"], manifest["requests_from"]) == ("engine", "clients")
    assert sorted(manifest["files"]) == ["requests.parquet", "steps.parquet", "summary.json",
                                         "tokens.parquet"]


def test_keep_records_must_be_at_least_1(capsys):
    assert main(["serve", "--keep-records", "0", "--port", "0"]) == 2
    assert "--keep-records=0 must be >= 1" in capsys.readouterr().err


def test_serve_refuses_parts_left_by_a_server_that_did_not_shut_down(tmp_path, capsys):
    parts = tmp_path / "records-parts"
    parts.mkdir()
    pd.DataFrame({"request_id": [0]}).to_parquet(parts / "requests-000001.parquet")
    assert main(["serve", "--records-out", str(tmp_path), "--port", "0"]) == 2
    assert "did not shut down cleanly" in capsys.readouterr().err


def test_keep_records_help_states_the_bound(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "default 100,000" in out
