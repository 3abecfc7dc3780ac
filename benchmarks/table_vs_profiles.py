"""A measured profile table's steps priced by other cost profiles: measured / priced per step.

    python benchmarks/table_vs_profiles.py TABLE.parquet PROFILE.json [PROFILE.json ...]
        [--min-prefill-tokens N]

Each profile prices the table's step shapes with its fitted form (calibrate/fit.py
``predict``, the function its fit used); prints each step's measured median and every
profile's price, then per profile the range of measured / priced over the steps shown. The
first lent H200's reference-engine table against the AIConfigurator compositions
(docs/gpu-profiles.md, "The first lent GPU"):

    python benchmarks/table_vs_profiles.py \\
        benchmarks/gpu_runs/h200-2026-12-04/h200__llama-3.1-8b__bf16.parquet \\
        simulator/profiles/h200__llama-3.1-8b__bf16__tp1.json \\
        simulator/profiles/stacks/vllm/h200__llama-3.1-8b__bf16__tp1.json \\
        --min-prefill-tokens 4096

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from calibrate.fit import predict  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("table", type=Path)
    ap.add_argument("profiles", type=Path, nargs="+")
    ap.add_argument("--min-prefill-tokens", type=int, default=0,
                    help="only prefill steps of at least this many tokens (0: every step)")
    args = ap.parse_args()
    steps = pd.read_parquet(args.table)
    if args.min_prefill_tokens:
        steps = steps[(steps["phase"] == "prefill")
                      & (steps["num_prefill_tokens"] >= args.min_prefill_tokens)]
    steps = steps.reset_index(drop=True)
    measured = steps["median_time_s"].to_numpy() * 1e3
    priced = {}
    for path in args.profiles:
        p = json.loads(path.read_text())
        priced[path] = predict(p["form"], p["coefficients"], steps) * 1e3
    names = [f"{p.parent.name}/{p.stem}" for p in args.profiles]
    print(f"{'step':<34}{'measured ms':>12}" + "".join(f"{n[-28:]:>30}" for n in names))
    for i, row in steps.iterrows():
        shape = (f"{row.phase} P={row.num_prefill_tokens} D={row.num_decode_seqs} "
                 f"ctx={row.decode_context_tokens}")
        print(f"{shape:<34}{measured[i]:>12.1f}"
              + "".join(f"{priced[p][i]:>30.1f}" for p in args.profiles))
    for path, name in zip(args.profiles, names, strict=True):
        ratio = measured / np.asarray(priced[path])
        print(f"measured / {name}: {ratio.min():.2f}-{ratio.max():.2f} "
              f"(median {np.median(ratio):.2f}, {len(ratio)} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
