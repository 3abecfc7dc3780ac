"""Mixtral-8x7B TP2 steps: the roofline prior against AIConfigurator's measured MoE tables.

    python benchmarks/moe_table_check.py [--backend trtllm|vllm|sglang]

Written when Mixtral ran on the roofline prior; calibrate/aic_moe.py now composes its
profiles the same way (A100 keeps the prior: no Mixtral rows). This prints, for a few step
shapes, the prior's step time beside a step composed from AIConfigurator 0.12.0's
tables: the dense ops (QKV, attention, projection, logits, all-reduce) as
calibrate/aiconfigurator.py composes them,
with the dense MLP's three ops replaced by ``num_layers`` x the ``moe`` op of
``moe/<backend>/<version>/moe_perf.parquet`` (hidden 4,096, MLP 14,336, 8 experts, top 2,
moe_tp 2, ep 1, balanced routing, at the step's token count). Needs the aiconfigurator
extra. Diagnostic only: it writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from calibrate import aiconfigurator as aic  # noqa: E402
from calibrate.aic_backends import BACKENDS, systems  # noqa: E402
from calibrate.aic_tables import SystemTables  # noqa: E402
from simulator.costs.roofline import RooflineCost  # noqa: E402
from simulator.shapes import StepShape  # noqa: E402
from simulator.specs.hardware import get_hardware  # noqa: E402
from simulator.specs.models import MODELS  # noqa: E402

MLP_OPS = ("gate_ffn1_gemm", "act_gate", "ffn2_gemm")
TABLE_DTYPE = {"bf16": "bfloat16", "fp8": "fp8"}
# (label, prefill chunks (new tokens, cached prefix), decode contexts, tokens in the step)
SHAPES = [("prefill 2048", [(2048, 0)], [], 2048),
          ("prefill 8 x 1024", [(1024, 0)] * 8, [], 8192),
          ("decode b64 ctx 2k", [], [2048] * 64, 64),
          ("decode b256 ctx 2k", [], [2048] * 256, 256)]


def moe_curve(root: Path, system: str, version: str, backend: str, dtype: str) -> pd.Series:
    """Milliseconds per MoE layer by token count, Mixtral-8x7B's shapes at TP 2."""
    d = pd.read_parquet(root / "data" / system / "moe" / backend / version / "moe_perf.parquet")
    rows = d[(d.hidden_size == 4096) & (d.inter_size == 14336) & (d.topk == 2)
             & (d.num_experts == 8) & (d.moe_tp_size == 2) & (d.moe_ep_size == 1)
             & (d.moe_dtype == TABLE_DTYPE[dtype]) & (d.distribution == "balanced")]
    if rows.empty:
        return pd.Series(dtype=float)
    rows = rows[rows.kernel_source == rows.kernel_source.iloc[0]]
    return rows.set_index("num_tokens").latency


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=BACKENDS, default="trtllm")
    args = parser.parse_args(argv)
    root = aic.find_data_root()
    if root is None:
        print(f"needs the aiconfigurator extra: {aic.EXTRA_HINT}", file=sys.stderr)
        return 2
    model = MODELS["mixtral-8x7b"]
    for hw, (system, version) in systems(args.backend).items():
        tables = SystemTables(root, system, version, args.backend)
        for dtype in ("bf16", "fp8"):
            curve = moe_curve(root, system, version, args.backend, dtype)
            if curve.empty:
                continue
            composer = aic.Composer(tables, model, dtype, 2)
            prior = RooflineCost(model, get_hardware(hw), 2, dtype, dtype)
            print(f"{hw} {dtype} ({args.backend} {version})")
            for label, chunks, contexts, tokens in SHAPES:
                if tokens not in curve.index:
                    continue
                ops = composer.step_ops(chunks, contexts)
                moe = model.num_layers * float(curve.loc[tokens]) / 1e3
                composed = sum(v for k, v in ops.items() if k not in MLP_OPS) + moe
                shape = (StepShape(num_prefill_tokens=sum(c for c, _ in chunks),
                                   prefill_attn_work=sum(c * (p + c / 2) for c, p in chunks))
                         if chunks else StepShape(num_decode_seqs=len(contexts),
                                                  decode_context_tokens=sum(contexts)))
                mine = prior.step_time(shape)
                print(f"  {label:20s} tables {composed * 1e3:8.2f} ms  prior {mine * 1e3:8.2f} ms"
                      f"  prior/tables {mine / composed - 1:+6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
