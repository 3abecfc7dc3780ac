"""``servesim serve --model tiny --policy continuous --port 8000``: the OpenAI-compatible server.

Serves /v1/completions and /v1/chat/completions (streaming or not), /v1/models, /health,
/metrics (Prometheus, vLLM's names) and /servesim/records on the real engine, one
background engine thread running the shared batching policy (docs/serving.md). Binds
127.0.0.1 unless ``--host`` says otherwise. torch is imported only when this command runs.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path
from typing import Any

from engine.server.record_keeper import DEFAULT_KEEP_RECORDS
from servesim.serve_socket import bind_listener, network_warning
from simulator.errors import ConfigError
from simulator.policies import POLICIES, make_policy
from simulator.results_manifest import ENGINE, prepare_results


def add_serve_parser(sub: Any) -> None:
    """The ``serve`` subcommand and its flags."""
    p = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API "
                                     "(needs the engine and serve extras)")
    p.add_argument("--model", default="tiny",
                   help="smollm2-135m or a safetensors directory (trained weights), else a "
                        "catalogue name or config.json (random weights, byte-level text); "
                        "default tiny")
    p.add_argument("--policy", default="continuous", choices=sorted(POLICIES),
                   help="batching policy (default continuous)")
    p.add_argument("--set", dest="knobs", action="append", default=[], metavar="KNOB=VALUE",
                   help="a policy knob, e.g. max_num_seqs=64 or policy.max_wait_s=0.05 "
                        "(TOML value), repeatable")
    p.add_argument("--max-num-seqs", type=int, default=None, help="continuous: running at most")
    p.add_argument("--max-num-batched-tokens", type=int, default=None,
                   help="continuous: tokens per step at most")
    p.add_argument("--kv-blocks", type=int, default=2048,
                   help="KV blocks the scheduler may hand out (default 2048). Also the "
                        "memory bound: the KV cache holds at most kv-blocks x block-size "
                        "token positions (running requests x the longest of them); a "
                        "request waits until it fits, one longer than that gets a 400")
    p.add_argument("--block-size", type=int, default=16, help="tokens per KV block (default 16)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--dtype", default=None, choices=("fp32", "bf16", "fp16"),
                   help="weight dtype (default fp32 on CPU, bf16 on CUDA)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads on CPU (default: torch's choice)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1); the server has no "
                        "authentication, so another address warns")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--overwrite", action="store_true",
                   help="let --records-out replace results of another kind in DIR")
    p.add_argument("--records-out", default=None, metavar="DIR",
                   help="write the server's request records, step log, token times and "
                        "summary here on shutdown (records past --keep-records are "
                        "written to DIR/records-parts as they leave memory, then merged)")
    p.add_argument("--keep-records", type=int, default=DEFAULT_KEEP_RECORDS, metavar="N",
                   help="request records kept in memory, with their token times and step "
                        f"log (default {DEFAULT_KEEP_RECORDS:,}; about 0.5 KB each plus 8 "
                        "bytes an output token); older finished ones go to --records-out, "
                        "or are dropped and counted (records_dropped)")
    p.add_argument("--seed", type=int, default=0, help="seed of random weights")


def policy_knobs(args: argparse.Namespace) -> dict[str, Any]:
    """Knobs from ``--set`` and the shortcut flags (the flags win)."""
    knobs: dict[str, Any] = {}
    for item in args.knobs:
        key, sep, text = item.partition("=")
        key = key.strip().removeprefix("policy.")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected KNOB=VALUE, e.g. max_num_seqs=64")
        try:
            knobs[key] = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            knobs[key] = text.strip()
    for key in ("max_num_seqs", "max_num_batched_tokens"):
        if getattr(args, key) is not None:
            knobs[key] = getattr(args, key)
    return knobs


def serve_command(args: argparse.Namespace) -> int:
    """Build the model and the engine, serve until Ctrl-C; 2 on bad input."""
    try:
        import torch
        import uvicorn

        from engine.server.app import create_app
        from engine.server.live import LiveEngine
        from engine.server.model import load_served_model
        from engine.server.record_spill import RecordSpill
    except ImportError as e:
        print(f"servesim: error: `servesim serve` needs the engine and serve extras ({e}): "
              "pip install torch==2.13.0 && pip install -e '.[engine,serve]'", file=sys.stderr)
        return 2
    from servesim.profile_command import check_device

    listener = None
    try:
        policy = make_policy(args.policy, **policy_knobs(args))
        out = Path(args.records_out) if args.records_out else None
        if out is not None:
            RecordSpill(out).check()  # parts of a server that did not shut down
            prepare_results(out, ENGINE, overwrite=args.overwrite)  # writable, same kind
        for flag in ("kv_blocks", "block_size", "keep_records"):
            if getattr(args, flag) < 1:
                raise ConfigError(f"--{flag.replace('_', '-')}={getattr(args, flag)} "
                                  "must be >= 1")
        listener = bind_listener(args.host, args.port)  # before the model: fail fast
        warning = network_warning(args.host)
        if warning is not None:
            print(f"servesim: warning: {warning}", file=sys.stderr)
        device = check_device(args.device)
        dtype = args.dtype or ("fp32" if device.type == "cpu" else "bf16")
        if args.threads is not None:
            torch.set_num_threads(max(1, args.threads))
        em, served = load_served_model(args.model, dtype=dtype, device=str(device),
                                       seed=args.seed)
    except (ValueError, OSError) as e:  # ConfigError is a ValueError
        if listener is not None:
            listener.close()
        print(f"servesim: error: {e}", file=sys.stderr)
        return 2
    engine = LiveEngine(em, policy, args.kv_blocks, block_size=args.block_size,
                        keep_records=args.keep_records, spill_to=out)
    from engine.sweep import machine_fingerprint

    app = create_app(engine, served, records_out=out,
                     fingerprint=machine_fingerprint(em.device, torch.get_num_threads()))
    port = listener.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host  # an IPv6 address
    print(f"servesim: serving {served.name} ({dtype} on {device}, policy {args.policy}, "
          f"{args.kv_blocks} KV blocks of {args.block_size} tokens, context "
          f"{served.max_context}, text: {served.codec.name}) on "
          f"http://{host}:{port}/v1", file=sys.stderr)
    config = uvicorn.Config(app, log_level="warning")
    try:
        uvicorn.Server(config).run(sockets=[listener])
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it shut down on: the way to stop
        pass
    if engine.error is not None:
        print(f"servesim: error: the engine failed: {engine.error!r}", file=sys.stderr)
        return 1
    if out is not None:
        print(f"servesim: wrote the server's records to {out}", file=sys.stderr)
    return 0
