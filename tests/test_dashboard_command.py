"""``servesim dashboard`` stops with its server: a SIGTERM leaves no Streamlit serving the
port (issue 11: it used to start Streamlit as a child and leave it as an orphan)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _serving(port: int) -> list[int]:
    """Pids of processes whose command line serves ``port`` (``--server.port <port>``)."""
    needle = f"--server.port\0{port}\0".encode()
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to find the server")
def test_sigterm_stops_the_server(tmp_path: Path) -> None:
    port = _free_port()
    code = ("from servesim.cli import main; "
            f"raise SystemExit(main(['dashboard', '--port', '{port}']))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while not _open(port) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.25)
        assert _open(port), "the dashboard did not open its port in 90 s"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while (_open(port) or _serving(port)) and time.monotonic() < deadline:
            time.sleep(0.25)
        assert not _open(port) and _serving(port) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _serving(port):  # an orphan from a failing run: this test started it
            os.kill(pid, signal.SIGKILL)
