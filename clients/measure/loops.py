"""Sending a workload: open loop at its arrival times, or closed loop from N clients.

- Open loop: request i is sent at ``arrival_s[i]`` on the client's clock whatever the
  server does (``max_concurrency``, if set, caps requests in flight; a request waiting for
  a slot is stamped when it is sent, as in vLLM's ``bench serve``).
- Closed loop: each client sends its requests one after another, the next ``think_s``
  after the previous one ended. Clients and think times come from the workload (a
  closed-loop scenario: ``client_id``, ``think_s``), or ``--concurrency N`` assigns
  request i to client ``i % N`` as the simulator's closed loop does.

Everything runs on one asyncio loop with one HTTP client (connections unbounded unless
``max_concurrency``; environment proxies ignored, so loopback stays loopback).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2 as httpx
import numpy as np
import pandas as pd
from tqdm import tqdm

from clients.measure.client import Endpoint, MeasureError, Outcome, probe
from clients.measure.results import MeasureRun
from clients.measure.workload import PROMPT_FORMATS, MeasureWorkload, prompt_for


@dataclass(slots=True, frozen=True)
class LoopConfig:
    """How to measure (the command line's flags)."""

    endpoint: str  # base URL of the API, e.g. http://127.0.0.1:8000/v1
    model: str | None = None  # None: the first model the endpoint lists
    concurrency: int | None = None  # closed loop with this many clients
    max_concurrency: int | None = None  # open loop: requests in flight at most
    timeout_s: float = 300.0  # per request, from sending to the last token
    prompt_format: str = "ids"  # "ids" (exact lengths) or "text"
    vocab_size: int = 32000  # prompt ids are drawn below this
    max_context: int | None = None  # fit requests to this; None: the server's max_model_len
    seed: int | None = None  # seed of the prompt ids; None: the scenario's (0 for a trace)
    progress: bool = True  # tqdm bar on stderr

    def __post_init__(self) -> None:
        for key in ("concurrency", "max_concurrency", "max_context"):
            value = getattr(self, key)
            if value is not None and value < 1:
                raise MeasureError(f"--{key.replace('_', '-')} = {value}: must be >= 1")
        if not self.timeout_s > 0:
            raise MeasureError(f"--timeout = {self.timeout_s}: must be > 0")
        if self.prompt_format not in PROMPT_FORMATS:
            raise MeasureError(f"--prompt-format = {self.prompt_format!r}: one of "
                               f"{PROMPT_FORMATS}")
        if self.vocab_size < 2:
            raise MeasureError(f"--vocab-size = {self.vocab_size}: must be >= 2")


def api_base(endpoint: str) -> str:
    """``http://host:port`` -> ``http://host:port/v1``; a given path is kept."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise MeasureError(f"--endpoint {endpoint!r}: expected http://HOST:PORT/v1")
    path = parts.path.rstrip("/") or "/v1"
    return f"{parts.scheme}://{parts.netloc}{path}"


def measure(cfg: LoopConfig, load: Callable[[int | None], MeasureWorkload]) -> MeasureRun:
    """Probe the endpoint, ``load(max_context)`` the workload, send it, return the run."""
    return asyncio.run(_measure(cfg, load))


async def _measure(cfg: LoopConfig, load: Callable[[int | None], MeasureWorkload]
                   ) -> MeasureRun:
    base = api_base(cfg.endpoint)
    limits = httpx.Limits(max_connections=cfg.max_concurrency, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=httpx.Timeout(None), limits=limits,
                                 trust_env=False) as client:
        listing = await probe(client, base)
        listed = listing.models
        model = cfg.model or (str(listed[0].get("id")) if listed else None)
        if model is None:
            raise MeasureError(f"{listing.problem or f'GET {base}/models lists no model'}; "
                               "give --model NAME to send requests anyway")
        ids = [str(m.get("id")) for m in listed]
        if listed and model not in ids:
            raise MeasureError(f"--model {model!r}: {base} serves {', '.join(ids)}")
        served = next((m for m in listed if m.get("id") == model), {})
        wl = load(cfg.max_context or served.get("max_model_len"))
        table = wl.table
        seed = wl.seed if cfg.seed is None else cfg.seed
        prompts = [prompt_for(row, cfg.vocab_size, seed, cfg.prompt_format)
                   for _, row in table.iterrows()]
        clients = _clients(cfg, wl)
        bar = tqdm(total=len(table), desc="measuring", unit="req", file=sys.stderr,
                   disable=not cfg.progress)
        ep = Endpoint(client, base, model, cfg.timeout_s, time.perf_counter())
        failed = 0

        async def one(i: int) -> Outcome:
            nonlocal failed
            row = table.iloc[i]
            out = await ep.complete(int(row["request_id"]), prompts[i],
                                    int(row["prompt_tokens"]), int(row["output_tokens"]))
            failed += not out.finished
            bar.update()
            bar.set_postfix(failed=failed, refresh=False)
            return out

        if clients is None:
            outcomes = await _open(ep, table["arrival_s"].to_numpy(float), one,
                                   cfg.max_concurrency)
            mode = "open loop at the workload's arrival times"
        else:
            outcomes = await _closed(clients, _think(table), one)
            mode = f"closed loop, {len(set(clients))} clients"
        bar.close()
        wall_s = ep.now()
        fingerprint = await server_fingerprint(client, base)
    return MeasureRun(outcomes, wl, mode, base, model, cfg, wall_s, fingerprint)


async def server_fingerprint(client: httpx.AsyncClient, base: str) -> dict[str, Any] | None:
    """The serving machine's fingerprint, if the server says (``servesim serve`` does at
    ``/servesim/fingerprint``); None for any other server or answer."""
    root = base.rsplit("/", 1)[0] if base.endswith("/v1") else base
    try:
        answer = await client.get(f"{root}/servesim/fingerprint", timeout=5.0)
        found = answer.json() if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return found if isinstance(found, dict) and "id" in found else None


def _clients(cfg: LoopConfig, wl: MeasureWorkload) -> list[int] | None:
    """Each request's client in a closed loop, or None for an open loop."""
    n, table = len(wl.table), wl.table
    if cfg.concurrency is not None:
        return [i % cfg.concurrency for i in range(n)]
    if wl.concurrency is None and not table["arrival_s"].isna().all():
        return None
    if "client_id" not in table:
        raise MeasureError(f"{wl.source}: the workload has no arrival times; give "
                           "--concurrency N for a closed loop")
    return [int(c) for c in table["client_id"]]


def _think(table: pd.DataFrame) -> list[float]:
    """Think time before each request (0 where the workload has none)."""
    if "think_s" not in table:
        return [0.0] * len(table)
    return [float(t) for t in np.nan_to_num(table["think_s"].to_numpy(float))]


async def _open(ep: Endpoint, arrivals: np.ndarray, one: Callable[[int], Awaitable[Outcome]],
                limit: int | None) -> list[Outcome]:
    gate = asyncio.Semaphore(limit) if limit else None

    async def send(i: int) -> Outcome:
        if gate is None:
            return await one(i)
        async with gate:
            return await one(i)

    tasks = []
    for i in np.argsort(arrivals, kind="stable"):
        delay = float(arrivals[i]) - ep.now()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(send(int(i))))
    return list(await asyncio.gather(*tasks))


async def _closed(clients: list[int], think: list[float],
                  one: Callable[[int], Awaitable[Outcome]]) -> list[Outcome]:
    order: dict[int, list[int]] = {}
    for i, c in enumerate(clients):
        order.setdefault(c, []).append(i)

    async def client(mine: list[int]) -> list[tuple[int, Outcome]]:
        done = []
        for i in mine:
            if think[i] > 0:  # on a client's first request: its start time
                await asyncio.sleep(think[i])
            done.append((i, await one(i)))
        return done

    per_client = await asyncio.gather(*(client(mine) for mine in order.values()))
    pairs = sorted((pair for done in per_client for pair in done), key=lambda p: p[0])
    return [out for _, out in pairs]
