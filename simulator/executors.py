"""Where scenario points run: in this process, on a local process pool, or on Dask.

Every executor has one method, ``map(fn, items, on_done)``: it runs ``fn`` on each item
and returns the results in the items' order, whatever order they finish in, so results
never depend on the backend or the number of workers (each point's randomness comes from
its own scenario seed, never from the worker). ``on_done(i, result)`` is called in this
process as each result arrives, which is how finished points reach the on-disk cache
before a long run is interrupted.

``fn`` must be a module-level function (it travels to the workers by reference). Dask is
imported only inside :class:`DaskExecutor`, so ``import simulator`` never imports it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from simulator.errors import ConfigError

T = TypeVar("T")
R = TypeVar("R")
OnDone = Callable[[int, Any], None]


class Executor(Protocol):
    """Runs a function over items; results come back in the items' order."""

    name: str  # "serial", "process pool" or "dask <address>", for messages
    workers: int  # how many points may run at once

    def map(self, fn: Callable[[T], R], items: Sequence[T],
            on_done: OnDone | None = None) -> list[R]: ...

    def close(self) -> None: ...


class SerialExecutor:
    """Runs every item in this process, one after another (tests, one-point runs)."""

    name = "serial"
    workers = 1

    def map(self, fn: Callable[[T], R], items: Sequence[T],
            on_done: OnDone | None = None) -> list[R]:
        out = []
        for i, item in enumerate(items):
            out.append(fn(item))
            if on_done is not None:
                on_done(i, out[-1])
        return out

    def close(self) -> None:
        pass


def _gather(futures: list[Any], wait_any: Callable[[list[Any]], Iterator[Any]],
            on_done: OnDone | None) -> list[Any]:
    """Results of ``futures`` in their order, calling ``on_done`` in completion order."""
    index = {id(f): i for i, f in enumerate(futures)}
    out: list[Any] = [None] * len(futures)
    for f in wait_any(futures):
        i = index[id(f)]
        out[i] = f.result()
        if on_done is not None:
            on_done(i, out[i])
    return out


class PoolExecutor:
    """A local ``ProcessPoolExecutor`` kept open across calls (a plan maps many rounds)."""

    name = "process pool"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool = ProcessPoolExecutor(max_workers=workers, initializer=_leave_ctrl_c)

    def map(self, fn: Callable[[T], R], items: Sequence[T],
            on_done: OnDone | None = None) -> list[R]:
        futures: list[Future[R]] = [self._pool.submit(fn, item) for item in items]
        try:
            return _gather(futures, as_completed, on_done)
        except BaseException as e:
            for f in futures:
                f.cancel()
            if isinstance(e, KeyboardInterrupt):
                self._stop()
            raise

    def stop(self) -> None:
        """Ctrl-C in a caller that submits point by point (simulator/capacity/dispatch.py)."""
        self._stop()

    def _stop(self) -> None:
        """Ctrl-C: end the workers now; points already queued to them would otherwise run
        to the end before shutdown returns (finished ones are already in the cache)."""
        workers = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in workers:
            process.terminate()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _leave_ctrl_c() -> None:
    """Pool workers ignore SIGINT: the parent handles Ctrl-C and stops them (one message,
    not a traceback per worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class DaskExecutor:
    """A Dask distributed client: ``address`` of a scheduler, or ``"local"`` for a
    LocalCluster of ``workers`` single-threaded worker processes (``processes=False``
    keeps the workers as threads of this process: quick to start, used by the tests)."""

    def __init__(self, address: str, workers: int, processes: bool = True) -> None:
        try:
            from dask.distributed import Client, LocalCluster
        except ImportError as e:
            raise ConfigError(
                "--dask needs the distributed extra: pip install 'servesim[distributed]'"
            ) from e
        self._cluster = None
        if address == "local":
            self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1,
                                         processes=processes, dashboard_address=None)
            self._client = Client(self._cluster)
        else:
            try:
                self._client = Client(address, timeout="10s")
            except (OSError, TimeoutError) as e:
                raise ConfigError(f"--dask {address!r}: cannot reach the scheduler ({e})") from e
        self.name = f"dask {address}"
        found = len(self._client.scheduler_info().get("workers", {}))
        self.workers = max(1, found)

    def map(self, fn: Callable[[T], R], items: Sequence[T],
            on_done: OnDone | None = None) -> list[R]:
        from dask.distributed import as_completed as dask_completed

        # pure=False: equal items are still separate tasks (no silent sharing of keys)
        futures = [self._client.submit(fn, item, pure=False) for item in items]
        try:
            return _gather(futures, lambda fs: iter(dask_completed(fs)), on_done)
        except BaseException:
            self._client.cancel(futures)
            raise

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


def default_workers() -> int:
    """Local CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@contextmanager
def open_executor(workers: int | None = None, dask: str | None = None,
                  points: int | None = None) -> Iterator[Executor]:
    """The executor a command asked for, closed on exit.

    ``dask``: a scheduler address or ``"local"``; otherwise a process pool of ``workers``
    (default: every local CPU), or this process alone when one worker (or one point) is
    all there is to use.
    """
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers = {workers}: must be >= 1")
    n = workers if workers is not None else default_workers()
    ex: Executor
    if dask:
        ex = DaskExecutor(dask, n)
    elif n == 1 or (points is not None and points <= 1):
        ex = SerialExecutor()
    else:
        ex = PoolExecutor(n if points is None else min(n, points))
    try:
        yield ex
    finally:
        ex.close()
