"""``servesim calibrate PROFILE.parquet --out cost.json``: fit a cost profile from a table.

Fits the piecewise form by default (``--form linear`` for the plain one). Prints the
held-out fit quality, writes the cost-profile JSON (data contract 3) and a
residual plot PNG beside it (``cost.json`` -> ``cost.residuals.png``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
from pathlib import Path
from typing import Any

from simulator.errors import ConfigError


def add_calibrate_parser(sub: Any) -> None:
    """The ``calibrate`` subcommand and its flags."""
    p = sub.add_parser("calibrate", help="fit a cost profile (JSON) from a profile table")
    p.add_argument("table", metavar="PROFILE.parquet", help="profile table (data contract 2)")
    p.add_argument("--out", required=True, metavar="COST.json", help="cost profile to write")
    p.add_argument("--model", default=None, help="model name (default: the table's metadata)")
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
        flags = {"hardware": "--hardware", "model": "--model", "weight_dtype": "--dtype"}
        raise ConfigError(f"{args.table}: the table's metadata does not say "
                          f"{', '.join(missing)}; pass {', '.join(flags[k] for k in missing)}")
    weight = str(chosen["weight_dtype"]).lower()
    default_kv = weight if weight in ("fp16", "bf16", "fp8") else "bf16"
    chosen["kv_dtype"] = args.kv_dtype or meta.get("kv_dtype") or default_kv
    chosen["weight_dtype"] = weight
    return chosen


def calibrate_command(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    """Fit, print the fit quality, write JSON and PNG; 2 on bad input."""
    from calibrate.fit import fit_profile
    from simulator.costs.profile import save_profile
    from simulator.profile_table import read_profile_table

    try:
        if args.folds < 2:
            raise ConfigError(f"--folds={args.folds} must be >= 2")
        table = read_profile_table(args.table)
        dep = _deployment(args, table.metadata)
        command = "servesim " + shlex.join(argv if argv is not None else sys.argv[1:])
        provenance = {
            "source": f"profile table {Path(args.table).name}"
                      + (f" ({table.metadata['source']})" if "source" in table.metadata else ""),
            "measured_by": table.metadata.get("engine_version", "not stated in the table"),
            "date": dt.date.today().isoformat(),
            "software": ", ".join(f"{k} {table.metadata[k]}" for k in
                                  ("engine_version", "torch_version", "transformers_version",
                                   "threads") if k in table.metadata)
                        or "not stated in the table",
            "notes": f"fitted by: {command}"
                     + (f"; load average (1/5/15 min) {table.metadata['load']}"
                        if "load" in table.metadata else ""),
        }
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
