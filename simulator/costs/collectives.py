"""Collective latency fitted to measured tables: the prior's t_ar where known.

``collectives.json`` (next to this file) holds, per GPU, all-reduce implementation
("nccl", "trtllm", "vllm_graph", "vllm_eager", "sglang_graph",
"sglang_eager") and TP degree, a continuous
piecewise-linear latency over message size, fitted by ``python -m calibrate.collectives_fit``
(NCCL's all-gather and reduce-scatter too, ``op``: the token exchange around the experts
under attention data parallelism, roofline.py)
to the all-reduce tables NVIDIA measured and ships in AIConfigurator 0.12.0
(``systems/data/<system>/comm/...``). Only the fitted knots and their provenance ship;
the tables do not. A curve is::

    knots_bytes   s_0 = 0 < s_1 < ... < s_n     message sizes, bytes per GPU
    latency_us    t_0, t_1, ..., t_n            fitted latency at each knot
    t(s) = t_i + (s - s_i) (t_{i+1} - t_i) / (s_{i+1} - s_i)   for s_i <= s <= s_{i+1}
    t(s) = t_n + (s - s_n) (t_n - t_{n-1}) / (s_n - s_{n-1})   past s_n (last bandwidth)

so t_0 is the small-message latency and the last segment's slope is the large-message
bus cost per byte. Sizes are the bytes of the reduced tensor (tokens x hidden x bytes per
activation), the tables' message size (elements, bf16) x 2.

``collectives_published.json`` holds curves of the same form read from published
nccl-tests runs, for GPUs whose AIConfigurator tables are not used: L40S at tp 4 and 8
(PCIe, no NVLink; its AIConfigurator tables reach 0.8 GB/s at tp 8, evidently a box
without peer-to-peer across sockets; docs/gpu-profiles.md, "L40S all-reduce") and the RTX
4090 at tp 2, 4 and 8 (no peer-to-peer at all on the stock driver: NCCL stages every hop
through host memory; "RTX 4090 all-reduce"). A curve in ``collectives.json`` comes first;
``calibrate.collectives_fit`` rewrites only that file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from simulator.costs import knots
from simulator.costs.base import Num
from simulator.errors import ConfigError
from simulator.specs.hardware import HARDWARE, same_link, sibling_of

COLLECTIVES_FILE = Path(__file__).resolve().parent / "collectives.json"
PUBLISHED_FILE = Path(__file__).resolve().parent / "collectives_published.json"
DEFAULT_KIND = "nccl"  # the library every stack falls back to; the roofline prior's choice


@dataclass(frozen=True, slots=True)
class AllReduceCurve:
    """One fitted all-reduce latency curve (module docstring): GPU, implementation, TP."""

    hardware: str  # catalogue GPU name
    kind: str  # implementation: "nccl", "trtllm", "vllm_graph", "sglang_eager", ...
    tp: int  # GPUs in the all-reduce
    knots_bytes: tuple[float, ...]  # s_i, bytes per GPU; s_0 = 0
    latency_us: tuple[float, ...]  # t_i, microseconds
    source: str  # which table, which version
    op: str = "all_reduce"  # the collective: "all_reduce", "all_gather", "reduce_scatter"
    # (t_{i+1} - t_i) / (s_{i+1} - s_i) per segment, as np.interp computes them
    _slopes: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        s, t = self.knots_bytes, self.latency_us
        if s[0] != 0 or len(s) != len(t) or not knots.increasing(s):
            raise ConfigError(f"all-reduce curve {self.hardware}/{self.kind}/tp{self.tp}: "
                              f"knots_bytes={s!r} must start at 0, increase, and match "
                              f"latency_us={t!r}")
        object.__setattr__(self, "_slopes", knots.slopes(s, t))

    @property
    def latency_s(self) -> float:
        """t_0: the small-message latency, seconds."""
        return self.latency_us[0] * 1e-6

    @property
    def bandwidth_bytes_per_s(self) -> float:
        """Bytes per second of the last segment (large messages)."""
        s, t = self.knots_bytes, self.latency_us
        return (s[-1] - s[-2]) / ((t[-1] - t[-2]) * 1e-6)

    def time_s(self, nbytes: Num) -> Num:
        """Seconds for one all-reduce of ``nbytes`` (a float or an array)."""
        return knots.seconds(nbytes, self.knots_bytes, self.latency_us, self._slopes)

    def time_s_scalar(self, nbytes: float) -> float:
        """:meth:`time_s` of one float in plain Python, bit for bit what the array path
        gives (simulator/costs/knots.py); numpy costs microseconds per call on one number."""
        return knots.at_scalar(nbytes, self.knots_bytes, self.latency_us, self._slopes) * 1e-6

    def describe(self) -> str:
        how = "fitted to" if self.source.startswith("AIConfigurator") else "measured by"
        name = self.op.replace("_", "-")
        return (f"{self.kind} {name} {how} {self.source} "
                f"({self.latency_us[0]:.1f} us + {self.bandwidth_bytes_per_s / 1e9:.0f} GB/s)")


@cache
def _load(path: Path) -> tuple[dict[str, Any], ...]:
    return tuple(knots.load_curves(path, "all-reduce curves"))


def _curves(path: Path, published: Path | None) -> list[dict[str, Any]]:
    """``path``'s fitted curves, then ``published``'s measured ones."""
    return [*_load(path), *(_load(published) if published else ())]


def allreduce_curve(hardware: str, tp: int, kind: str = DEFAULT_KIND,
                    path: Path = COLLECTIVES_FILE,
                    published: Path | None = PUBLISHED_FILE) -> AllReduceCurve | None:
    """The curve for this GPU, implementation and TP degree (``path``'s fitted curves
    first, then ``published``'s), else None."""
    return collective_curve(hardware, tp, "all_reduce", kind, path, published)


def collective_curve(hardware: str, gpus: int, op: str, kind: str = DEFAULT_KIND,
                     path: Path = COLLECTIVES_FILE,
                     published: Path | None = PUBLISHED_FILE) -> AllReduceCurve | None:
    """The ``op`` curve ("all_reduce", "all_gather", "reduce_scatter"; a row without an
    ``op`` is an all-reduce) for this GPU, implementation and GPU count, else the sibling
    GPU's on the same fabric, else None."""
    for row in _curves(path, published):
        if ((row["hardware"], row["kind"], row["tp"], row.get("op", "all_reduce"))
                == (hardware, kind, gpus, op)):
            return AllReduceCurve(row["hardware"], row["kind"], int(row["tp"]),
                                  tuple(map(float, row["knots_bytes"])),
                                  tuple(map(float, row["latency_us"])), row["source"], op)
    other = sibling_of(hardware) if hardware in HARDWARE else None
    if other is not None and same_link(HARDWARE[hardware], other):
        return collective_curve(other.name, gpus, op, kind, path, published)  # same fabric
    return None


def allreduce_kinds(path: Path = COLLECTIVES_FILE,
                    published: Path | None = PUBLISHED_FILE) -> tuple[str, ...]:
    """The implementations some GPU has a curve for."""
    return tuple(dict.fromkeys(row["kind"] for row in _curves(path, published)))
