"""AIConfigurator's measured per-operation tables, read in place, and their interpolation.

A Python port of the SILICON path of AIConfigurator's ``perf_interp`` (the table resolvers
calibrate/aiconfigurator.py composes engine steps from). The tables ship in the
``aiconfigurator-core`` wheel (the ``aiconfigurator`` extra); nothing here imports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from calibrate.aic_backends import select_lane
from simulator.errors import ConfigError

BACKEND = "trtllm"  # the default backend (calibrate/aic_backends.py names the others)

Sol = Callable[[Sequence[float]], float]  # speed-of-light latency (ms) at coordinates


class _OutOfRange(Exception):
    """The query left the collected range at some axis."""


def _log2(v: float) -> float:
    return math.log2(max(v, 1e-12))


def _leaves(node: dict[int, Any], path: tuple[int, ...] = ()) -> Iterator[tuple[tuple, float]]:
    for key, child in node.items():
        if isinstance(child, dict):
            yield from _leaves(child, (*path, key))
        else:
            yield (*path, key), float(child)


def _grid_interior(node: dict[int, Any], q: Sequence[float], depth: int, sol: Sol,
                   sqrt_axis: int | None) -> float:
    if not isinstance(node, dict):
        return float(node)
    c = q[depth]
    if float(c).is_integer() and int(c) in node:
        return _grid_interior(node[int(c)], q, depth + 1, sol, sqrt_axis)
    keys = sorted(node)
    if c < keys[0] or c > keys[-1]:
        raise _OutOfRange
    i = int(np.searchsorted(keys, c))
    lo, hi = keys[i - 1], keys[i]
    found: list[tuple[int, float]] = []
    for k in (lo, hi):
        try:
            found.append((k, _grid_interior(node[k], q, depth + 1, sol, sqrt_axis)))
        except _OutOfRange:
            pass  # a ragged branch (the uncollected large-seq x large-batch corner)
    if not found:
        raise _OutOfRange
    if len(found) == 1:  # hold the survivor's utilisation along this axis
        k, lat = found[0]
        snapped = [*q[:depth], k, *q[depth + 1:]]
        sq, ss = sol(q), sol(snapped)
        return lat * sq / ss if sq > 0 and ss > 0 else lat
    w = (c - lo) / (hi - lo)
    (_, a), (_, b) = found
    if depth == sqrt_axis:
        return (math.sqrt(a) + (math.sqrt(b) - math.sqrt(a)) * w) ** 2
    return a + (b - a) * w


def _grid_hold(tree: dict[int, Any], q: Sequence[float], sol: Sol, nn: int = 4) -> float:
    """Past the collected frontier: tapered modified-Shepard mean utilisation of the ``nn``
    nearest points in joint log2 space (support radius = the next point's distance)."""
    qlog = [_log2(v) for v in q]
    ranked = sorted(
        (math.dist([_log2(v) for v in path], qlog), path, lat)
        for path, lat in _leaves(tree) if lat > 0 and sol(path) > 0
    )
    picked, radius = ranked[:nn], (ranked[nn][0] if len(ranked) > nn else math.inf)
    if not picked:
        raise ConfigError(f"no measured point to anchor the query {tuple(q)}")

    def weight(d: float) -> float:
        if math.isinf(radius):
            return 1.0 / (d * d + 1e-12)
        return (max(radius - d, 0.0) / (radius * d + 1e-12)) ** 2

    w = [weight(d) for d, _, _ in picked]
    if sum(w) <= 0:
        w = [1.0] * len(picked)
    util = sum(wi * sol(p) / lat for wi, (_, p, lat) in zip(w, picked, strict=True)) / sum(w)
    return sol(q) / util


def grid_query(tree: dict[int, Any], q: Sequence[float], sol: Sol,
               sqrt_axis: int | None = None) -> float:
    """Latency (ms) at ``q`` from a nested table: exact, bracket-and-blend, or held."""
    try:
        return _grid_interior(tree, q, 0, sol, sqrt_axis)
    except _OutOfRange:
        return _grid_hold(tree, q, sol)


@dataclass
class GemmTable:
    """One GEMM dtype's table as scattered (n, k) sites, each with an m-curve (ms)."""

    sites: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]
    sol: Callable[[float, float, float], float]  # (m, n, k) -> ms
    k_tail: int = 3
    nn_sites: int = 4
    max_octaves: float = 2.0
    # answers already given: a composition asks for the same product many times (a
    # profile's sweep prices each GEMM shape at every step it appears in)
    _answers: dict[tuple[float, int, int], float] = field(default_factory=dict, repr=False,
                                                          compare=False)

    def _curve(self, site: tuple[int, int], m: float) -> float:
        ms, lat = self.sites[site]
        i = int(np.searchsorted(ms, m))
        if i < len(ms) and ms[i] == m:
            return float(lat[i])
        if ms[0] <= m <= ms[-1]:
            return float(np.interp(m, ms, lat))
        tail = slice(-self.k_tail, None) if m > ms[-1] else slice(0, self.k_tail)
        utils = [self.sol(mi, *site) / li for mi, li in zip(ms[tail], lat[tail], strict=True)]
        return self.sol(m, *site) / float(np.median(utils))

    def query(self, m: float, n: int, k: int) -> float:
        """Latency (ms) of an (m x k) @ (k x n) product."""
        key = (m, n, k)
        if key not in self._answers:
            self._answers[key] = self._query(m, n, k)
        return self._answers[key]

    def _query(self, m: float, n: int, k: int) -> float:
        if (n, k) in self.sites:
            return self._curve((n, k), m)
        q = (_log2(n), _log2(k))
        covering = [s for s, (ms, _) in self.sites.items() if ms[0] <= m <= ms[-1]]
        cands = sorted((math.dist((_log2(s[0]), _log2(s[1])), q), s)
                       for s in (covering or list(self.sites)))
        near = [(d, s) for d, s in cands if d <= self.max_octaves][: self.nn_sites]
        if not near:  # beyond the collected frontier on one axis: nearest sites carry it
            near = cands[: self.nn_sites]
        w = [1.0 / (d * d + 1e-12) for d, _ in near]
        util = sum(wi * self.sol(m, *s) / self._curve(s, m)
                   for wi, (_, s) in zip(w, near, strict=True)) / sum(w)
        return self.sol(m, n, k) / util


@dataclass(frozen=True)
class GpuSpec:
    """The figures of an AIConfigurator system file that the composition uses."""

    mem_bw: float  # bytes/s
    mem_scale: float  # empirical share of peak bandwidth for memory-bound ops
    mem_const_s: float  # per-op constant latency for those ops
    flops: dict[str, float]  # tensor-core FLOP/s by AIConfigurator dtype name
    sm_version: int

    def mem_op_s(self, nbytes: float) -> float:
        """AIConfigurator's analytic memory op (norms, activation, embedding), seconds."""
        return nbytes / (self.mem_bw * self.mem_scale) + self.mem_const_s


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml  # a dependency of aiconfigurator-core, so present whenever the data is

    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a YAML mapping")
    return data


@dataclass
class SystemTables:
    """The tables of one AIConfigurator system, backend and version, read in place."""

    root: Path  # aiconfigurator_core/systems
    system: str  # e.g. "h100_sxm"
    data_version: str  # backend version of the collected tables
    backend: str = BACKEND  # "trtllm", "vllm" or "sglang": systems/data/<system>/<op>/<backend>
    gpu: GpuSpec = field(init=False)
    _gemm: dict[str, GemmTable] = field(default_factory=dict, init=False)
    _ctx: pd.DataFrame = field(init=False)
    _gen: pd.DataFrame = field(init=False)
    _ar: pd.DataFrame = field(init=False)
    _cache: dict[tuple, Any] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        spec = _read_yaml(self.system_file)["gpu"]
        flops = {name: float(spec[f"{name}_tc_flops"]) for name in ("bfloat16", "fp8")
                 if f"{name}_tc_flops" in spec}
        self.gpu = GpuSpec(float(spec["mem_bw"]), float(spec["mem_bw_empirical_scaling_factor"]),
                           float(spec["mem_empirical_constant_latency"]), flops,
                           int(spec["sm_version"]))
        self._ctx = self._read("attention", "context_attention_perf.parquet")
        self._gen = self._read("attention", "generation_attention_perf.parquet")
        self._ar = self._read("comm", "custom_allreduce_perf.parquet")

    def _read(self, family: str, name: str) -> pd.DataFrame:
        """One table, reduced to this backend's kernel lane; tables collected without
        sliding windows (no ``window_size`` column) are full attention."""
        t = select_lane(pd.read_parquet(self.table(family, name)), self.backend,
                        self.gpu.sm_version, family)
        return t if "window_size" in t or family != "attention" else t.assign(window_size=0)

    @property
    def system_file(self) -> Path:
        return self.root / f"{self.system}.yaml"

    def table(self, family: str, name: str) -> Path:
        path = self.root / "data" / self.system / family / self.backend / self.data_version / name
        if not path.is_file():
            raise ConfigError(f"{path}: AIConfigurator table not found")
        return path

    def table_files(self) -> list[str]:
        """The tables used, relative to ``aiconfigurator_core/systems``."""
        names = [("gemm", "gemm_perf.parquet"), ("attention", "context_attention_perf.parquet"),
                 ("attention", "generation_attention_perf.parquet"),
                 ("comm", "custom_allreduce_perf.parquet")]
        return [str(self.table(f, n).relative_to(self.root)) for f, n in names]

    def gemm(self, dtype: str) -> GemmTable:
        if dtype not in self._gemm:
            raw = pd.read_parquet(self.table("gemm", "gemm_perf.parquet"),
                                  columns=["gemm_dtype", "m", "n", "k", "latency"])
            raw = raw[raw["gemm_dtype"] == dtype].drop_duplicates(["m", "n", "k"], keep="first")
            if raw.empty:
                raise ConfigError(f"{self.system} {self.backend} {self.data_version}: "
                                  f"no {dtype} GEMMs")
            nbytes, flops = 1.0 if dtype == "fp8" else 2.0, self.gpu.flops[dtype]

            def sol(m: float, n: float, k: float) -> float:
                return max(2 * m * n * k / flops, nbytes * (m * n + m * k + n * k) / self.gpu.mem_bw
                           ) * 1e3

            sites = {}
            for (n, k), g in raw.groupby(["n", "k"]):
                g = g.sort_values("m")
                ms = g["m"].to_numpy(np.float64)
                lat = np.maximum(g["latency"].to_numpy(np.float64),
                                 [sol(m, n, k) for m in ms])  # clamp to SOL, as AIC loads
                sites[(int(n), int(k))] = (ms, lat)
            self._gemm[dtype] = GemmTable(sites, sol)
        return self._gemm[dtype]

    def _attn_flops(self, dtype: str) -> float:
        return self.gpu.flops.get(dtype, self.gpu.flops["bfloat16"])

    def context_attention(self, b: int, seq: int, n: int, n_kv: int, d: int, attn_dtype: str,
                          kv_dtype: str) -> float:
        """Context (prefill) attention of ``b`` sequences of ``seq`` tokens, one layer, ms."""
        key = ("ctx", n_kv, d, attn_dtype, kv_dtype)
        if key not in self._cache:
            t = self._ctx
            t = t[(t.num_key_value_heads == n_kv) & (t.head_dim == d) & (t.window_size == 0)
                  & (t.attn_dtype == attn_dtype) & (t.kv_cache_dtype == kv_dtype)]
            tree: dict[int, Any] = {}
            for row in t.itertuples():
                tree.setdefault(row.num_heads, {}).setdefault(row.isl, {}).setdefault(
                    row.batch_size, row.latency)
            if not tree:
                raise ConfigError(f"{self.system}: no context attention for n_kv={n_kv} d={d} "
                                  f"{attn_dtype}/{kv_dtype}")
            self._cache[key] = tree
        flops, kv_bytes = self._attn_flops(attn_dtype), 1.0 if kv_dtype == "fp8" else 2.0

        def sol(c: Sequence[float]) -> float:
            nh, s, bb = c
            ops = 2 * bb * s * s * nh * d * 2 / 2
            mem = 2 * bb * (2 * nh * s * d) + kv_bytes * bb * 2 * n_kv * s * d
            return max(ops / flops, mem / self.gpu.mem_bw) * 1e3

        return grid_query(self._cache[key], (n, seq, b), sol, sqrt_axis=1)

    def generation_attention(self, b: int, seq: int, n: int, n_kv: int, d: int,
                             kv_dtype: str) -> float:
        """One decode step's attention for ``b`` rows attending ``seq`` tokens, one layer, ms."""
        kv_bytes = 1.0 if kv_dtype == "fp8" else 2.0
        fp8_mma = kv_dtype == "fp8" and self.gpu.sm_version >= 89
        flops = self._attn_flops("fp8" if fp8_mma else "bfloat16")

        def sol(c: Sequence[float]) -> float:
            nh, bb, s = c
            kv_len = s - 1
            ops = 2 * bb * nh * d * 2 * kv_len
            mem = bb * (nh * d * 2 + 2 * n_kv * kv_len * d * kv_bytes + nh * d * 2)
            return max(ops / flops, mem / self.gpu.mem_bw) * 1e3

        key = ("gen", n_kv, d, kv_dtype)
        if key not in self._cache:
            t = self._gen
            t = t[(t.num_key_value_heads == n_kv) & (t.head_dim == d) & (t.window_size == 0)
                  & (t.kv_cache_dtype == kv_dtype)]
            tree: dict[int, Any] = {}
            for row in t.itertuples():
                s = int(row.isl + row.step)
                lat = max(float(row.latency), sol((row.num_heads, row.batch_size, s)))
                tree.setdefault(row.num_heads, {}).setdefault(row.batch_size, {}).setdefault(s, lat)
            if not tree:
                raise ConfigError(f"{self.system}: no generation attention for n_kv={n_kv} "
                                  f"d={d} kv {kv_dtype}")
            self._cache[key] = tree
        s_min = max(1, int(seq * 0.9))
        s_max = max(s_min, int(seq * 1.1))
        samples = [s_min + (s_max - s_min) * i // 4 for i in range(5)]
        return sum(grid_query(self._cache[key], (n, b, s), sol) for s in samples) / 5

    def allreduce(self, elements: float, gpus: int) -> float:
        """The engine's custom all-reduce of ``elements`` bf16 values over ``gpus``, ms."""
        return allreduce_curve_ms(self._ar[self._ar.allreduce_dtype == "bfloat16"], gpus,
                                  elements, self.system)


def allreduce_curve_ms(table: pd.DataFrame, gpus: int, elements: float, where: str) -> float:
    """An all-reduce table's latency (ms) of ``elements`` values over ``gpus``: linear in
    message size between its rows (``message_size`` in elements), past the last one at that
    row's bandwidth. ``table`` holds one dtype (and lane); ``where`` names it in errors."""
    t = table[table.num_gpus == gpus].sort_values("message_size")
    sizes, lat = t["message_size"].to_numpy(np.float64), t["latency"].to_numpy(np.float64)
    if len(sizes) == 0:
        raise ConfigError(f"{where}: no all-reduce over {gpus} GPUs")
    if elements > sizes[-1]:  # hold the last point's bandwidth
        return float(lat[-1] * elements / sizes[-1])
    return float(np.interp(elements, sizes, lat))
