"""Ctrl-C (issue 11, item 8): one line and exit status 130 from any command, and a process
pool that stops at once instead of running the points already queued to it."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from servesim.cli import main
from simulator.executors import PoolExecutor


def _nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _sigint_handler(_: int) -> bool:
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def test_ctrl_c_is_one_line_and_status_130(tmp_path: Path, monkeypatch, capsys):
    import servesim.cli

    def interrupted(args):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(servesim.cli, "run_command", interrupted)
    assert main(["run", str(tmp_path / "s.toml")]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "servesim: interrupted" and "Traceback" not in err


def test_pool_workers_leave_ctrl_c_to_the_parent():
    ex = PoolExecutor(2)
    try:
        assert ex.map(_sigint_handler, [0, 1]) == [True, True]
    finally:
        ex.close()


def test_an_interrupted_pool_stops_without_running_its_queued_points():
    ex = PoolExecutor(2)
    done: list[float] = []

    def on_done(i: int, result: float) -> None:
        done.append(result)
        raise KeyboardInterrupt  # Ctrl-C as the first point finishes

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        try:
            ex.map(_nap, [0.0, 30.0, 30.0, 30.0], on_done=on_done)
        finally:
            ex.close()
    assert done == [0.0]
    assert time.monotonic() - start < 10  # not the 30 s naps still queued or running
