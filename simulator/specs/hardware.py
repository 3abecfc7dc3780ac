"""Accelerator specs: the :class:`HardwareSpec` dataclass and a catalogue.

Figures are dense (datasheets headline 2:4-sparse tensor throughput, which is 2x) and
come from the vendors' datasheets via the table in docs/design.md. Link bandwidths are
the datasheet totals (both directions added), as vendors quote them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from simulator.errors import ConfigError, did_you_mean
from simulator.specs.dtypes import weight_dtype_bytes

LINK_KINDS = ("nvlink", "pcie", "none")


@dataclass(frozen=True, slots=True)
class HardwareSpec:
    """One accelerator (or a CPU host) as the roofline cost model sees it."""

    name: str  # catalogue key
    memory_gb: float  # device memory as datasheets state it; HBM sizes are binary (GiB)
    bandwidth_gbps: float  # peak memory bandwidth, GB/s (1e9 bytes/s)
    bf16_tflops: float  # dense BF16/FP16 tensor throughput, 1e12 FLOP/s
    fp8_tflops: float | None = None  # dense FP8 tensor throughput; None = no FP8 math
    int8_tops: float | None = None  # dense INT8 tensor throughput, 1e12 op/s; None = none
    link_bandwidth_gbps: float = 0.0  # GPU-to-GPU link, GB/s, both directions added
    link_kind: str = "none"  # "nvlink" | "pcie" | "none" (cannot do tensor parallelism)
    fp32_tflops: float | None = None  # dense FP32 math; None = TF32 tensor cores = bf16 / 2
    # What CUDA reports as the device's total memory, GiB (cudaMemGetInfo; PyTorch's "total
    # capacity"): a little less than the datasheet's (the driver keeps some), and what an
    # engine's memory fraction is a share of. None: ``memory_gb`` read as GiB.
    cuda_total_gib: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"hardware.name={self.name!r} must be a non-empty string")
        for field in ("memory_gb", "bandwidth_gbps", "bf16_tflops"):
            _check_positive(self.name, field, getattr(self, field))
        for field in ("fp8_tflops", "int8_tops", "fp32_tflops", "cuda_total_gib"):
            if getattr(self, field) is not None:
                _check_positive(self.name, field, getattr(self, field))
        if self.link_kind not in LINK_KINDS:
            raise ConfigError(
                f"hardware {self.name}: link_kind={self.link_kind!r} must be one of {LINK_KINDS}"
            )
        value = self.link_bandwidth_gbps
        if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ConfigError(f"hardware {self.name}: link_bandwidth_gbps={value!r} must be >= 0")
        if self.link_kind != "none" and value == 0:
            raise ConfigError(
                f"hardware {self.name}: link_kind={self.link_kind!r} needs link_bandwidth_gbps > 0"
            )

    @property
    def memory_bytes(self) -> int:
        """Device memory in bytes as CUDA reports its total (``cuda_total_gib``: an "80 GB"
        H100 reports 79.10 GiB), else ``memory_gb`` read as GiB, as HBM is sized in powers
        of two."""
        gib = self.memory_gb if self.cuda_total_gib is None else self.cuda_total_gib
        return round(gib * 2**30)

    def peak_flops(self, compute_dtype: str) -> float:
        """Dense peak FLOP/s for matrix math on ``compute_dtype`` weights.

        fp8 and int8 weights use FP8/INT8 tensor cores where the device has them and fall
        back to bf16 math (dequantise, then multiply) where it does not; int4 and MXFP4
        weights are always dequantised to bf16 (W4A16 kernels such as Marlin); fp32 runs
        as TF32.
        """
        weight_dtype_bytes(compute_dtype, "compute_dtype")  # validates the name
        dtype = compute_dtype.lower()
        tflops = self.bf16_tflops
        if dtype == "fp32":
            tflops = self.fp32_tflops if self.fp32_tflops is not None else self.bf16_tflops / 2
        elif dtype == "fp8" and self.fp8_tflops is not None:
            tflops = self.fp8_tflops
        elif dtype == "int8" and self.int8_tops is not None:
            tflops = self.int8_tops
        return tflops * 1e12


def _check_positive(name: str, field: str, value: object) -> None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not (math.isfinite(value) and value > 0):  # type: ignore[arg-type,operator]
        raise ConfigError(f"hardware {name}: {field}={value!r} must be a finite number > 0")


def _gpu(
    name: str,
    mem: float,
    bw: float,
    bf16: float,
    fp8: float | None,
    int8: float,
    link: float,
    kind: str,
    cuda_total: float | None = None,
) -> HardwareSpec:
    return HardwareSpec(name, mem, bw, bf16, fp8, int8, link, kind,
                        cuda_total_gib=cuda_total)


# Datasheet figures (design.md table). INT8 dense: A100 624, H100 SXM/H200 1979,
# H100 PCIe 1513, L40S 733, RTX 4090 660.6 (Ada whitepaper), B200 4500.
# PCIe links: Gen5 x16 = 128 GB/s and Gen4 x16 = 64 GB/s, both directions added.
# CUDA's total memory, GiB (the last column; it varies by a few tenths with the driver):
# - h100-sxm 79.10: "total: 79.10 GiB" in TensorRT-LLM's memory logs
#   (benchmarks/trtllm_kv_memory.py cites them); h100-pcie the same: nvidia-smi reports
#   81,559 MiB for both parts (search-index file ids 56434233954 and 59138297598);
# - h200 139.81: "device total memory 139.81 GiB", a TensorRT-LLM log (file id 14031891033);
# - a100-80gb 79.35: "79.35 GiB total capacity", PyTorch (file id 39596015918);
# - a100-40gb 39.39 and rtx4090 23.65: PyTorch's "total capacity" in out-of-memory
#   messages (file ids 15996934928 and 56212744191);
# - l40s 44.42: "a total capacity of 44.42 GiB", PyTorch (github:stepfun-ai/Step-Video-T2V
#   issue 8);
# - b200 178.35: "GPU 0 has a total capacity of 178.35 GiB", PyTorch's out-of-memory
#   message on a B200 (search-index file ids 63244951597, 55106805727).
HARDWARE: Mapping[str, HardwareSpec] = MappingProxyType(
    {
        #                     name        GB    GB/s   BF16  FP8   INT8   link  kind     CUDA GiB
        "a100-80gb": _gpu("a100-80gb", 80, 2039, 312, None, 624, 600, "nvlink", 79.35),
        "a100-40gb": _gpu("a100-40gb", 40, 1555, 312, None, 624, 600, "nvlink", 39.39),
        "h100-sxm": _gpu("h100-sxm", 80, 3350, 989, 1979, 1979, 900, "nvlink", 79.10),
        "h100-pcie": _gpu("h100-pcie", 80, 2000, 756, 1513, 1513, 128, "pcie", 79.10),
        "h200": _gpu("h200", 141, 4800, 989, 1979, 1979, 900, "nvlink", 139.81),
        "l40s": _gpu("l40s", 48, 864, 362, 733, 733, 64, "pcie", 44.42),
        "rtx4090": _gpu("rtx4090", 24, 1008, 165, 330, 660.6, 64, "pcie", 23.65),
        "b200": _gpu("b200", 180, 7700, 2250, 4500, 4500, 1800, "nvlink", 178.35),
        # A shared 2-core x86 host (CI runners, laptops in a container). Rough figures:
        # dual-channel DDR4 bandwidth seen by one process, AVX2 FMA at ~3 GHz on 2 cores
        # (2 cores * 2 FMA units * 8 fp32 lanes * 2 FLOP * 3e9 ~ 0.19 TFLOPS peak); no
        # bf16 math, torch computes bf16 in fp32. Calibrate before trusting CPU numbers.
        "cpu": HardwareSpec("cpu", 24, 20, 0.15, fp32_tflops=0.15),
    }
)

# Datasheet boost clocks of the SMs, GHz: what a latency-bound kernel's time per step of
# work follows (simulator/costs/decode_walk.py). None listed: no such kernel is priced.
BOOST_CLOCK_GHZ: Mapping[str, float] = MappingProxyType({
    "a100-80gb": 1.41, "a100-40gb": 1.41, "h100-sxm": 1.98, "h100-pcie": 1.755,
    "h200": 1.98, "l40s": 2.52, "rtx4090": 2.52,
})

ALIASES: Mapping[str, str] = MappingProxyType(
    {"a100": "a100-80gb", "h100": "h100-sxm", "h200-sxm": "h200"}
)

# GPU -> its sibling: the same chip on another board (other memory, power limit, link),
# whose measured tables price it where it has none (simulator/costs/sibling.py)
SIBLINGS: Mapping[str, str] = MappingProxyType(
    {"a100-40gb": "a100-80gb", "h100-pcie": "h100-sxm"}
)


def sibling_of(name: str) -> HardwareSpec | None:
    """The catalogue GPU whose measured tables price ``name``'s (same chip), or None."""
    other = SIBLINGS.get(name)
    return None if other is None else HARDWARE[other]


def same_link(a: HardwareSpec, b: HardwareSpec) -> bool:
    """Whether two GPUs' peer links are the same fabric (kind and bandwidth)."""
    return (a.link_kind, a.link_bandwidth_gbps) == (b.link_kind, b.link_bandwidth_gbps)


def get_hardware(name: str) -> HardwareSpec:
    """Catalogue spec by name or alias (case-insensitive)."""
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in HARDWARE:
        known = ", ".join([*HARDWARE, *(f"{a} (= {t})" for a, t in ALIASES.items())])
        raise ConfigError(f"hardware={str(name)!r} is not a known device"
                          f"{did_you_mean(key, [*HARDWARE, *ALIASES])}; known: {known}")
    return HARDWARE[key]
