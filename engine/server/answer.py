"""Turning one request's engine events into an HTTP answer: an OpenAI completion, a stream
of server-sent events, or an error with OpenAI's body.

Events come from the engine thread through the request's queue (engine/server/app.py):
``("token", id)`` per output token, then ``("done", None)``, ``("rejected", reason)``,
``("aborted", reason)`` (the client left) or ``("failed", message)`` (the engine stopped).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse, Response

from engine.server.api import ApiError, CompletionRequest, choice, completion, error_body, usage

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
    """Turns a request's engine events into an OpenAI completion or a stream of chunks."""

    def __init__(self, cid: str, model: ServedModel, req: CompletionRequest,
                 prompt_tokens: int) -> None:
        self.cid, self.model, self.req, self.prompt_tokens = cid, model, req, prompt_tokens
        self.created = int(time.time())
        self.decoder = model.codec.decoder()
        self.n = 0  # tokens received

    def _ids(self, ids: list[int]) -> list[int] | None:
        return ids if self.req.return_token_ids else None

    async def whole(self, first: tuple[str, Any], events: asyncio.Queue[tuple[str, Any]]
                    ) -> Response:
        ids: list[int] = []
        event = first
        while event[0] == "token":
            ids.append(int(event[1]))
            event = await events.get()
        if event[0] != "done":
            return error_response(refusal(event) or ApiError(str(event[1]), status=500))
        text = "".join(self.decoder.add(t) for t in ids) + self.decoder.flush()
        body = completion(self.cid, self.model.name, [choice(text, "length", self._ids(ids))],
                          usage(self.prompt_tokens, len(ids)), self.created)
        return JSONResponse(body)

    def _chunk(self, choices: list[dict[str, Any]], use: dict[str, int] | None = None) -> str:
        body = completion(self.cid, self.model.name, choices, use, self.created)
        return f"data: {json.dumps(body, separators=(',', ':'))}\n\n"

    async def stream(self, first: tuple[str, Any], events: asyncio.Queue[tuple[str, Any]],
                     watcher: asyncio.Future[None]) -> AsyncIterator[str]:
        """One chunk per token (the last with finish_reason "length"), usage, [DONE].

        ``watcher`` cancels the request in the engine if the client goes away; if the
        stream is closed early (the send failed), the watcher has seen or will see the
        disconnect, so it is left to finish; otherwise it is cancelled at the end.
        """
        event = first
        try:
            while event[0] == "token":
                token = int(event[1])
                self.n += 1
                last = self.n == self.req.max_tokens
                text = self.decoder.add(token) + (self.decoder.flush() if last else "")
                yield self._chunk([choice(text, "length" if last else None,
                                          self._ids([token]))])
                event = await events.get()
        finally:
            if event[0] != "token":  # the request ended: nothing left to cancel
                watcher.cancel()
        if event[0] == "aborted":
            return
        if event[0] != "done":  # the engine failed mid-stream: say so in-band, then stop
            yield f"data: {json.dumps(error_body(str(event[1]), kind='server_error'))}\n\n"
            return
        if self.req.include_usage:
            yield self._chunk([], usage(self.prompt_tokens, self.n))
        yield "data: [DONE]\n\n"
