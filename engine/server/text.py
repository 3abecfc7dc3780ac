"""Text in and out of the server: a real tokenizer, or the byte-level fallback.

A model with random weights (``tiny``, any catalogue name) has no tokenizer, so the
server falls back to bytes: a text prompt becomes its UTF-8 bytes as token ids
(``"hi" -> [104, 105]``), and an output token ``t`` becomes the byte ``t mod 256``,
decoded as UTF-8 with invalid sequences replaced by U+FFFD. The text is meaningless, but
prompt lengths are exact and text prompts work against any model. Token-id prompts
(what ``servesim measure`` sends) never go through a codec.

Streaming needs text per token. Decoding one token at a time is wrong for byte-level BPE
(a character can span tokens), so :class:`HFDecoder` keeps a short window of recent
tokens and emits only text that is complete, as vLLM's incremental detokenizer does.
"""

from __future__ import annotations

import codecs
from typing import Any, Protocol


class TokenDecoder(Protocol):
    """Turns one request's output tokens into text, incrementally."""

    def add(self, token_id: int) -> str:
        """Text that became complete with ``token_id`` (may be empty)."""

    def flush(self) -> str:
        """Whatever text is still held back at the end of the output."""


class TextCodec(Protocol):
    """Prompt text -> token ids, and a fresh incremental decoder per request."""

    name: str  # shown in /v1/models and the docs

    def encode(self, text: str) -> list[int]: ...

    def decoder(self) -> TokenDecoder: ...


class _ByteDecoder:
    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, token_id: int) -> str:
        return str(self._utf8.decode(bytes([token_id % 256])))

    def flush(self) -> str:
        return str(self._utf8.decode(b"", final=True))


class ByteCodec:
    """The byte-level fallback for models without a tokenizer (see the module docstring)."""

    name = "bytes (utf-8; output ids mod 256)"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decoder(self) -> TokenDecoder:
        return _ByteDecoder()


class HFDecoder:
    """vLLM-style incremental detokenization over a window of recent tokens."""

    def __init__(self, tokenizer: Any) -> None:
        self.tok = tokenizer
        self.ids: list[int] = []
        self.prefix = 0  # start of the window decoded for context
        self.read = 0  # tokens whose text was emitted

    def _text(self, lo: int, hi: int) -> str:
        return str(self.tok.decode(self.ids[lo:hi], skip_special_tokens=False))

    def add(self, token_id: int) -> str:
        self.ids.append(token_id)
        before = self._text(self.prefix, self.read)
        text = self._text(self.prefix, len(self.ids))
        if len(text) <= len(before) or text.endswith("\ufffd"):
            return ""  # an incomplete character: wait for the next token
        self.prefix, self.read = self.read, len(self.ids)
        return text[len(before):]

    def flush(self) -> str:
        before = self._text(self.prefix, self.read)
        text = self._text(self.prefix, len(self.ids))
        self.prefix = self.read = len(self.ids)
        return text[len(before):]


class HFCodec:
    """A transformers tokenizer (from ``engine.pretrained.load_tokenizer``)."""

    def __init__(self, tokenizer: Any, name: str) -> None:
        self.tok = tokenizer
        self.name = name

    def encode(self, text: str) -> list[int]:
        return [int(i) for i in self.tok.encode(text)]

    def decoder(self) -> TokenDecoder:
        return HFDecoder(self.tok)
