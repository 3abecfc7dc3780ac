"""Turning one request's engine events into an HTTP answer: an OpenAI completion or chat
completion, a stream of server-sent events, or an error with OpenAI's body.

Events come from the engine thread through the request's queue (engine/server/app.py):
``("token", id)`` per output token, then ``("done", None)``, ``("rejected", reason)``,
``("aborted", reason)`` (the client left) or ``("failed", message)`` (the engine stopped).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse, Response

from engine.server.api import ApiError, CompletionRequest, choice, completion, error_body, usage
from engine.server.chat import chat_choice
from engine.server.stop import StopText

if TYPE_CHECKING:
    from engine.server.app import ServedModel


def error_response(e: ApiError) -> JSONResponse:
    """``e`` as an HTTP response with OpenAI's error body."""
    return JSONResponse(e.body(), status_code=e.status)


def refusal(event: tuple[str, Any]) -> ApiError | None:
    """The error to answer when a request ended before its first token, else None."""
    kind, detail = event
    if kind == "rejected":
        return ApiError(f"the engine refused the request: {detail}")
    if kind == "aborted":  # nobody is listening; said for the record
        return ApiError(str(detail), status=499, kind="client_closed_request")
    if kind == "failed":
        return ApiError(detail, status=503, kind="server_error")
    return None


class Answer:
    """Turns a request's engine events into an OpenAI answer, whole or a stream of chunks:
    a completion, or a chat completion when ``req.chat``.

    A stop string (``req.stop``) cuts the text before it, answers finish_reason "stop",
    and calls ``on_stop`` (the app has the engine stop generating for the request).
    """

    def __init__(self, cid: str, model: ServedModel, req: CompletionRequest,
                 prompt_tokens: int, on_stop: Callable[[], None]) -> None:
        assert req.max_tokens is not None  # resolved by the app
        self.cid, self.model, self.req, self.prompt_tokens = cid, model, req, prompt_tokens
        self.max_tokens, self.on_stop = req.max_tokens, on_stop
        self.created = int(time.time())
        self.decoder = model.codec.decoder()
        self.text = StopText(req.stop)
        self.n = 0  # tokens received

    def _add(self, token: int) -> tuple[str, str | None]:
        """The text to send for one more token, and the finish reason if it was the last."""
        self.n += 1
        last = self.n == self.max_tokens
        piece = self.decoder.add(token) + (self.decoder.flush() if last else "")
        text, stopped = self.text.add(piece, final=last, looking=self.n >= self.req.min_tokens)
        if stopped:
            self.on_stop()
            return text, "stop"
        return text, "length" if last else None

    def _choice(self, text: str, finish: str | None, ids: list[int], *, delta: bool
                ) -> dict[str, Any]:
        token_ids = ids if self.req.return_token_ids else None
        if self.req.chat:
            return chat_choice(text, finish, token_ids, delta=delta, first=self.n == 1)
        return choice(text, finish, token_ids)

    def _body(self, choices: list[dict[str, Any]], use: dict[str, Any] | None,
              chunk: bool) -> dict[str, Any]:
        kind = ("chat.completion.chunk" if chunk else "chat.completion") if self.req.chat \
            else "text_completion"
        return completion(self.cid, self.model.name, choices, use, self.created, kind)

    async def whole(self, first: tuple[str, Any], events: asyncio.Queue[tuple[str, Any]]
                    ) -> Response:
        ids: list[int] = []
        parts: list[str] = []
        event, finish = first, None
        while event[0] == "token" and finish is None:
            ids.append(int(event[1]))
            text, finish = self._add(ids[-1])
            parts.append(text)
            if finish != "stop":  # after the last token: its done event
                event = await events.get()
        if finish != "stop" and event[0] != "done":
            return error_response(refusal(event) or ApiError(str(event[1]), status=500))
        choices = [self._choice("".join(parts), finish or "length", ids, delta=False)]
        return JSONResponse(self._body(choices, usage(self.prompt_tokens, len(ids)), False))

    def _chunk(self, choices: list[dict[str, Any]], use: dict[str, Any] | None = None) -> str:
        body = self._body(choices, use, True)
        return f"data: {json.dumps(body, separators=(',', ':'))}\n\n"

    async def stream(self, first: tuple[str, Any], events: asyncio.Queue[tuple[str, Any]],
                     watcher: asyncio.Future[None]) -> AsyncIterator[str]:
        """One chunk per token (the last with its finish_reason), usage, [DONE].

        With ``continuous_usage`` every chunk carries the usage so far. ``watcher``
        cancels the request in the engine if the client goes away; if the stream is
        closed early (the send failed), the watcher has seen or will see the disconnect,
        so it is left to finish; otherwise it is cancelled at the end.
        """
        event, finish = first, None
        try:
            while event[0] == "token" and finish is None:
                token = int(event[1])
                text, finish = self._add(token)
                use = usage(self.prompt_tokens, self.n) if self.req.continuous_usage else None
                yield self._chunk([self._choice(text, finish, [token], delta=True)], use)
                if finish != "stop":
                    event = await events.get()
        finally:
            if event[0] != "token" or finish == "stop":  # nothing left to cancel
                watcher.cancel()
        if event[0] == "aborted":
            return
        if finish != "stop" and event[0] != "done":  # the engine failed mid-stream: say so
            yield f"data: {json.dumps(error_body(str(event[1]), kind='server_error'))}\n\n"
            return
        if self.req.include_usage:
            yield self._chunk([], usage(self.prompt_tokens, self.n))
        yield "data: [DONE]\n\n"
