"""Chat completions: checking ``messages``, the chat template, and the chat answer shapes.

A message is ``{"role": ..., "content": ...}`` (and optionally ``"name"``); ``role`` is
one of system, developer, user, assistant; ``content`` is a string or a list of text parts
``{"type": "text", "text": ...}``, joined with newlines (vLLM's "string" content format).
Images, tool calls and tool messages are refused with a 400 naming the field.

The prompt is the model's chat template applied to the messages with the assistant's turn
opened (``add_generation_prompt``): the tokenizer's own template where it has one
(SmolLM2-135M-Instruct's ChatML, carried by its GGUF file and cached beside the weights),
else :func:`fallback_template`, for random-weight models that have no tokenizer::

    <|system|>\\nBe brief.\\n<|user|>\\nHi\\n<|assistant|>\\n

so the same conversation through /v1/completions with that text as the prompt gives the
same tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.server.api import ApiError, check_unicode

Message = dict[str, str]  # {"role": ..., "content": ...}: validated, content flattened
ChatTemplate = Callable[[list[Message]], str]
ROLES = ("system", "developer", "user", "assistant")


def _content(value: Any, where: str) -> str:
    if isinstance(value, str):
        check_unicode(value, where)
        return value
    if not isinstance(value, list):
        raise ApiError(f"{where} must be a string or a list of text parts, got "
                       f"{type(value).__name__}", where)
    texts = []
    for j, part in enumerate(value):
        at = f"{where}[{j}]"
        if not isinstance(part, dict) or part.get("type") != "text":
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise ApiError(f"{at}.type = {kind!r}: only text parts are supported", f"{at}.type")
        if not isinstance(part.get("text"), str):
            raise ApiError(f"{at}.text must be a string", f"{at}.text")
        check_unicode(part["text"], f"{at}.text")
        texts.append(part["text"])
    return "\n".join(texts)


def parse_messages(value: Any) -> list[Message]:
    """Validated messages, content flattened to strings; ApiError names the field."""
    if not isinstance(value, list) or not value:
        raise ApiError("messages must be a non-empty list of {role, content} objects",
                       "messages")
    out = []
    for i, msg in enumerate(value):
        at = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise ApiError(f"{at} must be an object, got {type(msg).__name__}", at)
        extra = sorted(set(msg) - {"role", "content", "name"})
        if extra:
            raise ApiError(f"{at}.{extra[0]} is not supported (only role, content, name)",
                           f"{at}.{extra[0]}")
        role = msg.get("role")
        if role not in ROLES:
            raise ApiError(f"{at}.role = {role!r}: must be one of {', '.join(ROLES)}",
                           f"{at}.role")
        if "content" not in msg or msg["content"] is None:
            raise ApiError(f"{at}.content is required", f"{at}.content")
        if "name" in msg and not isinstance(msg["name"], str):
            raise ApiError(f"{at}.name must be a string", f"{at}.name")
        out.append({"role": role, "content": _content(msg["content"], f"{at}.content")})
    return out


def fallback_template(messages: list[Message]) -> str:
    """``<|role|>\\ncontent\\n`` per message, then ``<|assistant|>\\n``: the template of
    models without a tokenizer (random weights, byte-level text)."""
    return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"


def tokenizer_template(tokenizer: Any) -> ChatTemplate | None:
    """The tokenizer's own chat template as a function, or None if it has none."""
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        return None

    def render(messages: list[Message]) -> str:
        return str(tokenizer.apply_chat_template(messages, tokenize=False,
                                                 add_generation_prompt=True))

    return render


def chat_choice(text: str, finish_reason: str | None, token_ids: list[int] | None, *,
                delta: bool, first: bool = False) -> dict[str, Any]:
    """One entry of a chat answer's ``choices``: a ``message`` (whole answer) or a
    ``delta`` (a stream chunk; the first one also carries the role)."""
    if delta:
        body: dict[str, Any] = {"content": text}
        if first:
            body = {"role": "assistant", **body}
        out: dict[str, Any] = {"index": 0, "delta": body}
    else:
        out = {"index": 0, "message": {"role": "assistant", "content": text}}
    out.update(logprobs=None, finish_reason=finish_reason)
    if token_ids is not None:
        out["token_ids"] = token_ids
    return out
