"""The OpenAI-compatible HTTP layer (Starlette): /v1/completions, /v1/chat/completions,
/v1/models, /health, /metrics, /servesim/records. Model-independent: it drives any
:class:`Backend`.

Each request gets an ``asyncio.Queue`` that the engine thread feeds through
``loop.call_soon_threadsafe`` (a :class:`_Sink`). A streamed answer sends its headers
with the first token, so a request the engine refuses (it can never fit the KV cache)
still gets an HTTP 400 with an OpenAI-style error body rather than a broken stream.
Both endpoints share one handler: a chat request is its template-rendered prompt answered
in chat shapes (engine/server/chat.py); which fields each accepts is engine/server/fields.py.
A stop string that ends an output ends the request in the engine (``backend.end_early``).

Every request, streamed or not, has a watcher (:func:`_watch_disconnect`) waiting for its
client to go away; when it does, the engine drops the request (``backend.cancel``: its KV
blocks and slot are freed) and records it as ``aborted``. Every error the server answers,
an unknown route or method included, has OpenAI's JSON error body.

:class:`ServerThread` runs the app under uvicorn in a background thread on a free port,
for tests and notebooks; ``servesim serve`` runs it in the foreground.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from engine.server.answer import Answer, error_response, refusal
from engine.server.api import ApiError, check_context, error_body, model_list
from engine.server.chat import ChatTemplate, fallback_template
from engine.server.fields import parse_chat, parse_completion
from engine.server.live_api import Backend, EngineUnavailable
from engine.server.metrics import ServerMetrics
from engine.server.records import records_json, write_records
from engine.server.text import TextCodec
from simulator.policies import Sequence
from simulator.results_manifest import ENGINE, seal_results


@dataclass(slots=True, frozen=True)
class ServedModel:
    """What the HTTP layer says about the model and how it turns text into ids."""

    name: str  # the model name clients send
    codec: TextCodec  # text prompts -> ids; ids -> text
    vocab_size: int  # token ids must be below this
    max_context: int  # prompt + max_tokens at most
    chat_template: ChatTemplate = fallback_template  # chat messages -> prompt text


class _Sink:
    """One request's events, from the engine thread to its handler's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, metrics: ServerMetrics) -> None:
        self.loop, self.metrics = loop, metrics
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.last_s: float | None = None
        self.stopped = False  # a stop string ended the output (set before end_early)

    def _put(self, event: tuple[str, Any]) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, event)
        except RuntimeError:  # the event loop is closed: nobody is listening any more
            pass

    def token(self, seq: Sequence, token_id: int, time_s: float) -> None:
        self.metrics.token(seq, time_s, self.last_s)
        self.last_s = time_s
        self._put(("token", token_id))

    def done(self, seq: Sequence) -> None:
        self.metrics.done(seq, self.stopped)
        self._put(("rejected", seq.reason) if seq.reason else ("done", None))

    def aborted(self, seq: Sequence) -> None:
        self.metrics.aborted(seq)
        self._put(("aborted", seq.reason))

    def fail(self, message: str) -> None:
        self._put(("failed", message))


async def _watch_disconnect(request: Request, on_leave: Callable[[], None]) -> None:
    """Call ``on_leave`` when the client disconnects (cancel this task once answered:
    uvicorn also reports a disconnect after a complete response)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            on_leave()
            return


def _end_early(backend: Backend, sink: _Sink, rid: int) -> None:
    """A stop string ended ``rid``'s output: the engine stops generating for it."""
    sink.stopped = True
    backend.end_early(rid)


def create_app(backend: Backend, model: ServedModel, *,
               records_out: Path | None = None,
               fingerprint: dict[str, Any] | None = None) -> Starlette:
    """The ASGI app. Its lifespan starts the backend and, at shutdown, stops it and writes
    the records to ``records_out`` (a folder) when given. ``fingerprint`` (the machine the
    engine runs on) is served at ``/servesim/fingerprint`` for ``servesim measure``."""
    metrics = ServerMetrics(model.name, backend.kv_blocks)
    created = int(time.time())

    async def health(request: Request) -> Response:
        if backend.alive:
            return Response(status_code=200)
        why = repr(backend.error) if backend.error else "the engine is not running"
        return JSONResponse(error_body(why, kind="server_error"), status_code=503)

    async def models(request: Request) -> Response:
        return JSONResponse(model_list(model.name, model.max_context, created))

    async def prometheus(request: Request) -> Response:
        return PlainTextResponse(metrics.render(backend.gauges),
                                 media_type="text/plain; version=0.0.4; charset=utf-8")

    async def records(request: Request) -> Response:
        tokens = request.query_params.get("tokens", "") in ("1", "true")
        snap = await run_in_threadpool(backend.snapshot)
        return JSONResponse(records_json(snap, tokens))

    async def machine(request: Request) -> Response:
        if fingerprint is None:
            return JSONResponse(error_body("no fingerprint", kind="not_found"), status_code=404)
        return JSONResponse(fingerprint)

    async def answer(request: Request, chat: bool) -> Response:
        arrived = backend.clock()  # before the body is read: when the request reached us
        try:
            body = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            return error_response(ApiError(f"the request body is not valid JSON: {e}"))
        try:
            req = (parse_chat(body, model.name, model.chat_template) if chat
                   else parse_completion(body, model.name, model.vocab_size))
            ids = model.codec.encode(req.prompt) if isinstance(req.prompt, str) else req.prompt
            if req.max_tokens is None:  # chat without max_tokens: what the context leaves
                req = replace(req, max_tokens=max(1, model.max_context - len(ids)))
            assert req.max_tokens is not None
            check_context(len(ids), req.max_tokens, model.max_context)
            sink = _Sink(asyncio.get_running_loop(), metrics)
            rid = backend.submit(ids, req.max_tokens, sink, arrived)
        except ApiError as e:
            return error_response(e)
        except EngineUnavailable as e:
            return error_response(ApiError(str(e), status=503, kind="server_error"))
        watcher = asyncio.ensure_future(_watch_disconnect(request, lambda: backend.cancel(rid)))
        streaming = False  # once the stream is built, it owns the watcher
        try:
            first = await sink.queue.get()
            refused = refusal(first)
            if refused is not None:
                return error_response(refused)
            out = Answer(f"{'chatcmpl' if chat else 'cmpl'}-{rid}", model, req, len(ids),
                         lambda: _end_early(backend, sink, rid))
            if req.stream:
                streaming = True
                return StreamingResponse(out.stream(first, sink.queue, watcher),
                                         media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache"})
            return await out.whole(first, sink.queue)
        finally:
            if not streaming:
                watcher.cancel()

    async def completions(request: Request) -> Response:
        return await answer(request, chat=False)

    async def chat_completions(request: Request) -> Response:
        return await answer(request, chat=True)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        backend.start()
        try:
            yield
        finally:
            await run_in_threadpool(backend.stop)
            if records_out is not None:
                written = write_records(backend.snapshot(), records_out)
                seal_results(records_out, ENGINE, written, machine=fingerprint,
                             scenario="servesim serve", points=1, requests_from="clients")

    return Starlette(routes=[
        Route("/health", health), Route("/v1/models", models), Route("/metrics", prometheus),
        Route("/servesim/records", records), Route("/servesim/fingerprint", machine),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    ], lifespan=lifespan, exception_handlers={HTTPException: _http_error,
                                              Exception: _internal_error})


_KINDS = {404: "not_found", 405: "invalid_request_error"}


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (unknown route, wrong method) with OpenAI's error body."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"no route {request.url.path}; this server serves " + ", ".join(_ROUTES)
    elif exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    return JSONResponse(error_body(message, kind=_KINDS.get(exc.status_code, "server_error")),
                        status_code=exc.status_code, headers=exc.headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """A bug in the server: a JSON 500 rather than Starlette's plain text."""
    return JSONResponse(error_body(f"internal server error: {exc!r}", kind="server_error"),
                        status_code=500)


_ROUTES = ("POST /v1/completions", "POST /v1/chat/completions", "GET /v1/models", "/health",
           "/metrics", "/servesim/records", "/servesim/fingerprint")


@dataclass(slots=True)
class ServerThread:
    """A uvicorn server running ``app`` in a background thread (tests, notebooks)."""

    url: str  # e.g. http://127.0.0.1:54321 (add /v1 for the API)
    stop: Callable[[], None]  # graceful shutdown (runs the app's lifespan end), then join


def start_in_thread(app: Any, host: str = "127.0.0.1", port: int = 0,
                    timeout_s: float = 30.0) -> ServerThread:
    """Start ``app`` on ``host:port`` (0 = a free port) and wait until it accepts."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="servesim-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the server did not start on {host}:{port}")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout_s)

    return ServerThread(f"http://{host}:{bound}", stop)
