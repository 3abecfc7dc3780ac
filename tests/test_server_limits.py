"""Issue 11, items 6 and 7 and the server's smalls: bounded KV memory, work dropped when
the client leaves, JSON errors everywhere, `serve` flags checked before the model loads.

The tiny random-weight model on CPU over real loopback HTTP (httpx2), as tests/test_server.py.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx2")

from engine.server.app import create_app, start_in_thread  # noqa: E402
from engine.server.live import LiveEngine  # noqa: E402
from engine.slot_cache import SlotCache  # noqa: E402
from servesim.cli import main  # noqa: E402
from servesim.serve_socket import network_warning  # noqa: E402
from simulator.policies import make_policy  # noqa: E402


class Sink:
    """Counts a LiveEngine's finished requests; ``all_done`` is set at ``expect``."""

    def __init__(self, expect: int) -> None:
        self.expect, self.ended = expect, []
        self.all_done = threading.Event()

    def token(self, seq, token_id, time_s):
        pass

    def _end(self, what: str) -> None:
        self.ended.append(what)
        if len(self.ended) >= self.expect:
            self.all_done.set()

    def done(self, seq):
        self._end(seq.reason or "ok")

    def aborted(self, seq):
        self._end("aborted")

    def fail(self, message):
        self._end(message)


def allocations(engine: LiveEngine) -> list[tuple[int, int]]:
    """Every (rows, capacity) the engine's slot cache allocates from now on."""
    cache, seen = engine.core.cache, []
    alloc = cache._alloc

    def recording(slots: int, capacity: int) -> None:
        seen.append((slots, capacity))
        alloc(slots, capacity)

    cache._alloc = recording
    return seen


# --- item 6: the slot cache is bounded by the KV budget and shrinks back ----------------

def test_slot_cache_grows_within_its_bound_and_shrinks_back():
    cache = SlotCache(1, 1, 2, slots=8, capacity=256, max_positions=4096)
    assert (cache.slots, cache.capacity) == (8, 256)
    cache.reserve(2, 2000)  # doubling would give 8 x 2048 = 16384 positions
    assert (cache.slots, cache.capacity) == (2, 2000)  # 4000 <= 4096
    cache.reserve(16, 200)  # 16 rows of 256 = 4096: exactly the bound
    assert (cache.slots, cache.capacity) == (16, 256)
    cache.reserve(1, 10)  # 4096 > 4 x 10 and > the first 2048: back to the first size
    assert (cache.slots, cache.capacity) == (8, 256)
    with pytest.raises(RuntimeError, match="17 rows x 256 positions = 4352, more than its "
                                           "bound of 4096"):
        cache.reserve(17, 256)


def test_a_long_prompt_after_short_ones_stays_within_the_kv_budget(tiny):
    """Issue 11 item 6: 16 short requests then one long one grew the cache to
    (rows) x (longest) = 32 x 1024 positions with a budget of 64 blocks x 16 = 1024."""
    em, _ = tiny
    engine = LiveEngine(em, make_policy("continuous"), 64)
    seen = allocations(engine)
    sink = Sink(17)
    engine.start()
    try:
        for i in range(16):
            engine.submit([3 + i] * 8, 8, sink)
        engine.submit([7] * 600, 8, sink)
        assert sink.all_done.wait(60)
        snap = engine.snapshot()
    finally:
        engine.stop()
    assert sink.ended == ["ok"] * 17
    assert max(rows * cap for rows, cap in seen) <= 64 * 16, seen
    assert (snap.requests["status"] == "finished").all()


def test_the_slot_cache_shrinks_back_after_a_long_request(tiny):
    """A 1,500-token prompt grows the cache to 8 x 2048 positions on today's main, for
    good; now it goes back to the first allocation (8 rows x 256) once the request ends."""
    em, _ = tiny
    engine = LiveEngine(em, make_policy("continuous"), 1024)
    sink = Sink(2)
    engine.start()
    try:
        engine.submit([5] * 1500, 4, sink)
        deadline = time.monotonic() + 60
        while not sink.ended and time.monotonic() < deadline:
            time.sleep(0.01)
        engine.submit([6] * 4, 2, sink)  # a short one after it: the cache shrinks
        assert sink.all_done.wait(60)
        time.sleep(0.2)  # the step that finished it has synced its slots
    finally:
        engine.stop()
    cache = engine.core.cache
    assert (cache.slots, cache.capacity) == (8, 256)


def test_kv_blocks_help_states_the_memory_bound(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps
    assert "the KV cache holds at most kv-blocks x block-size token positions" in out


# --- item 7: a client that leaves ends its request --------------------------------------

@pytest.fixture()
def server(tiny):
    em, served = tiny
    engine = LiveEngine(em, make_policy("continuous"), 512)
    running = start_in_thread(create_app(engine, served))
    yield running
    running.stop()


def wait_for(predicate, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_non_streaming_clients_that_leave_abort_their_requests(server):
    """Issue 11 item 7: three `curl -m 0.5` requests of 1,000 tokens kept running to the end
    and counted as successes. Now each is aborted, freed, and not a success."""
    body = {"prompt": [9] * 6, "max_tokens": 1000}
    for _ in range(3):
        with pytest.raises(httpx.TimeoutException):
            httpx.post(server.url + "/v1/completions", json=body, timeout=0.5)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        def ended():
            reqs = http.get("/servesim/records").json()["requests"]
            return reqs if len(reqs) == 3 and all(
                r["status"] != "in_flight" for r in reqs) else None

        reqs = wait_for(ended)
        assert [r["status"] for r in reqs] == ["aborted"] * 3
        assert all(r["reason"] == "aborted: the client went away" for r in reqs)
        text = http.get("/metrics").text
        summary = http.get("/servesim/records").json()["summary"]
    assert 'servesim:request_aborted_total{model_name="tiny"} 3.0' in text
    assert 'vllm:request_success_total{finished_reason="length",model_name="tiny"} 0.0' in text
    assert "vllm:num_requests_running{model_name=\"tiny\"} 0.0" in text
    assert 'vllm:kv_cache_usage_perc{model_name="tiny"} 0.0' in text
    assert summary["num_aborted"] == 3 and summary["completed"] == 0


def test_a_client_that_leaves_before_its_first_token_aborts_it(tiny):
    """A request still queued (a dynamic batch of 4 waits 30 s to fill) when its client
    leaves is taken off the queue at once."""
    em, served = tiny
    engine = LiveEngine(em, make_policy("dynamic", max_batch_size=4, max_wait_s=30.0), 64)
    running = start_in_thread(create_app(engine, served))
    try:
        with pytest.raises(httpx.TimeoutException):
            httpx.post(running.url + "/v1/completions",
                       json={"prompt": [1, 2], "max_tokens": 3, "stream": True}, timeout=0.5)
        with httpx.Client(base_url=running.url, timeout=30) as http:
            reqs = wait_for(lambda: [r for r in http.get("/servesim/records").json()[
                "requests"] if r["status"] != "in_flight"])
    finally:
        running.stop()
    assert [(r["status"], r["scheduled_s"], r["first_token_s"]) for r in reqs] == [
        ("aborted", None, None)]  # never scheduled


# --- smalls: JSON errors -----------------------------------------------------------------

def test_a_lone_surrogate_in_the_prompt_is_a_json_400(server):
    r = httpx.post(server.url + "/v1/completions", content=b'{"prompt": "ab\\ud800c"}',
                   headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 400
    assert r.json()["error"] == {
        "message": "prompt is not valid Unicode: '\\ud800' at character 2 is a lone surrogate",
        "type": "invalid_request_error", "param": "prompt", "code": None}


def test_unknown_routes_and_methods_get_openai_error_bodies(server):
    r = httpx.get(server.url + "/v1/chat/nothing", timeout=30)
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["type"] == "not_found" and err["message"].startswith(
        "no route /v1/chat/nothing; this server serves POST /v1/completions")
    r = httpx.get(server.url + "/v1/completions", timeout=30)
    assert r.status_code == 405
    assert r.json()["error"]["message"] == "method GET is not allowed on /v1/completions"


# --- smalls: `serve` checks its address before loading the model ------------------------

@pytest.fixture()
def no_model_load(monkeypatch):
    """Fail the test if `serve` gets as far as loading a model."""
    import engine.server.model as model

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the address was checked")

    monkeypatch.setattr(model, "load_served_model", refuse)


def test_serve_refuses_a_port_out_of_range_before_loading(no_model_load, capsys):
    assert main(["serve", "--port", "99999"]) == 2
    assert capsys.readouterr().err == "servesim: error: --port 99999: must be in 0..65535\n"


def test_serve_reports_a_port_in_use_without_claiming_to_serve(no_model_load, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err == (f"servesim: error: --host 127.0.0.1 --port {port}: cannot listen there: "
                   "the address is already in use\n")


def test_serve_on_all_interfaces_warns_that_there_is_no_auth(monkeypatch, capsys):
    import engine.server.model as model
    from simulator.errors import ConfigError

    def stop(*args, **kwargs):
        raise ConfigError("stopped before loading")

    monkeypatch.setattr(model, "load_served_model", stop)
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert capsys.readouterr().err == (
        "servesim: warning: --host 0.0.0.0 makes the server reachable from the network, and "
        "it has no authentication: anyone who can reach the port can use it\n"
        "servesim: error: stopped before loading\n")


def test_binding_all_interfaces_warns_that_there_is_no_auth():
    assert "reachable from the network" in network_warning("0.0.0.0")
    assert "no authentication" in network_warning("::")
    assert network_warning("192.168.1.5") is not None
    assert [network_warning(h) for h in ("127.0.0.1", "::1", "localhost")] == [None] * 3
