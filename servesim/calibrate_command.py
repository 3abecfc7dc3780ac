"""``servesim calibrate PROFILE.parquet --out cost.json``: fit a cost profile from a table.

Fits the piecewise form by default (``--form linear`` for the plain one). Prints the
held-out fit quality, writes the cost-profile JSON (data contract 3) and a
residual plot PNG beside it (``cost.json`` -> ``cost.residuals.png``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from servesim.calibrate_from_run import add_from_run_arguments, from_run_command
from simulator.errors import ConfigError


def add_calibrate_parser(sub: Any) -> None:
    """The ``calibrate`` subcommand and its flags."""
    p = sub.add_parser("calibrate", help="fit a cost profile (JSON) from a profile table, "
                                         "from this machine (--here) or from a measured run "
                                         "(--from-run)")
    p.add_argument("table", metavar="PROFILE.parquet", nargs="?", default=None,
                   help="profile table (data contract 2)")
    p.add_argument("--here", action="store_true",
                   help="profile this machine now (about a minute for tiny), fit, and store "
                        "the profile in the per-user cache where later runs find it")
    p.add_argument("--threads", type=int, default=1,
                   help="--here: torch threads the engine will run with (default 1)")
    p.add_argument("--device", default="cpu", help="--here: cpu or cuda[:N] (default cpu)")
    p.add_argument("--repeats", type=int, default=None,
                   help="--here: timed runs per shape (default 8)")
    p.add_argument("--out", default=None, metavar="COST.json",
                   help="cost profile to write (required with a table; with --here, a copy)")
    p.add_argument("--model", default=None,
                   help="model name (default: the table's metadata; --here: tiny)")
    p.add_argument("--hardware", default=None,
                   help="hardware name, e.g. h100-sxm (default: the table's device)")
    p.add_argument("--tp", type=int, default=None, help="tensor-parallel degree (default: table)")
    p.add_argument("--dtype", default=None, help="weight dtype (default: the table's dtype)")
    p.add_argument("--kv-dtype", default=None,
                   help="KV-cache dtype (default: table, else the weight dtype if 16-bit or "
                        "fp8, else bf16)")
    p.add_argument("--folds", type=int, default=5, help="k of the held-out k-fold (default 5)")
    p.add_argument("--form", choices=("piecewise", "linear"), default="piecewise",
                   help="cost-model form to fit (default piecewise: a fixed cost per step "
                        "kind and two knees in tokens; see docs/calibration.md)")
    p.add_argument("--rows-factor", action="store_true",
                   help="also fit a factor per decode row count (kernel or CUDA-graph steps "
                        "in the batch size; needs every row count served in the table)")
    p.add_argument("--no-plot", action="store_true", help="skip the residual plot")
    add_from_run_arguments(p)


def _deployment(args: argparse.Namespace, meta: dict[str, Any]) -> dict[str, Any]:
    """hardware, model, weight_dtype, kv_dtype, tp: flags first, then table metadata."""
    chosen = {
        "hardware": args.hardware or meta.get("device"),
        "model": args.model or meta.get("model"),
        "weight_dtype": args.dtype or meta.get("dtype"),
        "tp": args.tp if args.tp is not None else meta.get("tp", 1),
    }
    missing = [k for k, v in chosen.items() if v in (None, "")]
    if missing:
        flags = {"hardware": "--hardware", "model": "--model", "weight_dtype": "--dtype",
                 "tp": "--tp"}
        raise ConfigError(f"{args.table}: the table's metadata does not say "
                          f"{', '.join(missing)}; pass {', '.join(flags[k] for k in missing)}")
    chosen["kv_dtype"] = args.kv_dtype or meta.get("kv_dtype")
    names = {"hardware": ("device", "--hardware"), "model": ("model", "--model"),
             "weight_dtype": ("dtype", "--dtype"), "kv_dtype": ("kv_dtype", "--kv-dtype")}
    for key, (field, flag) in names.items():  # the metadata is the file's: name it
        if not isinstance(chosen[key], str | None):
            raise ConfigError(f"{args.table}: metadata {field}={chosen[key]!r} must be a "
                              f"string (or pass {flag})")
    weight = chosen["weight_dtype"].lower()
    default_kv = weight if weight in ("fp16", "bf16", "fp8") else "bf16"
    chosen["kv_dtype"] = chosen["kv_dtype"] or default_kv
    chosen["weight_dtype"] = weight
    return chosen


def calibrate_command(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    """Fit, print the fit quality, write JSON and PNG; 2 on bad input."""
    from calibrate.fit import fit_profile
    from calibrate.provenance import table_provenance
    from simulator.costs.profile import save_profile
    from simulator.profile_table import millisecond_warning, read_profile_table

    if args.here and args.from_run:
        print("servesim: error: --here measures this machine's engine; --from-run fits a "
              "measured run: one at a time", file=sys.stderr)
        return 2
    if args.here:
        return here_command(args)
    if args.from_run:
        if args.table is not None or args.out is None:
            print("servesim: error: --from-run takes run folders, not a profile table, and "
                  "needs --out PROFILE.json", file=sys.stderr)
            return 2
        return from_run_command(args, argv)
    try:
        if args.table is None or args.out is None:
            raise ConfigError("give a profile table and --out, or --here, or --from-run DIR")
        if args.folds < 2:
            raise ConfigError(f"--folds={args.folds} must be >= 2")
        table = read_profile_table(args.table)
        ms = millisecond_warning(table.steps, str(args.table))
        if ms:
            print(f"servesim: warning: {ms}", file=sys.stderr)
        dep = _deployment(args, table.metadata)
        command = "servesim " + shlex.join(argv if argv is not None else sys.argv[1:])
        provenance = table_provenance(table, args.table, command)
        profile, report = fit_profile(table.steps, provenance=provenance, folds=args.folds,
                                      source=str(args.table), form=args.form,
                                      rows_factor=args.rows_factor, **dep)
        out = Path(args.out)
        save_profile(profile, out)
    except (ValueError, OSError) as e:
        print(f"servesim: error: {e}", file=sys.stderr)
        return 2
    print(f"{dep['hardware']} / {dep['model']} / {dep['weight_dtype']} / tp {dep['tp']}")
    print(report.summary())
    print(f"wrote {out}")
    if not args.no_plot:
        from calibrate.plot import residual_plot

        png = residual_plot(table.steps, report.heldout_pred_s, out.with_suffix(".residuals.png"),
                            f"{out.name}: {report.form} form, held-out residuals, mean APE "
                            f"{report.mape:.2%}")
        print(f"wrote {png}")
    return 0


def here_command(args: argparse.Namespace) -> int:
    """``--here``: profile and fit this machine, store in the cache (and at --out)."""
    from servesim.profile_command import engine_missing

    if engine_missing("calibrate --here"):
        return 2
    import shutil

    from tqdm import tqdm

    from calibrate.here import HERE_REPEATS, calibrate_here
    from engine.sweep import machine_fingerprint
    from servesim.profile_command import check_device
    from simulator.fingerprint import short

    model, dtype = args.model or "tiny", args.dtype or "fp32"
    repeats = args.repeats or HERE_REPEATS
    try:
        if args.table is not None:
            raise ConfigError("--here measures this machine; it takes no profile table")
        if args.threads < 1 or repeats < 1:
            raise ConfigError(f"--threads={args.threads} and --repeats={repeats} must be >= 1")
        fp = machine_fingerprint(check_device(args.device), args.threads)
        print(f"calibrating this machine: {short(fp)}", file=sys.stderr)
        with tqdm(desc=f"calibrate --here {model}", unit="run", file=sys.stderr) as bar:
            result = calibrate_here(model, dtype, args.threads, args.device, repeats,
                                    progress=bar.update)
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(result.profile_path, args.out)
    except (ValueError, OSError, RuntimeError) as e:
        print(f"servesim: error: {e}", file=sys.stderr)
        return 2
    print(f"{short(fp)}: {result.seconds:.0f} s")
    print(result.report.summary())
    h = result.host
    print(f"  serving-loop host work: {h.step_s * 1e3:.3f} ms/step, {h.admit_s * 1e3:.3f} ms/"
          f"admission, {h.finish_s * 1e3:.3f} ms/finish, {h.seq_s * 1e3:.4f} ms/decode row "
          f"({h.num_steps} steps, median residual {h.residual_ms:.3f} ms)")
    print(f"  check: the loop's own served steps / the fit = {result.served_scale:.3f} "
          "(1 = no drift between profiling and serving)")
    print(f"wrote {result.profile_path} (table: {result.table_path.name})")
    if args.out:
        print(f"wrote {args.out}")
    return 0
