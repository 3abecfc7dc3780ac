"""Measured Llama-2-70B cost profiles from splitwise-sim's GPU performance table.

    python -m calibrate.splitwise [--traces DIR] [--out DIR] [--date YYYY-MM-DD]

Source: Mutinifni/splitwise-sim ``data/perf_model.csv`` at 8f99e7dc (MIT), read in place
from ``<traces>/splitwise_sim_perf_model.csv`` (never copied into this repository). Each
configuration (prompt size p, batch size b, output tokens n) was run 5 times; we take the
median of each timing per configuration. One configuration gives two profile-table rows:

- prefill: P = b*p, A = b*p*(p/2) (one chunk of p tokens per request, empty cache),
  D = C = 0, admitted = b, time = prompt_time (whole-batch prefill);
- decode: D = b, C = b*(p + n_eff/2), time = token_time (one decode iteration). token_time
  is a mean over the whole run, so C is the run's *mean* context, not one step's;
  n_eff = min(n, (e2e_time - prompt_time) / token_time) is the tokens actually generated
  (runs asked for 1,024+ tokens stop near 620, and e2e_time shows it).

Rows at batch size 64 are dropped: at TP 2 their prompt_time is below batch 32's and their
e2e_time is 10x longer (the traces README flags them), so they are not clean step times.
The power-capped ``h100-80gb-pcap`` runs and BLOOM-176B (not in our model catalogue) are
not fitted. The form is "piecewise" (calibrate/fit.py; docs/calibration.md says why).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from calibrate.fit import FitReport, fit_profile
from simulator.costs.profile import PROFILES_DIR, CostProfile, profile_file_name, save_profile

CSV_NAME = "splitwise_sim_perf_model.csv"
DEFAULT_TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
HARDWARE = {"a100-80gb": "a100-80gb", "h100-80gb": "h100-sxm"}  # theirs -> our catalogue
MODELS = {"llama2-70b": "llama-2-70b"}
TPS = (2, 4, 8)
DTYPE = "fp16"  # configs/model_repo/sizes/llama2-70b-fp16.yaml: dtype_size 2, fp16
DROP_BATCH = 64
CONFIG = ["model", "hardware", "tensor_parallel", "prompt_size", "batch_size", "token_size"]
TIMES = ["prompt_time", "token_time", "e2e_time"]  # milliseconds
FORM = "piecewise"
SOURCE = ("measured: Mutinifni/splitwise-sim data/perf_model.csv (commit 8f99e7dc, MIT "
          "license)")


def load_medians(path: Path) -> tuple[pd.DataFrame, int]:
    """Median timings per configuration, and how many batch-64 raw rows were dropped."""
    raw = pd.read_csv(path)
    dropped = int((raw["batch_size"] == DROP_BATCH).sum())
    kept = raw[raw["batch_size"] != DROP_BATCH]
    medians = kept.groupby(CONFIG, as_index=False)[TIMES].median()
    medians["repeats"] = kept.groupby(CONFIG).size().to_numpy()
    return medians, dropped


def profile_rows(medians: pd.DataFrame) -> pd.DataFrame:
    """Profile-table rows (contract 2) for one deployment's configurations, seconds."""
    b = medians["batch_size"].to_numpy(np.int64)
    p = medians["prompt_size"].to_numpy(np.int64)
    n = medians["token_size"].to_numpy(np.float64)
    generated = (medians["e2e_time"] - medians["prompt_time"]) / medians["token_time"]
    n_eff = np.minimum(n, np.round(generated.to_numpy(np.float64)))
    zero = np.zeros_like(b)
    prefill = pd.DataFrame({
        "phase": "prefill", "num_prefill_tokens": b * p, "num_decode_seqs": zero,
        "prefill_attn_work": b * p * (p / 2), "decode_context_tokens": zero,
        "batch_size": b, "time_s": medians["prompt_time"].to_numpy() / 1e3,
        "num_admitted": b, "num_finished": zero,
    })
    decode = pd.DataFrame({
        "phase": "decode", "num_prefill_tokens": zero, "num_decode_seqs": b,
        "prefill_attn_work": np.zeros(len(b)),
        "decode_context_tokens": np.round(b * (p + n_eff / 2)).astype(np.int64),
        "batch_size": b, "time_s": medians["token_time"].to_numpy() / 1e3,
        "num_admitted": zero, "num_finished": zero,
    })
    return pd.concat([prefill, decode], ignore_index=True)


def deployment_tables(csv: Path) -> tuple[dict[tuple[str, str, int], pd.DataFrame], int]:
    """Profile tables keyed by (our hardware, our model, tp); batch-64 raw rows dropped."""
    medians, dropped = load_medians(csv)
    tables = {}
    for (model, hw, tp), group in medians.groupby(["model", "hardware", "tensor_parallel"]):
        if hw in HARDWARE and model in MODELS and tp in TPS:
            tables[(HARDWARE[hw], MODELS[model], int(tp))] = profile_rows(group)
    return tables, dropped


def fit_all(csv: Path, date: str) -> list[tuple[CostProfile, FitReport]]:
    """Fit every shipped deployment from the CSV."""
    tables, _ = deployment_tables(csv)
    theirs = {v: k for k, v in HARDWARE.items()}
    out = []
    for (hw, model, tp), steps in sorted(tables.items()):
        provenance = {
            "source": SOURCE,
            "measured_by": f"the splitwise-sim authors (Patel et al., Splitwise, ISCA 2024) on "
                           f"{theirs[hw]} x{tp}, tensor parallel {tp}",
            "date": date,
            "software": f"fitted by servesim (calibrate/fit.py, {FORM} form, NNLS, relative "
                        "error)",
            "notes": "fitted with: python -m calibrate.splitwise; medians of 5 repeats; "
                     "batch-64 rows dropped; decode C is the run's mean context "
                     "b*(p + n_eff/2); see docs/calibration.md",
        }
        out.append(fit_profile(steps, hardware=hw, model=model, weight_dtype=DTYPE,
                               kv_dtype=DTYPE, tp=tp, provenance=provenance, form=FORM,
                               source=f"{csv.name} {theirs[hw]} tp{tp}"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES,
                        help=f"folder holding {CSV_NAME} (default: {DEFAULT_TRACES})")
    parser.add_argument("--out", type=Path, default=PROFILES_DIR, help="profiles folder")
    parser.add_argument("--date", default=dt.date.today().isoformat(), help="provenance date")
    args = parser.parse_args(argv)
    csv = args.traces / CSV_NAME
    if not csv.is_file():
        print(f"calibrate.splitwise: error: {csv} not found", file=sys.stderr)
        return 2
    _, dropped = load_medians(csv)
    print(f"{csv}: dropped {dropped} raw rows at batch size {DROP_BATCH}")
    print(f"{'profile':42s} {'pts':>4s} {'MAPE':>7s} {'max':>7s} {'prefill':>8s} "
          f"{'decode':>7s} {'in-smpl':>7s} {'knees':>11s}")
    for profile, report in fit_all(csv, args.date):
        name = profile_file_name(profile.hardware, profile.model, profile.weight_dtype,
                                 profile.tp)
        save_profile(profile, args.out / name)
        q, c = report.by_phase, report.coefficients
        knees = "/".join(f"{c[k]:g}" for k in ("knee1_tokens", "knee2_tokens") if c[k] > 0)
        print(f"{name:42s} {report.n_points:4d} {report.mape:7.2%} {report.max_ape:7.2%} "
              f"{q['prefill']['mape']:8.2%} {q['decode']['mape']:7.2%} "
              f"{report.insample_mape:7.2%} {knees:>11s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
