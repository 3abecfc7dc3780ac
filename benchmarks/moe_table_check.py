"""Mixtral-8x7B steps: the roofline prior against AIConfigurator's measured MoE tables.

    python benchmarks/moe_table_check.py [--backend trtllm|vllm|sglang]
    python benchmarks/moe_table_check.py --routing
    python benchmarks/moe_table_check.py --reference mixtral-8x22b [--backend vllm]

Written when Mixtral ran on the roofline prior; calibrate/aic_moe.py now composes its
profiles the same way. This prints, for a few step shapes at TP 2, the prior's step time
(RooflineCost's default knobs) beside a step composed from AIConfigurator 0.12.0's
tables: the dense ops (QKV, attention, projection, logits, all-reduce) as
calibrate/aiconfigurator.py composes them, with the dense MLP's three ops replaced by
``num_layers`` x :func:`calibrate.aic_moe.moe_curve` at the step's token count (balanced
routing; A100's TensorRT-LLM and vLLM tables derive it from power-law rows).

``--routing`` checks that derivation: the derived A100 curves of TensorRT-LLM and vLLM
beside SGLang's A100 table, which collected balanced routing itself, at tp 2, 4 and 8.
``--reference MODEL`` prints the reference the derivation reads: H100's balanced /
power-law latency for MODEL at each moe_tp its table holds, at 1 and 2,048 tokens (one
token reads the top-k experts whatever the routing, so a ratio far from 1 there marks rows
that are not comparable: calibrate/aic_moe.py ``ONE_TOKEN_BAND``).
Needs the aiconfigurator extra. Diagnostic only: it writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from calibrate import aic_moe  # noqa: E402
from calibrate import aiconfigurator as aic  # noqa: E402
from calibrate.aic_backends import BACKENDS, systems  # noqa: E402
from calibrate.aic_tables import SystemTables  # noqa: E402
from simulator.costs.roofline import RooflineCost  # noqa: E402
from simulator.shapes import StepShape  # noqa: E402
from simulator.specs.hardware import get_hardware  # noqa: E402
from simulator.specs.models import MODELS  # noqa: E402

MLP_OPS = ("gate_ffn1_gemm", "act_gate", "ffn2_gemm")
# (label, prefill chunks (new tokens, cached prefix), decode contexts, tokens in the step)
SHAPES = [("prefill 2048", [(2048, 0)], [], 2048),
          ("prefill 8 x 1024", [(1024, 0)] * 8, [], 8192),
          ("decode b64 ctx 2k", [], [2048] * 64, 64),
          ("decode b256 ctx 2k", [], [2048] * 256, 256)]


ROUTING_TOKENS = (16, 256, 1024, 4096)


def routing(root: Path) -> None:
    """The A100 MoE curves derived from power-law rows beside SGLang's balanced ones."""
    print("A100 Mixtral bf16, ms per MoE layer (balanced routing)")
    for tp in (2, 4, 8):
        curves = {b: aic_moe.moe_curve(root, *systems(b)["a100-80gb"], b, "bf16", tp,
                                     "mixtral-8x7b")
                  for b in ("sglang", "trtllm", "vllm")}
        for tokens in ROUTING_TOKENS:
            cells = "  ".join(f"{b} {c.query(tokens):7.3f}{' (derived)' if c.derived else ''}"
                              for b, c in curves.items() if c is not None)
            print(f"  tp {tp} {tokens:5d} tokens: {cells}")
        for b, c in curves.items():
            if c is not None and c.derived:
                print(f"  tp {tp} {b}: {c.derived}")


def reference(root: Path, backend: str, model: str, tokens: tuple[int, ...] = (1, 2048)
              ) -> list[str]:
    """Lines of H100's bf16 balanced / power-law ratios for ``model`` per moe_tp."""
    table = aic_moe.shape_rows(root, *systems(backend)[aic_moe.REFERENCE_GPU], backend,
                               "bf16", model)
    if table is None:
        return [f"no {aic_moe.REFERENCE_GPU} MoE table for {backend}"]
    path, rows = table
    out = [f"{path.relative_to(root)}: {model} bf16, balanced / power-law latency"]
    for tp in sorted(set(rows.moe_tp_size)):
        at = rows[rows.moe_tp_size == tp]
        bal = aic_moe.routing_curve(at, "balanced")
        for law in aic_moe.POWER_LAWS:
            skew = aic_moe.routing_curve(at, law)
            if bal is None or skew is None:
                continue
            cells = "  ".join(f"{n} tokens {bal[0][n] / skew[0][n]:.2f} "
                              f"({bal[0][n]:.3f} / {skew[0][n]:.3f} ms)"
                              for n in tokens if n in bal[0].index and n in skew[0].index)
            out.append(f"  tp {tp:2d} {law}: {cells}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=BACKENDS, default="trtllm")
    parser.add_argument("--routing", action="store_true",
                        help="the A100 curves derived from power-law routing, checked")
    parser.add_argument("--reference", choices=tuple(aic_moe.HF_IDS), default=None,
                        help="H100's balanced / power-law ratios for this model, per tp")
    args = parser.parse_args(argv)
    root = aic.find_data_root()
    if root is None:
        print(f"needs the aiconfigurator extra: {aic.EXTRA_HINT}", file=sys.stderr)
        return 2
    if args.routing:
        routing(root)
        return 0
    if args.reference:
        print("\n".join(reference(root, args.backend, args.reference)))
        return 0
    model = MODELS["mixtral-8x7b"]
    for hw, (system, version) in systems(args.backend).items():
        tables = SystemTables(root, system, version, args.backend)
        for dtype in ("bf16", "fp8"):
            curve = aic_moe.moe_curve(root, system, version, args.backend, dtype, 2,
                                      "mixtral-8x7b")
            if curve is None:
                continue
            composer = aic.Composer(tables, model, dtype, 2)
            prior = RooflineCost(model, get_hardware(hw), 2, dtype, dtype)
            print(f"{hw} {dtype} ({args.backend} {version}{', derived' if curve.derived else ''})")
            for label, chunks, contexts, tokens in SHAPES:
                ops = composer.step_ops(chunks, contexts)
                moe = model.num_layers * curve.query(tokens) / 1e3
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
