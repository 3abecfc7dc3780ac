"""One streamed completion against an OpenAI-compatible endpoint, timed token by token.

A request asks for exactly ``output_tokens`` tokens, as vLLM's ``bench serve`` does::

    {"model": M, "prompt": P, "max_tokens": n, "min_tokens": n, "ignore_eos": true,
     "stream": true, "stream_options": {"include_usage": true}, "temperature": 0}

and reads the server-sent events. Times are seconds on the client's clock
(``time.perf_counter() - t0``): ``arrival_s`` just before the request is sent, one time
per streamed chunk that carries a choice (one token per chunk on this engine; a server
that bundles tokens gives one time per chunk, as vLLM's ITL does), the last of them being
the finish. The token count is the server's ``usage.completion_tokens`` when it reports
one, else the number of chunks.

Nothing is dropped: an HTTP error, a refused connection, a broken stream, a timeout or a
short answer each end as an :class:`Outcome` with a ``reason``.
"""

from __future__ import annotations

import asyncio
import errno
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2 as httpx


class MeasureError(RuntimeError):
    """The measurement cannot start (unreachable endpoint, bad arguments)."""


@dataclass(slots=True)
class Outcome:
    """What the client saw of one request."""

    request_id: int
    arrival_s: float  # just before sending (client clock)
    prompt_tokens: int  # as sent, or the server's count for text prompts
    output_tokens: int  # asked for
    token_times: list[float] = field(default_factory=list)  # one per streamed chunk
    produced: int = 0  # tokens the server says it produced (usage), else chunks seen
    reason: str = ""  # why it did not finish; "" if it did

    @property
    def finished(self) -> bool:
        return not self.reason


def connect_reason(e: Exception) -> str:
    """A short reason for a failed connection ("connection refused" where it was)."""
    cause: BaseException | None = e
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError) or (
                isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED):
            return "connection refused"
        cause = cause.__cause__ or cause.__context__
    text = str(e) or type(e).__name__
    return "connection refused" if "refused" in text.lower() else f"cannot connect: {text}"


def request_body(model: str, prompt: str | list[int], output_tokens: int) -> dict[str, Any]:
    """The JSON of one streamed completion of exactly ``output_tokens`` tokens."""
    return {"model": model, "prompt": prompt, "max_tokens": output_tokens,
            "min_tokens": output_tokens, "ignore_eos": True, "temperature": 0.0,
            "stream": True, "stream_options": {"include_usage": True}}


def _message(raw: bytes) -> str:
    """The message of an OpenAI (``{"error": {"message"}}``) or vLLM error body, or the text."""
    try:
        body = json.loads(raw)
        err = body.get("error", body) if isinstance(body, dict) else body
        message = err.get("message", err) if isinstance(err, dict) else err
    except (json.JSONDecodeError, UnicodeDecodeError):
        message = raw.decode("utf-8", "replace").strip()
    return str(message)[:300]


class Endpoint:
    """Sends requests to ``{base}/completions`` on one shared async HTTP client."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, model: str,
                 timeout_s: float, t0: float) -> None:
        self.client, self.url, self.model = client, base_url + "/completions", model
        self.timeout_s, self.t0 = timeout_s, t0

    def now(self) -> float:
        return time.perf_counter() - self.t0

    async def complete(self, request_id: int, prompt: str | list[int], prompt_tokens: int,
                       output_tokens: int) -> Outcome:
        """Send one request, stream its answer; never raises for a failed request."""
        out = Outcome(request_id, self.now(), prompt_tokens, output_tokens)
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._stream(out, request_body(self.model, prompt, output_tokens))
        except TimeoutError:
            out.reason = (f"timeout after {self.timeout_s:g} s "
                          f"({len(out.token_times)} tokens received)")
        except httpx.ConnectError as e:
            out.reason = connect_reason(e)
        except httpx.HTTPError as e:
            out.reason = (f"connection lost after {len(out.token_times)} tokens: "
                          f"{type(e).__name__}: {e}")
        if not out.reason and out.produced != output_tokens:
            out.reason = (f"the server returned {out.produced} of {output_tokens} tokens "
                          "(does it honour ignore_eos / min_tokens?)")
        return out

    async def _stream(self, out: Outcome, body: dict[str, Any]) -> None:
        usage: dict[str, Any] | None = None
        async with self.client.stream("POST", self.url, json=body) as resp:
            if resp.status_code != 200:
                out.reason = f"HTTP {resp.status_code}: {_message(await resp.aread())}"
                return
            async for line in resp.aiter_lines():
                t = self.now()
                if not line.startswith("data:"):
                    continue  # blank separators, comments, event names
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    chunk = json.loads(data)
                except json.JSONDecodeError:
                    out.reason = f"malformed stream data: {data[:120]!r}"
                    return
                if not isinstance(chunk, dict):
                    continue
                if "error" in chunk:
                    out.reason = f"stream error: {_message(data.encode())}"
                    return
                choices = chunk.get("choices")
                if isinstance(choices, list) and choices:
                    out.token_times.append(t)
                usage = chunk.get("usage") or usage
        out.produced = len(out.token_times)
        if usage is not None:
            # the server's counts; a malformed one fails this request, not the measurement
            done, prompt = (usage.get("completion_tokens", out.produced),
                            usage.get("prompt_tokens", out.prompt_tokens)) if isinstance(
                usage, dict) else (None, None)
            if not (_count(done) and _count(prompt)):
                out.reason = f"malformed usage: {usage!r}"[:300]
                return
            out.produced = done
            if isinstance(body["prompt"], str):
                out.prompt_tokens = prompt


def _count(value: Any) -> bool:
    """Whether a usage field is a token count: a whole number >= 0 (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(slots=True, frozen=True)
class Listing:
    """What ``GET {base}/models`` answered."""

    models: list[dict[str, Any]]  # the entries of ``data`` (empty when there is no list)
    problem: str = ""  # why there is no model list ("" when there is one)


async def probe(client: httpx.AsyncClient, base_url: str) -> Listing:
    """GET ``{base}/models``: the endpoint's model list.

    Raises MeasureError if the server is unreachable, or if the URL answers 404: then
    ``base_url`` is not an OpenAI-compatible API base (a wrong path, such as a missing
    ``/v1``), and every request would fail the same way.
    """
    url = base_url + "/models"
    try:
        resp = await client.get(url, timeout=10.0)
    except httpx.ConnectError as e:
        raise MeasureError(f"cannot connect to {base_url}: {connect_reason(e)} "
                           "(is the server running on that host and port?)") from None
    except httpx.HTTPError as e:
        raise MeasureError(f"{url}: {type(e).__name__}: {e}") from None
    if resp.status_code == 404:
        raise MeasureError(f"GET {url} answered HTTP 404 (not found): {base_url} is not an "
                           "OpenAI-compatible API base. Give the URL its /v1/models and "
                           "/v1/completions hang from, e.g. http://HOST:PORT/v1")
    if resp.status_code != 200:
        return Listing([], f"GET {url} answered HTTP {resp.status_code}: "
                           f"{_message(resp.content)}")
    try:
        body = resp.json()
    except ValueError:
        body = None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return Listing([], f"GET {url} answered 200 but not an OpenAI model list "
                           f"({resp.text[:80]!r}): is {base_url} an OpenAI-compatible API base?")
    return Listing([m for m in data if isinstance(m, dict)])
