"""One stack's MoE curves in two weight dtypes: the second's latency over the first's.

    python benchmarks/moe_dtype_compare.py [--kind vllm] [--dtypes bf16,fp8]
                                           [--gpus h100-sxm,h200] [--tables FILE]
    python benchmarks/moe_dtype_compare.py --kinds trtllm,sglang --dtypes fp8

``--kinds A,B`` compares two stacks' curves instead (B's over A's), at each of ``--dtypes``
(one dtype: the same for both).

For every (GPU, model, TP, EP) that ``--tables`` (a ``moe_tables.json``; default the shipped
one, simulator/costs/moe_tables.py) holds in both dtypes for ``--kind``, prints the ratio
at the token counts both curves collected (min, median, max), each curve's kernel, and
the ratios over every pair together. An 8-bit kernel reads half the weights, so a ratio
above 1 at a decode batch says its rows time a slower path. Read the file of an earlier
commit with ``--tables <(git show 0a6ba46:simulator/costs/moe_tables.json)``: there, vLLM's
H100 and H200 ``fp8`` curves were ModelOpt's FlashInfer CUTLASS path (docs/gpu-profiles.md,
"vLLM's FP8 experts are its own method's"). Table lookups only: the same on any machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from simulator.costs.moe_tables import MOE_FILE  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--kind", default="vllm", help="whose tables: trtllm, vllm, sglang")
    ap.add_argument("--dtypes", default="bf16,fp8", help="the reference dtype, then the other")
    ap.add_argument("--gpus", default="h100-sxm,h200", help="catalogue GPU names")
    ap.add_argument("--tables", type=Path, default=MOE_FILE, help="a moe_tables.json")
    ap.add_argument("--kinds", default=None,
                    help="two stacks to compare (the reference first) in place of --kind")
    args = ap.parse_args(argv)
    dtypes = args.dtypes.split(",")
    kinds = (args.kinds or f"{args.kind},{args.kind}").split(",")
    (base_kind, other_kind), (base_dtype, other_dtype) = kinds, (dtypes * 2)[:2]
    base, other = ((base_dtype, other_dtype) if args.kinds is None else (base_kind, other_kind))
    gpus = args.gpus.split(",")
    curves: dict[tuple[str, str, int, int, str, str], dict] = {}
    for row in json.loads(args.tables.read_text())["curves"]:
        if row["hardware"] in gpus:
            key = (row["hardware"], row["model"], int(row["tp"]), int(row.get("ep", 1)))
            curves[(*key, row["kind"], row["dtype"])] = row
    every = []
    for key in sorted({k[:4] for k in curves}):
        ref = curves.get((*key, base_kind, base_dtype))
        cmp = curves.get((*key, other_kind, other_dtype))
        if ref is None or cmp is None:
            continue
        a = dict(zip(ref["tokens"], ref["latency_us"], strict=True))
        b = dict(zip(cmp["tokens"], cmp["latency_us"], strict=True))
        ratios = [b[t] / a[t] for t in a if t in b]
        if not ratios:
            continue
        every += ratios
        kernel = cmp["source"].split("(")[1].split(",")[0]
        print(f"{key[0]:9s} {key[1]:16s} tp{key[2]} ep{key[3]}  {other}/{base} "
              f"{min(ratios):5.2f} {statistics.median(ratios):5.2f} {max(ratios):5.2f}  "
              f"({len(ratios)} counts; {other}: {kernel})")
    if not every:
        print(f"no curve in both {base} and {other} on {args.gpus}")
        return 1
    print(f"all: {len(every)} counts, {other}/{base} min {min(every):.2f}, median "
          f"{statistics.median(every):.2f}, max {max(every):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
