"""Fit the ``trtllm 0.11`` preset's 16-bit decode-attention term to one GPU's published rows,
and score it on every other GPU's; or the ``trtllm 0.10`` preset's masked-MHA one.

    python benchmarks/trtllm_kv16_fit.py                 # fit on the A100 rows (default)
    python benchmarks/trtllm_kv16_fit.py --fit-gpu h100-sxm
    python benchmarks/trtllm_kv16_fit.py --preset 0.10 --fit-gpu all

``--preset 0.10`` takes the 0.10 rows whose query-group size has no XQA kernel in that
release (``StackPreset.xqa_groups``: the masked MHA kernel, one read per query head, some
of them served from L2) and fits ``TRTLLM_010_MASKED_REREAD`` the same way; ``--fit-gpu
all`` fits on every GPU's rows, leaving the held-out check to another source (NIM 1.0's
sizing-course rows, which run the same preset: docs/stacks.md).

TensorRT-LLM's 0.11-0.17 max-throughput tables with a 16-bit KV cache run faster in the
simulator than they were measured, and the more so the more query heads share a KV head (G)
and the longer the decode, while the FP8-cache rows of the same releases and models do not
(the figures and the command that prints them: docs/stacks.md, "TensorRT-LLM 0.11 to 0.17").
The kernel tables (TensorRT-LLM 1.x) read each KV head's cache once a step. The term prices
the decode-context term as ``1 + beta x (G - 1)`` reads (``[cost] decode_kv_reads``;
simulator/costs/kv_reads.py): ``beta = 1`` is a kernel that reads the cache once per query
head, as the masked MHA kernel does, ``beta = 0`` the tables' one read. Which kernel those
releases ran for a 16-bit cache is not settled; the term is fitted, one number for every GPU
and model.

The fit: published_fit.py's bounded scalar search of beta (0-1) minimising the soft_l1 loss
(knee 5%) of the output-throughput errors of the fitting GPU's rows, each replayed with the
``trtllm 0.11`` preset and ``decode_kv_reads`` set from beta. Rows priced by a roofline
prior are left out (the term scales a measured table's decode-context term only), as are
rows a preset was fitted on. It prints beta, then per GPU and per G the signed median error
and the share within 15% before (beta = 0) and after. Nothing is written: the value goes
into simulator/stack_presets.py (TRTLLM_011_KV16_REREAD) by hand, citing this command.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.published import replay_point  # noqa: E402
from benchmarks.published_cases import Case, load_cases  # noqa: E402
from benchmarks.published_fit import bounded_soft_l1, share_within  # noqa: E402
from benchmarks.trtllm_xqa import priced_reads  # noqa: E402
from simulator.errors import ConfigError  # noqa: E402
from simulator.runner import run_point  # noqa: E402
from simulator.specs.models import catalogue_name, get_model  # noqa: E402
from simulator.stack_presets import query_group  # noqa: E402
from simulator.stacks import StackSection  # noqa: E402

METRIC = "output_throughput"
PRESETS = ("0.11", "0.10")
ALL = "all"  # --fit-gpu: every GPU's rows


def rows(cases: list[Case], version: str = "0.11") -> list[tuple[Case, dict, int]]:
    """(case, its replay point, G) for every 16-bit-cache max-throughput row of the releases
    the ``trtllm <version>`` preset covers, priced by a measured table, that no other fit
    used; under a preset with ``xqa_groups``, only the rows whose G has no XQA kernel."""
    out = []
    for case in cases:
        fitted_else = case.fitted and "trtllm_kv16_fit" not in case.fitted
        if (case.stack != "trtllm" or fitted_else or METRIC not in case.metrics
                or case.kv_dtype not in ("fp16", "bf16") or catalogue_name(case.model) is None):
            continue
        try:
            preset = StackSection(name="trtllm", version=case.stack_version).preset()
        except ConfigError:  # a release older than every preset
            continue
        if preset is None or preset.version != version:
            continue
        group = query_group(get_model(str(catalogue_name(case.model))), case.tp)
        if preset.xqa_groups is not None and group in preset.xqa_groups:
            continue  # XQA: one read, nothing to fit
        point, _ = replay_point(case, max_prompts=1000, burst_rate=math.inf)
        # the cost builder says whether the reads apply (a measured table, under whatever
        # the stack wraps it in), not a roofline prior
        _, prior = priced_reads({**point, "cost": {**point.get("cost", {}),
                                                   "decode_kv_reads": 1.0}})
        if prior is not None:
            continue
        out.append((case, point, group))
    return out


def error(case: Case, point: dict, reads: float) -> float:
    """Output-throughput error of ``case`` replayed with its decode KV read ``reads``x."""
    cost = {**point.get("cost", {}), "decode_kv_reads": reads}
    summary = run_point({}, {**point, "cost": cost}).summary
    return summary[METRIC] / case.metrics[METRIC] - 1.0


def errors(picked: list[tuple[Case, dict, int]], beta: float) -> list[float]:
    """Every row's error at ``beta``."""
    return [error(case, point, 1.0 + beta * (group - 1)) for case, point, group in picked]


def fit(picked: list[tuple[Case, dict, int]]) -> float:
    """beta minimising the soft_l1 loss of ``picked``'s errors (published_fit.py's search)."""
    return bounded_soft_l1(lambda beta: np.array(errors(picked, beta)), high=1.0,
                           tolerance=2e-3)


def table(picked: list[tuple[Case, dict, int]], beta: float) -> list[str]:
    """Per GPU and G: n, signed median and share within 15%, at beta 0 and at ``beta``."""
    cells: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for (case, _point, group), e0, e1 in zip(picked, errors(picked, 0.0),
                                            errors(picked, beta), strict=True):
        for key in (f"{case.gpu} G={group}", f"{case.gpu} all", "all"):
            cells[key].append((e0, e1))
    lines = [f"{'rows':<22} {'n':>4}  {'signed median':>21}  {'within 15%':>13}"]
    for key in sorted(cells, key=lambda k: (k == "all", k)):
        before, after = zip(*cells[key], strict=True)
        lines.append(f"{key:<22} {len(before):4d}  {statistics.median(before):+8.1%} -> "
                     f"{statistics.median(after):+8.1%}  {share_within(before):4.0%} -> "
                     f"{share_within(after):4.0%}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit-gpu", default="a100-80gb",
                    help=f"fit on this GPU's rows ({ALL!r}: every GPU's)")
    ap.add_argument("--preset", default="0.11", choices=PRESETS,
                    help="the trtllm preset whose term to fit")
    args = ap.parse_args(argv)
    picked = rows(load_cases(), args.preset)
    fitting = [r for r in picked if args.fit_gpu in (ALL, r[0].gpu)]
    held = [r for r in picked if args.fit_gpu not in (ALL, r[0].gpu)]
    if not fitting:
        print(f"trtllm_kv16_fit: error: no row on {args.fit_gpu!r}", file=sys.stderr)
        return 2
    beta = fit(fitting)
    reads = ", ".join(f"G = {g}: {1 + (g - 1) * beta:.2f} reads"
                      for g in sorted({g for _, _, g in fitting if g > 1}))
    print(f"fitted on {len(fitting)} {args.fit_gpu} rows: beta = {beta:.3f} ({reads})")
    print(f"in sample ({len(fitting)} rows):")
    print("\n".join(table(fitting, beta)))
    if held:
        print(f"held out ({len(held)} rows):")
        print("\n".join(table(held, beta)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
