"""Optional: GuideLLM and AIPerf, the real tools, against a real ``servesim serve``.

Each tool found (``$GUIDELLM`` / ``$AIPERF``, else ``guidellm`` / ``aiperf`` on PATH) drives
``servesim serve --model smollm2-135m --records-out DIR`` over the default
``/v1/chat/completions`` with a few requests, with the command lines of
benchmarks/client_tools.sh (smaller). Its result file must load through the one loader
(simulator/measured/) with zero failed requests, and each request's TTFT and E2E must
agree with the server's own records within 20 ms (client overhead: ~5 ms seen on 2 vCPUs,
../shared/clients/README.md). The tools are heavy and not servesim extras: skipped, saying
how to install them, when absent.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from simulator.measured import load_measured, load_measured_runs

MODEL = "smollm2-135m"
REQUESTS, PROMPT, OUTPUT = 5, 32, 8
AGREE_S = 0.020  # client vs server, per request
ENV = {"guidellm": "GUIDELLM", "aiperf": "AIPERF"}
INSTALL = ("install the tools in a venv of their own (they are not servesim extras): "
           "python -m venv ~/bench && ~/bench/bin/pip install torch==<a CPU build> "
           "guidellm==0.8.1 aiperf==0.13.0; then GUIDELLM=~/bench/bin/guidellm "
           "AIPERF=~/bench/bin/aiperf .venv/bin/python -m pytest "
           "tests/test_client_tools_optional.py")


def _tool(name: str) -> str | None:
    """The tool's executable: ``$GUIDELLM`` / ``$AIPERF`` (as benchmarks/client_tools.sh),
    else on PATH."""
    given = os.environ.get(ENV[name])
    return shutil.which(given) if given else shutil.which(name)


def _guidellm(exe: str, url: str, tokenizer: Path) -> list[str]:
    return [exe, "run", "--backend", f"kind=openai_http,target={url},model={MODEL}",
            "--tokenizer", f"kind=hf_auto,model={tokenizer}", "--profile", "kind=constant,rate=2",
            "--constraint", f"kind=max_requests,count={REQUESTS}",
            "--data", f"kind=synthetic_text,prompt_tokens={PROMPT},output_tokens={OUTPUT}",
            "--output", "kind=json,path=./benchmarks.json", "--output", "kind=console",
            "--disable-console-interactive"]


def _aiperf(exe: str, url: str, tokenizer: Path) -> list[str]:
    return [exe, "profile", "--url", url, "--model", MODEL, "--endpoint-type", "chat",
            "--streaming", "--tokenizer", str(tokenizer), "--synthetic-input-tokens-mean",
            str(PROMPT), "--output-tokens-mean", str(OUTPUT), "--request-rate", "2",
            "--request-count", str(REQUESTS), "--extra-inputs", "ignore_eos:true",
            "--extra-inputs", f"min_tokens:{OUTPUT}", "--export-level", "records"]


COMMANDS = {"guidellm": (_guidellm, "benchmarks.json"),
            "aiperf": (_aiperf, "profile_export.jsonl")}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(url: str, server: subprocess.Popen, log: Path, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"servesim serve exited {server.returncode}: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url + "/v1/models", timeout=2).close()
            return
        except OSError:
            time.sleep(1)
    pytest.fail(f"servesim serve did not answer within {timeout_s} s")


def _serve_and_run(name: str, exe: str, tokenizer: Path, tmp: Path) -> tuple[Path, Path]:
    """Serve, run the tool in ``tmp/client``, stop the server (SIGINT: it writes its
    records); (the tool's result file, the server's records folder)."""
    servesim = Path(sys.executable).with_name("servesim")
    port, served, client = _free_port(), tmp / "served", tmp / "client"
    client.mkdir()
    url = f"http://127.0.0.1:{port}"
    log = tmp / "serve.log"
    with log.open("w") as err:
        server = subprocess.Popen([str(servesim), "serve", "--model", MODEL, "--policy",
                                   "continuous", "--threads", "1", "--port", str(port),
                                   "--records-out", str(served)], stdout=err, stderr=err)
    try:
        _wait_for(url, server, log)
        make, result = COMMANDS[name]
        done = subprocess.run(make(exe, url, tokenizer), cwd=client, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=120)
    files = sorted(client.rglob(result))
    assert files, f"{name} wrote no {result} under {client}"
    return files[0], served


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_client_tool_against_servesim_serve(name: str, tmp_path: Path) -> None:
    exe = _tool(name)
    if exe is None:
        pytest.skip(f"{name} not found (set {ENV[name]} or put it on PATH): {INSTALL}")
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from engine.pretrained import cache_root

    tokenizer = Path(os.environ.get("TOK") or cache_root() / MODEL)
    if not (tokenizer / "tokenizer.json").is_file():
        pytest.skip(f"no {MODEL} tokenizer at {tokenizer} (set TOK, or serve {MODEL} once)")
    result, served = _serve_and_run(name, exe, tokenizer, tmp_path)

    run = load_measured(result)
    failed = run.requests[run.requests["status"] != "finished"]
    assert failed.empty, f"{len(failed)} failed: {failed['reason'].tolist()[:3]}"
    assert len(run.requests) == REQUESTS
    [own] = load_measured_runs(served)
    mine = own.finished.sort_values("arrival_s")
    # a request the tool sent before its measured ones (a warm-up) is first in the server's
    mine = mine.iloc[len(mine) - REQUESTS:] if len(mine) >= REQUESTS else mine
    assert len(mine) == REQUESTS, f"the server finished {len(mine)} of {REQUESTS} requests"
    theirs = run.requests.sort_values("arrival_s")
    sent = theirs["arrival_s"].to_numpy()
    got = mine["arrival_s"].to_numpy()
    # same requests in the same order: the gaps between sends agree too
    np.testing.assert_allclose(sent - sent[0], got - got[0], atol=AGREE_S, rtol=0)
    for col in ("ttft_s", "e2e_s"):
        diff = theirs[col].to_numpy() - mine[col].to_numpy()
        worst = int(np.argmax(np.abs(diff)))
        assert np.abs(diff).max() <= AGREE_S, (
            f"{name} {col} differs from the server's by {diff[worst] * 1e3:+.1f} ms at "
            f"request {worst} ({theirs[col].iloc[worst]:.4f} s vs {mine[col].iloc[worst]:.4f} s)")
