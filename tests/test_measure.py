"""``servesim measure`` against the real server over loopback (tiny model, CPU, no mocks).

The client's records must agree with the server's own: every request finished with its
exact output length, timestamps ordered, and per-request TTFT / E2E equal to the server's
plus the HTTP + SSE overhead, which is never negative and on average at most
``OVERHEAD_MS + OVERHEAD_FRACTION`` of the server's figure (a loaded 2-core machine,
client and server in one process, sharing the GIL with the engine thread).
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx2")

from clients.measure.client import Endpoint  # noqa: E402
from engine.server.app import create_app, start_in_thread  # noqa: E402
from engine.server.live import LiveEngine  # noqa: E402
from engine.server.model import load_served_model  # noqa: E402
from servesim.cli import main  # noqa: E402
from servesim.validate_command import read_results  # noqa: E402
from simulator.fingerprint import this_machine  # noqa: E402
from simulator.metrics import summarize  # noqa: E402
from simulator.policies import make_policy  # noqa: E402
from simulator.records import REQUEST_COLUMNS, STEP_COLUMNS, empty_table  # noqa: E402

OVERHEAD_MS = 30.0  # mean client-minus-server TTFT / E2E allowed, plus ...
OVERHEAD_FRACTION = 0.10  # ... this share of the server's mean
THROUGHPUT_TOLERANCE = 0.10  # output throughput, relative


@pytest.fixture(scope="module")
def server():
    torch.set_num_threads(1)
    em, served = load_served_model("tiny")
    app = create_app(LiveEngine(em, make_policy("continuous"), 512), served,
                     fingerprint=this_machine("cpu", 1))
    running = start_in_thread(app)
    yield running
    running.stop()


def server_records(url: str, after: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The server's request records and token times of requests with id >= ``after``."""
    with httpx.Client(base_url=url, timeout=60) as c:
        body = c.get("/servesim/records", params={"tokens": "1"}).json()
    req = pd.DataFrame(body["requests"], columns=list(REQUEST_COLUMNS))
    tok = pd.DataFrame(body["tokens"], columns=["request_id", "token_index", "time_s"])
    return (req[req.request_id >= after].reset_index(drop=True),
            tok[tok.request_id >= after].reset_index(drop=True))


def next_id(url: str) -> int:
    req, _ = server_records(url, 0)
    return int(req.request_id.max()) + 1 if len(req) else 0


def measure(url: str, workload, out, *extra: str) -> int:
    return main(["measure", "--endpoint", f"{url}/v1", "--workload", str(workload),
                 "--out", str(out), "--no-progress", *extra])


def read(out) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Requests, tokens and summary of a one-point results folder (``servesim run``'s layout)."""
    req, tok = pd.read_parquet(out / "requests.parquet"), pd.read_parquet(out / "tokens.parquet")
    (summary,) = json.loads((out / "summary.json").read_text())
    assert (req.point == 0).all() and (tok.point == 0).all()
    return (req.drop(columns="point"), tok.drop(columns="point"), summary)


def check_exact_and_ordered(req: pd.DataFrame, tok: pd.DataFrame) -> None:
    assert (req.status == "finished").all(), req[req.status != "finished"].reason.tolist()
    counts = tok.groupby("request_id").size()
    for r in req.itertuples():
        assert counts[r.request_id] == r.output_tokens, r.request_id
        times = tok[tok.request_id == r.request_id].sort_values("token_index").time_s.to_numpy()
        assert r.arrival_s < r.first_token_s <= r.finish_s
        assert np.all(np.diff(times) >= 0)
        assert times[0] == r.first_token_s and times[-1] == r.finish_s


def test_open_loop_agrees_with_the_servers_own_records(server, tmp_path):
    n = 12
    table = pd.DataFrame({  # unique prompt lengths pair client and server requests
        "request_id": range(n), "arrival_s": np.arange(n) * 0.04,
        "prompt_tokens": 6 + 5 * np.arange(n), "output_tokens": 4 + np.arange(n) % 7})
    table.to_parquet(tmp_path / "table.parquet")
    first = next_id(server.url)
    assert measure(server.url, tmp_path / "table.parquet", tmp_path / "out") == 0
    creq, ctok, csum = read(tmp_path / "out")
    assert list(creq.columns) == list(REQUEST_COLUMNS)
    check_exact_and_ordered(creq, ctok)
    ((summary, records),) = read_results(tmp_path / "out", 1)  # what validate --measured reads
    assert summary == csum and len(records) == n
    assert csum["completed"] == n and csum["num_rejected"] == 0 and csum["model"] == "tiny"
    assert csum["fingerprint"]["id"] == this_machine("cpu", 1)["id"]  # the server said
    sreq, stok = server_records(server.url, first)
    assert len(sreq) == n and (sreq.status == "finished").all()
    c = creq.set_index("prompt_tokens").sort_index()
    s = sreq.set_index("prompt_tokens").sort_index()
    assert (c.output_tokens.to_numpy() == s.output_tokens.to_numpy()).all()
    overhead = {}
    for metric, col in (("ttft", "first_token_s"), ("e2el", "finish_s")):
        client_ms = (c[col] - c.arrival_s).to_numpy() * 1000
        server_ms = (s[col] - s.arrival_s).to_numpy() * 1000
        extra = client_ms - server_ms
        assert extra.min() >= 0, f"{metric}: the client saw a token before the server made it"
        overhead[metric] = extra
        allowed = OVERHEAD_MS + OVERHEAD_FRACTION * server_ms.mean()
        assert extra.mean() <= allowed, (metric, extra.round(1).tolist())
    ssum = summarize(sreq, empty_table(STEP_COLUMNS))
    for key in ("mean_ttft_ms", "median_ttft_ms", "mean_e2el_ms", "median_e2el_ms"):
        assert 0 <= csum[key] - ssum[key] <= OVERHEAD_MS + OVERHEAD_FRACTION * ssum[key], key
    rel = abs(csum["output_throughput"] / ssum["output_throughput"] - 1)
    assert rel <= THROUGHPUT_TOLERANCE
    print(f"client - server: TTFT mean {overhead['ttft'].mean():.1f} ms (max "
          f"{overhead['ttft'].max():.1f}), E2E mean {overhead['e2el'].mean():.1f} ms (max "
          f"{overhead['e2el'].max():.1f}); output throughput {rel:.1%} apart")


def test_scenario_closed_loop_with_text_prompts(server, tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'name = "t"\nseed = 1\n[model]\nname = "tiny"\n[workload]\narrival = "closed"\n'
        'concurrency = 3\nnum_requests = 6\nprompt = { dist = "uniform", low = 3, high = 12 }\n'
        'output = { dist = "uniform", low = 2, high = 6 }\n')
    assert measure(server.url, scenario, tmp_path / "out", "--prompt-format", "text") == 0
    req, tok, summary = read(tmp_path / "out")
    check_exact_and_ordered(req, tok)
    assert summary["mode"] == "closed loop, 3 clients" and summary["completed"] == 6
    # Text prompts: the byte-level server counts ~5 bytes per word; recorded as it counted.
    assert (req.prompt_tokens > 6).all()


def test_failures_are_recorded_with_their_reason(server, tmp_path):
    table = pd.DataFrame({"request_id": [0, 1, 2], "arrival_s": [0.0, 0.01, 0.02],
                          "prompt_tokens": [8, 3000, 9], "output_tokens": [3, 5, 4]})
    table.to_csv(tmp_path / "t.csv", index=False)
    # --max-context stops the client from fitting the long prompt to the server's context.
    assert measure(server.url, tmp_path / "t.csv", tmp_path / "a", "--max-context", "9999") == 0
    req, _, summary = read(tmp_path / "a")
    assert req.status.tolist() == ["finished", "rejected", "finished"]
    assert req.reason[1].startswith("HTTP 400: This model's maximum context length is 2048")
    assert summary["num_rejected"] == 1 and summary["completed"] == 2
    assert list(summary["rejection_reasons"].values()) == [1]

    slow = table.iloc[[0]].assign(output_tokens=60)
    slow.to_csv(tmp_path / "slow.csv", index=False)
    # Every request failed: the results are written, the exit status says so (issue 11).
    assert measure(server.url, tmp_path / "slow.csv", tmp_path / "b", "--timeout", "0.05") == 1
    req, _, summary = read(tmp_path / "b")
    assert req.status.tolist() == ["rejected"]
    assert req.reason[0].startswith("timeout after 0.05 s")
    assert summary["completed"] == 0 and summary["num_rejected"] == 1


def test_a_model_the_endpoint_does_not_serve_is_an_error(server, tmp_path, capsys):
    pd.DataFrame({"request_id": [0], "arrival_s": [0.0], "prompt_tokens": [4],
                  "output_tokens": [2]}).to_csv(tmp_path / "t.csv", index=False)
    assert measure(server.url, tmp_path / "t.csv", tmp_path / "o", "--model", "llama") == 2
    assert f"--model 'llama': {server.url}/v1 serves tiny" in capsys.readouterr().err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_closed_port_gives_a_clear_error(tmp_path, capsys):
    port = free_port()
    table = pd.DataFrame({"request_id": [0], "arrival_s": [0.0], "prompt_tokens": [4],
                          "output_tokens": [2]})
    table.to_csv(tmp_path / "t.csv", index=False)
    assert measure(f"http://127.0.0.1:{port}", tmp_path / "t.csv", tmp_path / "o") == 2
    err = capsys.readouterr().err
    assert f"cannot connect to http://127.0.0.1:{port}/v1: connection refused" in err
    assert not (tmp_path / "o").exists()

    async def one() -> str:
        async with httpx.AsyncClient() as client:
            ep = Endpoint(client, f"http://127.0.0.1:{port}/v1", "m", 5.0, time.perf_counter())
            return (await ep.complete(0, [1, 2], 2, 3)).reason

    assert asyncio.run(one()) == "connection refused"  # a request that fails mid-run


def test_measure_imports_no_torch():
    code = ("import sys, clients.measure, servesim.measure_command; "
            "sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def one_request_csv(tmp_path):
    pd.DataFrame({"request_id": [0], "arrival_s": [0.0], "prompt_tokens": [4],
                  "output_tokens": [2]}).to_csv(tmp_path / "t.csv", index=False)
    return tmp_path / "t.csv"


def test_every_request_failing_exits_1_and_says_why(server, tmp_path, capsys):
    """Issue 11: `measure` exited 0 when every request failed."""
    table = pd.DataFrame({"request_id": [0, 1], "arrival_s": [0.0, 0.0],
                          "prompt_tokens": [3000, 3001], "output_tokens": [2, 2]})
    table.to_csv(tmp_path / "long.csv", index=False)
    assert measure(server.url, tmp_path / "long.csv", tmp_path / "o", "--max-context",
                   "9999") == 1
    err = capsys.readouterr().err
    assert err.startswith("servesim: error: every request failed (2 of 2); the most common "
                          "reason: HTTP 400: This model's maximum context length is 2048")
    assert read(tmp_path / "o")[2]["num_rejected"] == 2  # written all the same


def test_a_wrong_endpoint_path_names_the_url_and_its_404(server, tmp_path, capsys):
    """Issue 11: a base URL without /v1 read "lists no model"."""
    first = next_id(server.url)
    wrong = f"{server.url}/api"
    assert main(["measure", "--endpoint", wrong, "--workload", str(one_request_csv(tmp_path)),
                 "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"servesim: error: GET {wrong}/models answered HTTP 404 (not found): {wrong} is not "
        "an OpenAI-compatible API base. Give the URL its /v1/models and /v1/completions "
        "hang from, e.g. http://HOST:PORT/v1\n")
    assert next_id(server.url) == first and not (tmp_path / "o").exists()


def test_an_unwritable_out_fails_before_sending_anything(server, tmp_path, capsys):
    """Issue 11 item 8: `measure --out <read-only>` sent every request, then failed. (Tests
    run as root here, so "unwritable" is a folder under a regular file.)"""
    (tmp_path / "file").write_text("not a folder")
    first = next_id(server.url)
    assert measure(server.url, one_request_csv(tmp_path), tmp_path / "file" / "out") == 2
    err = capsys.readouterr().err
    assert f"--out '{tmp_path / 'file' / 'out'}': cannot write there (Not a directory)" in err
    assert next_id(server.url) == first  # the server saw no request


def test_a_measurement_writes_its_manifest_and_keeps_off_other_results(server, tmp_path,
                                                                         capsys):
    out = tmp_path / "o"
    assert measure(server.url, one_request_csv(tmp_path), out) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["kind"], manifest["backend"], manifest["endpoint"]) == (
        "endpoint-measured", "endpoint", f"{server.url}/v1")
    assert manifest["machine"]["id"] == this_machine("cpu", 1)["id"]  # the server's
    assert sorted(manifest["files"]) == ["requests.parquet", "summary.json", "tokens.parquet"]
    sim = tmp_path / "sim"
    sim.mkdir()
    (sim / "manifest.json").write_text(json.dumps({"kind": "simulated"}))
    first = next_id(server.url)
    assert measure(server.url, one_request_csv(tmp_path), sim) == 2
    assert "holds simulated results" in capsys.readouterr().err
    assert next_id(server.url) == first
