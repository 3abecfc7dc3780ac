"""The OpenAI completions API as the server speaks it: request validation, response shapes.

Pure functions over JSON values (no HTTP, no torch), so every 400 the server can answer
is tested here by its message. Errors use OpenAI's body::

    {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens",
               "code": null}}

Decoding is always greedy and EOS is never honoured: a request gets exactly
``max_tokens`` tokens (what benchmarks ask for with ``ignore_eos``). ``ignore_eos`` and
``min_tokens`` are accepted (``min_tokens <= max_tokens``) so clients written for vLLM
work unchanged; sampling fields (``temperature``, ``top_p``, ``seed``, ...) are ignored.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions


class ApiError(ValueError):
    """A request the server refuses: HTTP ``status`` with an OpenAI-style error body."""

    def __init__(self, message: str, param: str | None = None, status: int = 400,
                 kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.message, self.param, self.status, self.kind = message, param, status, kind

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.param, self.kind)


def error_body(message: str, param: str | None = None,
               kind: str = "invalid_request_error") -> dict[str, Any]:
    """OpenAI's error JSON."""
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


@dataclass(slots=True, frozen=True)
class CompletionRequest:
    """A validated /v1/completions request."""

    prompt: str | list[int]  # text, or token ids
    max_tokens: int  # exactly this many tokens are generated
    stream: bool
    include_usage: bool  # stream_options.include_usage: a last chunk with usage
    return_token_ids: bool  # vLLM's extension: token ids beside the text


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _flag(body: dict[str, Any], key: str, default: bool = False) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(f"{key} = {value!r}: must be true or false", key)
    return value


def _count(body: dict[str, Any], key: str, default: int | None, low: int) -> int | None:
    value = body.get(key, default)
    if value is None:
        return default
    if not _is_int(value) or value < low:
        raise ApiError(f"{key} = {value!r}: must be an integer >= {low}", key)
    return int(value)


def _prompt(value: Any, vocab_size: int) -> str | list[int]:
    """A text or token-id prompt; a batch of exactly one prompt is unwrapped."""
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str | list):
        value = value[0]
    if isinstance(value, str):
        if not value:
            raise ApiError("prompt is empty", "prompt")
        _check_unicode(value)
        return value
    if not isinstance(value, list) or (value and isinstance(value[0], str | list)):
        raise ApiError("prompt must be a string or a list of token ids (one prompt per "
                       f"request), got {type(value).__name__}", "prompt")
    if not value:
        raise ApiError("prompt is empty", "prompt")
    bad = next((v for v in value if not _is_int(v) or not 0 <= v < vocab_size), None)
    if bad is not None:
        raise ApiError(f"prompt token id {bad!r} is not an integer in [0, {vocab_size})",
                       "prompt")
    return [int(v) for v in value]


def _check_unicode(text: str) -> None:
    """Refuse text that is not valid Unicode: JSON may spell a lone surrogate (``"\\ud800"``),
    which no tokenizer can encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ApiError(f"prompt is not valid Unicode: {text[e.start]!r} at character "
                       f"{e.start} is a lone surrogate", "prompt") from None


def parse_completion(body: Any, served_model: str, vocab_size: int) -> CompletionRequest:
    """Validate a /v1/completions JSON body; raise ApiError naming the field."""
    if not isinstance(body, dict):
        raise ApiError(f"the request body must be a JSON object, got {type(body).__name__}")
    model = body.get("model")
    if model is not None and model != served_model:
        raise ApiError(f"model {model!r} does not exist; this server serves {served_model!r}",
                       "model")
    if "prompt" not in body:
        raise ApiError("prompt is required", "prompt")
    prompt = _prompt(body["prompt"], vocab_size)
    max_tokens = _count(body, "max_tokens", DEFAULT_MAX_TOKENS, 1)
    assert max_tokens is not None
    min_tokens = _count(body, "min_tokens", 0, 0)
    if min_tokens is not None and min_tokens > max_tokens:
        raise ApiError(f"min_tokens = {min_tokens} must be <= max_tokens = {max_tokens}",
                       "min_tokens")
    _flag(body, "ignore_eos")
    if _count(body, "n", 1, 1) != 1 or _count(body, "best_of", 1, 1) != 1:
        raise ApiError("only n = 1 and best_of = 1 are supported", "n")
    if _flag(body, "echo"):
        raise ApiError("echo is not supported", "echo")
    if body.get("logprobs"):
        raise ApiError("logprobs are not supported", "logprobs")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(f"stream_options = {options!r}: must be an object", "stream_options")
    return CompletionRequest(prompt, max_tokens, _flag(body, "stream"),
                             _flag(options, "include_usage"), _flag(body, "return_token_ids"))


def check_context(prompt_tokens: int, max_tokens: int, max_context: int) -> None:
    """Refuse a request that cannot fit the model's context (OpenAI's wording)."""
    total = prompt_tokens + max_tokens
    if total > max_context:
        raise ApiError(
            f"This model's maximum context length is {max_context} tokens. However, you "
            f"requested {total} tokens ({prompt_tokens} in the prompt, {max_tokens} for the "
            "completion). Please reduce the length of the prompt or max_tokens.", "max_tokens")


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def choice(text: str, finish_reason: str | None, token_ids: list[int] | None) -> dict[str, Any]:
    """One entry of ``choices``; ``token_ids`` only when the client asked for them."""
    out: dict[str, Any] = {"index": 0, "text": text, "logprobs": None,
                           "finish_reason": finish_reason}
    if token_ids is not None:
        out["token_ids"] = token_ids
    return out


def completion(cid: str, model: str, choices: list[dict[str, Any]],
               use: dict[str, int] | None, created: int | None = None) -> dict[str, Any]:
    """A completion object (non-streaming) or a chunk of one (streaming)."""
    out: dict[str, Any] = {"id": cid, "object": "text_completion",
                           "created": int(time.time()) if created is None else created,
                           "model": model, "choices": choices}
    if use is not None:
        out["usage"] = use
    return out


def model_list(model: str, max_context: int, created: int) -> dict[str, Any]:
    """/v1/models, with vLLM's ``max_model_len`` (clients use it to fit prompts)."""
    return {"object": "list", "data": [{
        "id": model, "object": "model", "created": created, "owned_by": "servesim",
        "root": model, "max_model_len": max_context}]}
