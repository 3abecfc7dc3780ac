"""``servesim measure``'s client against a real HTTP server that answers badly: each
malformed stream fails its own request with a reason, and never the measurement (a
misbehaving server raised AttributeError or ValueError out of ``Endpoint.complete``)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

httpx = pytest.importorskip("httpx2")

from clients.measure.client import Endpoint  # noqa: E402

CHOICE = {"choices": [{"index": 0, "text": "a"}]}
# the prompt names the answer: the SSE lines the server streams back
STREAMS: dict[str, list[str]] = {
    "good": [json.dumps(CHOICE)] * 3 + [json.dumps({"choices": [], "usage": {
        "prompt_tokens": 4, "completion_tokens": 3}}), "[DONE]"],
    "usage-list": [json.dumps(CHOICE)] * 3 + [json.dumps({"choices": [], "usage": [3]}),
                                              "[DONE]"],
    "usage-text": [json.dumps(CHOICE)] * 3 + [json.dumps({"choices": [], "usage": {
        "completion_tokens": "three"}}), "[DONE]"],
    "usage-null": [json.dumps(CHOICE)] * 3 + [json.dumps({"choices": [], "usage": {
        "completion_tokens": None}}), "[DONE]"],
    "prompt-text": [json.dumps(CHOICE)] * 3 + [json.dumps({"choices": [], "usage": {
        "prompt_tokens": -4, "completion_tokens": 3}}), "[DONE]"],
    "choices-text": [json.dumps({"choices": "abc"})] * 3 + ["[DONE]"],
    "bad-json": [json.dumps(CHOICE), "{not json", "[DONE]"],
    "no-done": [json.dumps(CHOICE)] * 3,
}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for line in STREAMS[body["prompt"]]:
            self.wfile.write(f"data: {line}\n\n".encode())
            self.wfile.flush()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def _complete(url: str, prompt: str):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        async with httpx.AsyncClient() as client:
            ep = Endpoint(client, url, "m", 5.0, time.perf_counter())
            return await ep.complete(0, prompt, 4, 3)
    return asyncio.run(go())


def test_a_good_stream_finishes_with_the_servers_counts(url: str) -> None:
    out = _complete(url, "good")
    assert out.finished and out.produced == 3 and len(out.token_times) == 3


@pytest.mark.parametrize(("prompt", "reason"), [
    ("usage-list", "malformed usage: [3]"),
    ("usage-text", "malformed usage: {'completion_tokens': 'three'}"),
    ("usage-null", "malformed usage: {'completion_tokens': None}"),
    ("prompt-text", "malformed usage: {'prompt_tokens': -4, 'completion_tokens': 3}"),
    ("choices-text", "the server returned 0 of 3 tokens"),
    ("bad-json", "malformed stream data: '{not json'"),
])
def test_a_malformed_stream_fails_its_request_with_a_reason(url: str, prompt: str,
                                                           reason: str) -> None:
    out = _complete(url, prompt)
    assert not out.finished and out.reason.startswith(reason), out.reason


def test_a_stream_without_done_counts_its_chunks(url: str) -> None:
    out = _complete(url, "no-done")  # no usage, no [DONE]: the chunks it saw are the count
    assert out.finished and out.produced == 3


def test_a_bad_workload_is_named_before_any_connection(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from servesim.cli import main

    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": -3, "output_length": 2}\n')
    # no connection is tried (so the port does not matter): before, the probe came first
    # and a closed port's "connection refused" hid the trace's error
    argv = ["measure", "--endpoint", "http://127.0.0.1:9/v1", "--workload", str(trace),
            "--out", str(tmp_path / "o"), "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "t.jsonl line 1: field 'input_length' = -3" in err and "connect" not in err
    assert not (tmp_path / "o").exists()  # nothing measured, nothing left behind
