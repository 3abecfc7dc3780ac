"""The OpenAI API as the server speaks it: errors, the validated request, response shapes.

Pure functions over JSON values (no HTTP, no torch), so every 400 the server can answer
is tested by its message. Errors use OpenAI's body::

    {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens",
               "code": null}}

Request bodies are checked field by field in engine/server/fields.py (which fields each
endpoint accepts, and what each does) and engine/server/chat.py (``messages``).
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
    """A validated /v1/completions or /v1/chat/completions request."""

    prompt: str | list[int]  # text (chat: the rendered template), or token ids
    max_tokens: int | None  # at most this many tokens; None: what the context leaves (chat)
    stream: bool
    include_usage: bool  # stream_options.include_usage: a last chunk with usage
    continuous_usage: bool  # stream_options.continuous_usage_stats: usage in every chunk
    return_token_ids: bool  # vLLM's extension: token ids beside the text
    stop: tuple[str, ...] = ()  # output ends before the first of these (finish "stop")
    min_tokens: int = 0  # stop strings are not looked for before this many tokens
    chat: bool = False  # answered as chat.completion objects


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def flag(body: dict[str, Any], key: str, default: bool = False, where: str = "") -> bool:
    """A boolean field (null = ``default``); ``where`` prefixes the name in errors."""
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(f"{where}{key} = {value!r}: must be true or false", where + key)
    return value


def count(body: dict[str, Any], key: str, default: int | None, low: int) -> int | None:
    """An integer field >= ``low`` (null = ``default``)."""
    value = body.get(key, default)
    if value is None:
        return default
    if not is_int(value) or value < low:
        raise ApiError(f"{key} = {value!r}: must be an integer >= {low}", key)
    return int(value)


def check_unicode(text: str, param: str) -> None:
    """Refuse text that is not valid Unicode: JSON may spell a lone surrogate (``"\\ud800"``),
    which no tokenizer can encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ApiError(f"{param} is not valid Unicode: {text[e.start]!r} at character "
                       f"{e.start} is a lone surrogate", param) from None


def check_context(prompt_tokens: int, max_tokens: int, max_context: int) -> None:
    """Refuse a request that cannot fit the model's context (OpenAI's wording)."""
    total = prompt_tokens + max_tokens
    if total > max_context:
        raise ApiError(
            f"This model's maximum context length is {max_context} tokens. However, you "
            f"requested {total} tokens ({prompt_tokens} in the prompt, {max_tokens} for the "
            "completion). Please reduce the length of the prompt or max_tokens.", "max_tokens")


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """OpenAI's usage object. ``cached_tokens`` is 0: the engine has no prefix cache yet,
    so every prompt token is computed (the field is there for clients such as AIPerf)."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0}}


def choice(text: str, finish_reason: str | None, token_ids: list[int] | None) -> dict[str, Any]:
    """One entry of ``choices``; ``token_ids`` only when the client asked for them."""
    out: dict[str, Any] = {"index": 0, "text": text, "logprobs": None,
                           "finish_reason": finish_reason}
    if token_ids is not None:
        out["token_ids"] = token_ids
    return out


def completion(cid: str, model: str, choices: list[dict[str, Any]],
               use: dict[str, Any] | None, created: int | None = None,
               kind: str = "text_completion") -> dict[str, Any]:
    """A completion object or a chunk of one; ``kind`` is its ``object`` (completions use
    "text_completion" for both; chat "chat.completion" and "chat.completion.chunk")."""
    out: dict[str, Any] = {"id": cid, "object": kind,
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
