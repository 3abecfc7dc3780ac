"""``servesim stacks``: every serving-stack preset and what it sets for one deployment.

A preset (simulator/stack_presets.py) fills a scenario's ``[policy]``, ``[kv]`` and host
costs with a stack's out-of-the-box behaviour at one release; some of it depends on the
model (context length, depth) and the GPU (memory). This prints, for a model on a GPU at a
tensor-parallel size, each preset's policy knobs, KV layout, host costs and step costs (the
cost source a run resolves: the stack's kernel tables, a stand-in's or a prior), as a run
under ``[stack] name = ..., version = ...`` would get them (before the scenario's own
values, which win):

    servesim stacks                                  # every stack, Llama-3.1-8B on an H100
    servesim stacks vllm-v0 --model llama-3-70b --gpu a100-80gb --tp 4 --sources
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from simulator.costs.host import COUNT_TERMS
from simulator.deployment import resolve
from simulator.errors import CapacityError, ConfigError
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model
from simulator.stack_presets import StackPreset
from simulator.stacks import STACKS

DEFAULT_MODEL, DEFAULT_GPU = "llama-3.1-8b", "h100-sxm"


def add_stacks_parser(sub: Any) -> None:
    """The ``stacks`` subcommand's arguments."""
    p = sub.add_parser("stacks", help="list the serving-stack presets ([stack] name and "
                                      "version) and what each sets for a model on a GPU")
    p.add_argument("name", nargs="?", default=None, choices=sorted(STACKS),
                   help="one stack (default: every stack)")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"catalogue model (default {DEFAULT_MODEL})")
    p.add_argument("--gpu", default=DEFAULT_GPU, help=f"catalogue GPU (default {DEFAULT_GPU})")
    p.add_argument("--tp", type=int, default=1, help="GPUs per replica (default 1)")
    p.add_argument("--weight-dtype", default="bf16",
                   help="the checkpoint's weight dtype: bf16, fp16, fp8, int8, int4, mxfp4 "
                        "(default bf16); the KV cache's follows each stack's rule")
    p.add_argument("--sources", action="store_true", help="also print where each value was read")
    p.add_argument("--json", action="store_true", help="print the presets as JSON")


def preset_view(preset: StackPreset, model: str, gpu: str, tp: int,
                weight_dtype: str = "bf16") -> dict[str, Any]:
    """What ``preset`` sets for ``model`` (``weight_dtype`` weights) on ``tp`` x ``gpu``:
    policy, kv (with the KV cache's dtype, the tokens it holds and the weights in memory a
    GPU, GiB: the stack's kernels may pad them), host costs (s), the step
    costs a run resolves (``servesim run``'s ``step costs:`` line), sources; ``latest`` when
    a scenario without a version runs it."""
    spec, hw = get_model(model), get_hardware(gpu)
    policy = preset.policy_for(spec, hw)
    try:
        dep = resolve({"model": {"name": model, "weight_dtype": weight_dtype},
                       "hardware": {"gpu": gpu, "tp": tp},
                       "stack": {"name": preset.stack, "version": preset.version}})
    except (ConfigError, CapacityError) as e:  # this stack cannot serve that checkpoint
        kv_dtype, step_costs, kv_tokens = None, f"none: {e}", None  # there (or it does not
        window = 0  # fit): say why
    else:
        kv_dtype, step_costs, window = dep.kv_dtype, dep.cost_source, dep.window_blocks
        kv_tokens = dep.kv_blocks * dep.block_size  # the cache a run gets: its capacity
        seqs = getattr(dep.policy, "max_num_seqs", None)  # a continuous or chunked policy's
        if "max_num_seqs" in policy and isinstance(seqs, int):  # from that cache, where the
            policy["max_num_seqs"] = seqs  # stack sizes it so (SGLang)
    return {"stack": preset.stack, "version": preset.version,
            "latest": STACKS[preset.stack][-1] is preset,
            "policy": policy,
            "kv": {**preset.kv_for(hw, tp, policy),
                   **({"kv_dtype": kv_dtype, "kv_tokens": kv_tokens} if kv_dtype else {}),
                   # blocks each running request's window layers hold besides its context
                   **({"window_blocks_per_request": window} if window else {}),
                   "weights_gib_per_gpu": round(preset.weight_bytes(spec, hw, tp, weight_dtype)
                                                / tp / 2**30, 2)},
            "host_costs_s": preset.host_costs(spec.num_layers, tp, hw),
            "step_costs": step_costs, "sources": list(preset.sources)}


def _seconds(value: float) -> str:
    return f"{value * 1e3:g} ms" if value >= 1e-3 else f"{value * 1e6:g} us"


def _line(table: dict[str, Any]) -> str:
    return ", ".join(f"{k} {str(v).lower() if isinstance(v, bool) else v}"
                     for k, v in table.items())


def render(views: list[dict[str, Any]], sources: bool) -> str:
    """The presets as text, one block each."""
    out: list[str] = []
    for v in views:
        out.append(f"{v['stack']} {v['version']}" + (" (the default version)"
                                                    if v["latest"] else ""))
        out.append(f"  policy: {_line(v['policy'])}")
        out.append(f"  kv: {_line(v['kv'])}")
        host = ", ".join(f"graph rows {s:g}" if k in COUNT_TERMS else f"{k} {_seconds(s)}"
                         for k, s in v["host_costs_s"].items())
        out.append(f"  host costs: {host or 'none'}")
        out.append(f"  step costs: {v['step_costs']}")
        if sources:
            out += [f"  source: {s}" for s in v["sources"]]
    return "\n".join(out)


def stacks_command(args: argparse.Namespace) -> int:
    """Print the presets for ``args.model`` on ``args.tp`` x ``args.gpu``."""
    if args.tp < 1:
        print(f"servesim: error: --tp {args.tp}: GPUs per replica, >= 1", file=sys.stderr)
        return 2
    try:
        names = [args.name] if args.name else list(STACKS)
        views = [preset_view(p, args.model, args.gpu, args.tp, args.weight_dtype)
                 for name in names for p in STACKS[name]]
    except ConfigError as e:  # an unknown model or GPU, named with the known ones
        print(f"servesim: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(views, indent=2))
        return 0
    print(f"presets for {args.model} ({args.weight_dtype} weights) on {args.tp} x {args.gpu} "
          "(a scenario's own [policy], "
          "[kv] and [cost] overhead values win over these; host costs block the engine's "
          "step, but request_s, which delays each request before the engine sees it, and "
          "the API server's queue, intake_s a request and stream_s a token, one at a time):")
    print(render(views, args.sources))
    return 0
