"""Would the 2024 TensorRT engines' all-reduce explain their slower 70B rows? A table check.

    python -m calibrate.aic_allreduce_era [--data DIR]

The TensorRT-LLM perf-overview revisions 0.11-0.17 (TensorRT engines) read faster in
servesim than published as TP grows, while the composed profiles price the all-reduce
from AIConfigurator 0.12.0's ``comm/trtllm/<v>/custom_allreduce_perf.parquet``: TensorRT-LLM
1.x's PyTorch ``AllReduce`` op with strategy AUTO, no fusion, CUDA graph, autotuner off
(ai-dynamo/aiconfigurator ``collector/network/collect_all_reduce.py``
``benchmark_trtllm_allreduce``). The 2024 engines ran the ``AllReduce`` TensorRT plugin
instead, whose AUTO rule (``cpp/tensorrt_llm/plugins/ncclPlugin/allreducePlugin.cpp``
``selectImplementation``; docs/gpu-profiles.md cites the versions) is :func:`plugin_strategy`:
the old custom one-shot kernel for small messages, else NCCL.

This module prices, for Llama-3.1-70B shapes, the per-step all-reduce both ways from the
tables alone (nothing fitted to published rows): the 1.x custom table as composed today,
and the 2024 rule, with the NCCL table (``comm/nccl/<v>/nccl_perf.parquet``, op all_reduce,
the version the system file names) where the plugin chose NCCL. Where it chose its own
one-shot kernel no table holds that kernel, so the 1.x figure is kept (the change is 0
there). It prints each step's all-reduce share and the step-time change the swap makes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from calibrate.aic_tables import SystemTables, allreduce_curve_ms
from calibrate.aiconfigurator import Composer, cli_root
from simulator.costs.allreduce_sync import workspace_bytes
from simulator.errors import ConfigError
from simulator.specs.models import MODELS

MODEL = "llama-3.1-70b"
# AUTO's one-shot limit inside the workspace: tp 2 always, tp 3-4 under 1 MB, else 500 KB.
ONESHOT_BELOW_BYTES_TP4 = 1_000_000
ONESHOT_BELOW_BYTES = 500_000
# (GPU, dtype of the 2024 rows' columns): FP8 on Hopper, FP16 (= bf16 tables) on A100
DEPLOYMENTS = (("a100-80gb", "bf16"), ("h100-sxm", "fp8"), ("h200", "fp8"))
SYSTEMS = {"a100-80gb": ("a100_sxm", "1.0.0"), "h100-sxm": ("h100_sxm", "1.3.0rc20"),
           "h200": ("h200_sxm", "1.3.0rc20")}  # the trtllm "current" slots composed today
DECODE_ROWS = (64, 256, 512, 1024, 2048)
DECODE_CONTEXT = 1024
PREFILL_TOKENS = 8192


def plugin_strategy(message_bytes: int, tp: int, two_shot: bool = False) -> str:
    """The AllreducePlugin's AUTO choice for one all-reduce on NVLink-connected GPUs:
    "oneshot", "twoshot" or "nccl". ``two_shot`` False is the rule with two-shot disabled
    (the WAR for nvbug 4718747, in the plugin by December 2024: issue NVIDIA/TensorRT-LLM
    #2575); True the earlier rule, which took two-shot where this one takes NCCL."""
    if tp < 2:
        raise ConfigError(f"{tp=}: an all-reduce needs at least 2 GPUs")
    if message_bytes > workspace_bytes(tp):  # the plugin's IPC workspace
        return "nccl"
    if tp <= 2 or message_bytes < (ONESHOT_BELOW_BYTES_TP4 if tp <= 4 else ONESHOT_BELOW_BYTES):
        return "oneshot"
    return "twoshot" if two_shot else "nccl"


@dataclass
class NcclTable:
    """AIConfigurator's NCCL all-reduce table (nccl-tests ``all_reduce_perf``, fp16) of one
    system, at the NCCL version its system file names (``misc.nccl_version``)."""

    root: Path  # aiconfigurator_core/systems
    system: str

    def __post_init__(self) -> None:
        import yaml

        spec = yaml.safe_load((self.root / f"{self.system}.yaml").read_text())
        self.version = str(spec["misc"]["nccl_version"])
        path = self.root / "data" / self.system / "comm" / "nccl" / self.version / \
            "nccl_perf.parquet"
        if not path.is_file():
            raise ConfigError(f"{path}: AIConfigurator NCCL table not found")
        t = pd.read_parquet(path)
        t = t[(t.op_name == "all_reduce") & (t.nccl_dtype == "half")]
        # The H100 and H200 files hold two sweeps (every size twice, both rows saying NCCL
        # 2.29.2 in their version column): one latency per size, their mean.
        self._ar = t.groupby(["num_gpus", "message_size"], as_index=False)["latency"].mean()

    def allreduce(self, elements: float, gpus: int) -> float:
        """NCCL's all-reduce of ``elements`` 16-bit values over ``gpus``, ms."""
        return allreduce_curve_ms(self._ar, gpus, elements, f"{self.system} nccl")


@dataclass(frozen=True)
class EraRow:
    """One step priced both ways."""

    gpu: str
    dtype: str
    tp: int
    step: str  # "decode 256" (rows at DECODE_CONTEXT tokens) or "prefill 8192"
    strategy: str  # the 2024 plugin's choice at this message size
    step_ms: float  # the composed step, 1.x all-reduce
    allreduce_ms: float  # its (1 + 2L) all-reduces from the 1.x table
    era_allreduce_ms: float  # the same all-reduces under the 2024 rule

    @property
    def change(self) -> float:
        """Step-time change the 2024 rule makes, as a share of the composed step."""
        return (self.era_allreduce_ms - self.allreduce_ms) / self.step_ms


def era_allreduce_ms(composer: Composer, nccl: NcclTable, tokens: int) -> tuple[str, float]:
    """The 2024 rule's choice and its (1 + 2L) all-reduces of ``tokens`` x hidden, ms."""
    m, tp = composer.model, composer.tp
    elements = tokens * m.hidden_size
    strategy = plugin_strategy(elements * 2, tp)
    per = (composer.tables.allreduce(elements, tp) if strategy == "oneshot"
           else nccl.allreduce(elements, tp))
    return strategy, (1 + m.layer_allreduces) * per


def rows(root: Path) -> Iterator[EraRow]:
    """Every (GPU, TP, step) the 70B rows at TP > 1 run, priced both ways."""
    model = MODELS[MODEL]
    for gpu, dtype in DEPLOYMENTS:
        system, version = SYSTEMS[gpu]
        tables, nccl = SystemTables(root, system, version), NcclTable(root, system)
        for tp in (2, 4, 8):
            composer = Composer(tables, model, dtype, tp)
            steps: list[tuple[str, int, list[tuple[int, int]], list[int]]] = [
                (f"decode {n}", n, [], [DECODE_CONTEXT] * n) for n in DECODE_ROWS
                if composer.kv_fits(n * DECODE_CONTEXT)]
            steps.append((f"prefill {PREFILL_TOKENS}", PREFILL_TOKENS,
                          [(PREFILL_TOKENS, 0)], []))
            for name, tokens, chunks, contexts in steps:
                ops = composer.step_ops(chunks, contexts)
                strategy, era = era_allreduce_ms(composer, nccl, tokens)
                yield EraRow(gpu, dtype, tp, name, strategy, sum(ops.values()) * 1e3,
                             ops["allreduce"] * 1e3, era)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None,
                        help="aiconfigurator_core/systems folder (default: the installed one)")
    args = parser.parse_args(argv)
    root = cli_root(args, "calibrate.aic_allreduce_era")
    if root is None:
        return 2
    print(f"{'GPU':9s} {'dtype':5s} {'tp':>2s} {'step':13s} {'2024':8s} {'step ms':>8s} "
          f"{'AR 1.x':>7s} {'AR 2024':>7s} {'AR share':>8s} {'change':>7s}")
    for r in rows(root):
        print(f"{r.gpu:9s} {r.dtype:5s} {r.tp:2d} {r.step:13s} {r.strategy:8s} "
              f"{r.step_ms:8.2f} {r.allreduce_ms:7.2f} {r.era_allreduce_ms:7.2f} "
              f"{r.allreduce_ms / r.step_ms:8.1%} {r.change:+7.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
