"""Which request fields each endpoint accepts and what each does; the rest get a 400.

No field is ignored without a word: a field the server does not know, or a value it
cannot honour, is refused with a 400 naming it. What is accepted:

=========================  ==================================================================
field                      what it does
=========================  ==================================================================
model                      must be the served model's name (or absent)
prompt (completions)       text, or token ids; a batch of exactly one prompt is unwrapped
messages (chat)            rendered with the model's chat template (engine/server/chat.py)
max_tokens                 tokens to generate (completions: default 16; chat: default what
                           the context leaves); chat also takes ``max_completion_tokens``
min_tokens                 <= max_tokens; stop strings are not looked for before it
ignore_eos                 true or absent: EOS is never honoured, so false is refused
stop                       a string or up to 4: output ends before the first one found,
                           finish_reason "stop", and the engine stops generating
stream                     server-sent events, one chunk per token
stream_options             only with stream: ``include_usage`` (a last chunk with usage),
                           ``continuous_usage_stats`` (with include_usage: usage in every chunk)
return_token_ids           vLLM's extension: token ids beside the text
n, best_of                 1 only
echo, logprobs             false / null only; chat: ``top_logprobs`` null or 0 only
temperature, top_p,        decoding is greedy: only their greedy or neutral values (0, 1,
top_k, presence_penalty,   -1 or 0, 0, 0, 1) are accepted
frequency_penalty,
repetition_penalty
seed                       an integer: greedy decoding is deterministic, so any seed gives
                           the same output
user                       a string: the client's label for its end user, kept by nobody
=========================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.server.api import (
    DEFAULT_MAX_TOKENS,
    ApiError,
    CompletionRequest,
    check_unicode,
    count,
    flag,
    is_int,
)
from engine.server.chat import Message, parse_messages
from simulator.specs.models import catalogue_name

COMMON = frozenset({
    "model", "max_tokens", "min_tokens", "ignore_eos", "stop", "stream", "stream_options",
    "return_token_ids", "n", "logprobs", "temperature", "top_p", "top_k", "presence_penalty",
    "frequency_penalty", "repetition_penalty", "seed", "user"})
COMPLETION_FIELDS = COMMON | {"prompt", "best_of", "echo"}
CHAT_FIELDS = COMMON | {"messages", "max_completion_tokens", "top_logprobs"}
# Sampling knobs and the values that leave greedy decoding unchanged.
GREEDY = {"temperature": (0,), "top_p": (1,), "top_k": (-1, 0), "presence_penalty": (0,),
          "frequency_penalty": (0,), "repetition_penalty": (1,)}
MAX_STOP = 4  # OpenAI's limit on stop strings


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def _known(body: dict[str, Any], known: frozenset[str], endpoint: str) -> None:
    unknown = sorted(set(body) - known)
    if unknown:
        raise ApiError(f"{unknown[0]} is not supported by {endpoint} on this server; it "
                       f"accepts {', '.join(sorted(known))} (docs/serving.md)", unknown[0])


def _greedy(body: dict[str, Any]) -> None:
    for key, neutral in GREEDY.items():
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ApiError(f"{key} = {value!r}: must be a number", key)
        if value not in neutral:
            raise ApiError(f"{key} = {value!r}: this server decodes greedily; send "
                           f"{' or '.join(map(str, neutral))} or leave it out", key)
    if body.get("seed") is not None and not is_int(body["seed"]):
        raise ApiError(f"seed = {body['seed']!r}: must be an integer", "seed")
    if body.get("user") is not None and not isinstance(body["user"], str):
        raise ApiError(f"user = {body['user']!r}: must be a string", "user")


def _stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise ApiError(f"stop = {value!r}: must be a string or a list of strings", "stop")
    if len(stops) > MAX_STOP:
        raise ApiError(f"stop has {len(stops)} strings; at most {MAX_STOP}", "stop")
    if any(not s for s in stops):
        raise ApiError("stop strings must not be empty", "stop")
    for s in stops:
        check_unicode(s, "stop")
    return tuple(stops)


def _stream(body: dict[str, Any]) -> tuple[bool, bool, bool]:
    """stream, include_usage, continuous_usage (vLLM's rules)."""
    stream = flag(body, "stream")
    options = body.get("stream_options")
    if options is None:
        return stream, False, False
    if not isinstance(options, dict):
        raise ApiError(f"stream_options = {options!r}: must be an object", "stream_options")
    if not stream:
        raise ApiError("stream_options is allowed only when stream is true", "stream_options")
    unknown = sorted(set(options) - {"include_usage", "continuous_usage_stats"})
    if unknown:
        raise ApiError(f"stream_options.{unknown[0]} is not supported; known: include_usage, "
                       "continuous_usage_stats", f"stream_options.{unknown[0]}")
    usage = flag(options, "include_usage", where="stream_options.")
    continuous = flag(options, "continuous_usage_stats", where="stream_options.")
    if continuous and not usage:
        raise ApiError("stream_options.continuous_usage_stats needs include_usage = true "
                       "(as in vLLM)", "stream_options.continuous_usage_stats")
    return stream, usage, continuous


def _common(body: dict[str, Any], served_model: str, max_tokens: int | None
            ) -> dict[str, Any]:
    """The fields both endpoints share, as CompletionRequest keywords."""
    model = body.get("model")
    if model is not None and not same_model(model, served_model):
        raise ApiError(f"model {model!r} does not exist; this server serves {served_model!r}",
                       "model")
    min_tokens = count(body, "min_tokens", 0, 0) or 0
    if max_tokens is not None and min_tokens > max_tokens:
        raise ApiError(f"min_tokens = {min_tokens} must be <= max_tokens = {max_tokens}",
                       "min_tokens")
    if not flag(body, "ignore_eos", True):
        raise ApiError("ignore_eos = false is not supported: this server never stops at EOS "
                       "(every request gets max_tokens tokens unless a stop string ends it)",
                       "ignore_eos")
    if count(body, "n", 1, 1) != 1:
        raise ApiError("only n = 1 is supported", "n")
    if body.get("logprobs"):
        raise ApiError("logprobs are not supported", "logprobs")
    _greedy(body)
    stream, include_usage, continuous = _stream(body)
    return {"max_tokens": max_tokens, "min_tokens": min_tokens, "stop": _stop(body.get("stop")),
            "stream": stream, "include_usage": include_usage, "continuous_usage": continuous,
            "return_token_ids": flag(body, "return_token_ids")}


def _prompt(value: Any, vocab_size: int) -> str | list[int]:
    """A text or token-id prompt; a batch of exactly one prompt is unwrapped."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str | list):
        value = value[0]
    if isinstance(value, str):
        if not value:
            raise ApiError("prompt is empty", "prompt")
        check_unicode(value, "prompt")
        return value
    if not isinstance(value, list) or (value and isinstance(value[0], str | list)):
        raise ApiError("prompt must be a string or a list of token ids (one prompt per "
                       f"request), got {type(value).__name__}", "prompt")
    if not value:
        raise ApiError("prompt is empty", "prompt")
    bad = next((v for v in value if not is_int(v) or not 0 <= v < vocab_size), None)
    if bad is not None:
        raise ApiError(f"prompt token id {bad!r} is not an integer in [0, {vocab_size})",
                       "prompt")
    return [int(v) for v in value]


def parse_completion(body: Any, served_model: str, vocab_size: int) -> CompletionRequest:
    """Validate a /v1/completions JSON body; raise ApiError naming the field."""
    body = _object(body)
    _known(body, COMPLETION_FIELDS, "/v1/completions")
    if "prompt" not in body:
        raise ApiError("prompt is required", "prompt")
    prompt = _prompt(body["prompt"], vocab_size)
    max_tokens = count(body, "max_tokens", DEFAULT_MAX_TOKENS, 1)
    if count(body, "best_of", 1, 1) != 1:
        raise ApiError("only best_of = 1 is supported", "best_of")
    if flag(body, "echo"):
        raise ApiError("echo is not supported", "echo")
    return CompletionRequest(prompt, **_common(body, served_model, max_tokens))


def parse_chat(body: Any, served_model: str,
               template: Callable[[list[Message]], str]) -> CompletionRequest:
    """Validate a /v1/chat/completions JSON body and render its messages with
    ``template``; raise ApiError naming the field."""
    body = _object(body)
    _known(body, CHAT_FIELDS, "/v1/chat/completions")
    if "messages" not in body:
        raise ApiError("messages is required", "messages")
    messages = parse_messages(body["messages"])
    max_tokens = count(body, "max_completion_tokens", None, 1)
    legacy = count(body, "max_tokens", None, 1)
    if max_tokens is not None and legacy is not None and legacy != max_tokens:
        raise ApiError(f"max_tokens = {legacy} and max_completion_tokens = {max_tokens} "
                       "differ; send one", "max_tokens")
    if body.get("top_logprobs"):
        raise ApiError("top_logprobs are not supported", "top_logprobs")
    fields = _common(body, served_model, legacy if max_tokens is None else max_tokens)
    try:
        prompt = template(messages)
    except Exception as e:  # a template may refuse (say, roles that do not alternate)
        raise ApiError(f"the model's chat template refused these messages: {e}",
                       "messages") from None
    return CompletionRequest(prompt, chat=True, **fields)


def same_model(asked: Any, served: str) -> bool:
    """``asked`` names the served model: the same string, or an alias of the same catalogue
    entry (``HuggingFaceTB/SmolLM2-135M-Instruct`` for ``smollm2-135m``)."""
    if not isinstance(asked, str):
        return False
    if asked == served:
        return True
    key = catalogue_name(asked)
    return key is not None and key == catalogue_name(served)
