"""``servesim profile --model tiny --device cpu --out profile.parquet``: measure step times.

Sweeps prefill shapes (batch x prompt length) and decode shapes (batch x context length)
on a real model with random weights and writes the profile table (data contract 2) that
``servesim calibrate`` fits. torch is imported only when this command runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from engine.plan import SweepPlan

_DEFAULTS = SweepPlan()


def _int_list(text: str) -> tuple[int, ...]:
    """``"1,2,4"`` -> (1, 2, 4); argparse reports a ValueError as a bad value."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of ints") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must list ints >= 1")
    return values


def add_profile_parser(sub: Any) -> None:
    """The ``profile`` subcommand and its flags."""
    p = sub.add_parser("profile", help="measure prefill/decode step times on a real model "
                                       "(needs the engine extra: torch, transformers)")
    p.add_argument("--model", default="tiny",
                   help="catalogue name or config.json path (random weights; default tiny)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--dtype", default=None, choices=("fp32", "bf16", "fp16"),
                   help="weight dtype (default fp32 on CPU, bf16 on CUDA)")
    p.add_argument("--out", required=True, metavar="PROFILE.parquet", help="table to write")
    for flag, what in (("prefill-batches", "prefill rows"), ("prompt-lens", "prompt tokens"),
                       ("decode-batches", "decode rows"), ("context-lens", "cached tokens"),
                       ("mixed-batches", "decode rows beside a prefill chunk (mixed steps)"),
                       ("mixed-chunks", "prefill chunk tokens of mixed steps")):
        default = getattr(_DEFAULTS, flag.replace("-", "_"))
        p.add_argument(f"--{flag}", type=_int_list, default=default, metavar="N,N",
                       help=f"{what} to sweep (default {','.join(map(str, default))})")
    p.add_argument("--mixed-context", type=int, default=_DEFAULTS.mixed_context,
                   help="cached tokens of each decode row in a mixed step "
                        f"(default {_DEFAULTS.mixed_context})")
    p.add_argument("--repeats", type=int, default=_DEFAULTS.repeats,
                   help=f"timed runs per shape, their mean kept (default {_DEFAULTS.repeats})")
    p.add_argument("--warmup", type=int, default=_DEFAULTS.warmup,
                   help=f"untimed runs per new shape (default {_DEFAULTS.warmup})")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: stable timings on a shared CPU)")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and token ids")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")


def engine_missing(command: str) -> bool:
    """True (having said how to install it) when torch, the engine extra, is absent."""
    try:
        import torch  # noqa: F401  (the engine extra)
    except ImportError:
        print(f"servesim: error: `servesim {command}` needs the engine extra: "
              "pip install torch==2.13.0 && pip install -e '.[engine]'", file=sys.stderr)
        return True
    return False


def profile_command(args: argparse.Namespace) -> int:
    """Build the model, run the sweep with a progress bar, write the table; 2 on bad input."""
    if engine_missing("profile"):
        return 2
    import pandas as pd
    import torch
    from tqdm import tqdm

    from engine.models import build_model
    from engine.sweep import RunLoad, engine_version, run_metadata, run_sweep
    from simulator.profile_table import ProfileTable, write_profile_table
    from simulator.results_folder import check_writable

    try:
        device = check_device(args.device)
        dtype = args.dtype or ("fp32" if device.type == "cpu" else "bf16")
        if args.threads < 1:
            raise ValueError(f"--threads={args.threads} must be >= 1")
        check_writable(Path(args.out).parent)  # before the minutes of measuring
        plan = SweepPlan(args.prefill_batches, args.prompt_lens, args.decode_batches,
                         args.context_lens, args.mixed_batches, args.mixed_chunks,
                         args.mixed_context, args.repeats, args.warmup, args.seed)
        torch.set_num_threads(args.threads)
        em = build_model(args.model, dtype=dtype, device=device, seed=args.seed)
        load = RunLoad()
        shapes = plan.shapes()
        runs = len(shapes) * (plan.warmup + plan.repeats)
        with tqdm(total=runs, desc=f"profile {em.spec.name}", unit="run", file=sys.stderr,
                  disable=args.no_progress) as bar:
            rows = list(run_sweep(em, plan, progress=bar.update))
        load.finish()
        meta = run_metadata(em, args.threads, load, plan, engine_version())
        out = Path(args.out)
        write_profile_table(ProfileTable(pd.DataFrame(rows), meta), out)
    except (ValueError, OSError, RuntimeError) as e:
        print(f"servesim: error: {e}", file=sys.stderr)
        return 2
    spread = max(r["time_spread"] for r in rows)
    print(f"{meta['device']} ({meta['device_name']}) / {em.spec.name} / {dtype} / "
          f"{args.threads} thread(s): {len(rows)} shapes, {plan.repeats} repeats each, "
          f"worst repeat spread {spread:.1%}")
    print(f"load average before {meta['load']['before']}, after {meta['load']['after']}")
    print(f"wrote {out}")
    return 0


def check_device(name: str) -> Any:
    """A torch.device that exists here, or a ValueError saying why not."""
    import torch

    try:
        device = torch.device(name)
    except RuntimeError as e:
        raise ValueError(f"--device={name!r} is not a torch device ({e})") from e
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device={name!r}: CUDA is not available on this machine")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"--device={name!r} must be cpu or cuda[:N]")
    return device
