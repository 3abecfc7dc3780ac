"""Llama-3.1 cost profiles composed from NVIDIA AIConfigurator's measured per-op tables.

    python -m calibrate.aiconfigurator [--backend trtllm|vllm|sglang] [--check] [--data DIR]
                                       [--out DIR] [--table-out DIR]

Needs the ``aiconfigurator`` extra (``pip install -e '.[aiconfigurator]'``), which installs
``aiconfigurator-core==0.12.0`` (NVIDIA, Apache-2.0), the data-and-engine half of
AIConfigurator 0.12.0. NVIDIA measured single kernels (GEMM, context and generation
attention, TP all-reduce) per GPU and engine, and ships them as Parquet tables under
``aiconfigurator_core/systems/data/<system>/<op>/<backend>/<version>/``. This module reads
those tables in place with pyarrow (it never imports ``aiconfigurator_core``), composes
whole engine steps from them the way AIConfigurator does, and fits the linear cost model
(``calibrate.fit``) to the composed steps. Only fitted coefficients and provenance are
written to ``simulator/profiles``; the tables are never copied into this repository.

Composition, after AIConfigurator 0.12.0 ``aiconfigurator_core/sdk/models/llama.py``
(``LLAMAModel``: one op list per phase) and ``backends/base_backend.py`` (a step's latency
is the sum of its ops; the trtllm backend adds no dispatch overhead). With x tokens in the
step (prefill tokens plus one per decode row), L layers, hidden h, intermediate I, heads
n_q / n_kv of width d, vocabulary V and tensor parallelism t, one step is

    embedding                   1 x mem(2 x h bytes per token)
    add_norm_1, add_norm_2      L x mem(2 bytes x (2h + 2h) per token)       (each)
    qkv GEMM                    L x gemm(m=x, n=(n_q/t + 2 n_kv/t) d, k=h)
    context attention           L x ctx_attn(batch, seq = prefix + chunk) per group of
                                equal chunks, x (seq^2 - prefix^2) / seq^2 for a prefix,
                                plus 1.1 x (rope + KV-write memory ops) per group
    generation attention        L x gen_attn(batch, seq = tokens attended) per group
    proj GEMM                   L x gemm(x, h, n_q d / t)
    gate+up GEMM                L x gemm(x, 2I/t, h)
    act_gate                    L x mem(2 bytes x (2I/t + I/t) per token)
    down GEMM                   L x gemm(x, h, I/t)
    logits GEMM (bf16)          1 x gemm(m=rows sampling a token, V/t, h)
    all-reduce (t > 1)          (1 + 2L) x allreduce(x h elements) over t GPUs (1 + L for
                                a parallel attention + MLP block: GPT-J, Falcon, Phi-2)

where ``mem(bytes) = bytes / (0.8 x peak bandwidth) + 3 us`` (the system file's empirical
factors; AIConfigurator models norms, activation and embedding analytically, not from
tables). Table queries follow AIConfigurator's resolver (``perf_database/perf_interp.rs``,
``gemm.rs``, ``attention.rs`` in ai-dynamo/aiconfigurator ``aic-core/rust``):

- GEMM: each collected (n, k) owns a latency curve over m; an exact site is interpolated
  linearly in m, and past its sweep holds the median utilisation (SOL / latency) of its
  3 end points; an uncollected (n, k) takes the inverse-square-distance mean utilisation
  of the 4 nearest sites in log2(n), log2(k) (within 2 octaves) and divides SOL by it.
  SOL = max(2mnk / peak FLOPS, bytes x (mn + mk + nk) / bandwidth); grid points are
  clamped up to SOL when loaded.
- Attention: a grid over (heads, seq, batch) (context; blended in sqrt(latency) along
  seq) or (heads, batch, seq) (generation; generation averages 5 seq samples over
  +-10%, and is clamped to SOL); past the collected corner it holds the tapered
  (modified-Shepard) mean utilisation of the 4 nearest points in log2 space.
- All-reduce: the engine's custom all-reduce table, linear in message size.

Mixed steps (a prefill chunk with decode rows) run every non-attention op once over all
x tokens, as AIConfigurator's mixed step does. The steps are GPU kernel time only: no
scheduler, sampling, detokenisation or CPU launch overhead (AIConfigurator does not model
them for trtllm either), so the per-request costs are 0 and the fixed costs are the GPU's.
The fitted form is calibrate/fit.py's "piecewise" one (fixed cost per step kind, knees in
the step's token count), which follows the weight-read floor of small steps.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import math
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd

from calibrate.aic_backends import (
    BACKENDS,
    ENGINE_NAMES,
    fmha_dtype,
    gpu_of_system,
    profiles_dir,
    provenance_extra,
    systems,
)
from calibrate.aic_tables import BACKEND, SystemTables
from calibrate.fit import FitReport, fit_profile
from simulator.costs.profile import (
    PROFILES_DIR,
    CostProfile,
    load_profile,
    profile_file_name,
    save_profile,
)
from simulator.errors import ConfigError
from simulator.profile_table import ProfileTable, validate_metadata, validate_profile_table
from simulator.shapes import StepShape
from simulator.specs.hardware import HARDWARE
from simulator.specs.models import MODELS, ModelSpec

AIC_VERSION = "0.12.0"
DISTRIBUTION = "aiconfigurator-core"  # the wheel that holds the tables (aiconfigurator needs it)
EXTRA_HINT = "pip install -e '.[aiconfigurator]' (aiconfigurator-core==0.12.0)"
# Our catalogue name -> (AIConfigurator system, trtllm data version). The versions are
# AIConfigurator 0.12.0's "current" query slots (systems/query_versions.yaml).
SYSTEMS: dict[str, tuple[str, str]] = systems(BACKEND)
MODEL_IDS = {"llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
             "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B"}
# dtype -> (GEMM table dtype, context attention dtype, KV-cache dtype, GEMM bytes)
QUANT = {"bf16": ("bfloat16", "bfloat16", "bfloat16", 2.0), "fp8": ("fp8", "fp8", "fp8", 1.0)}
FIT_FRACTION = 0.9  # weights + KV cache per GPU must fit in this share of memory
PREFILL_PROMPTS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
# Each prompt length is swept at the grid and one token past it. The GEMM tables are
# collected at m and m + 1 because the two differ (vLLM's fp8 table on H100, the 70B's
# 5,120 x 8,192 projection: 55 us at m = 512, 79 us at 513), and a served step's token count
# lies anywhere between: steps at the grid alone fit every prefill at the aligned, fast
# kernels (docs/gpu-profiles.md, "Small mixed steps"). A step stays within the 16,384-token
# budget either way (the MoE tables stop there).
PROMPT_OFFSETS = (0, 1)
PREFILL_BATCHES = (1, 2, 4, 8, 16, 32)
MAX_PREFILL_TOKENS = 16384  # a step's prompt tokens, as a max_num_batched_tokens budget
DECODE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
DECODE_CONTEXTS = (128, 512, 2048, 8192)
# (prefill chunk, its cached prefix, decode rows at 2,048): small chunks too, the usual
# mixed step under chunked prefill at light load (a short prompt joining a few decodes)
MIXED = [(chunk, prefix, rows) for chunk in (16, 128, 512, 2048) for prefix in (0, 4096)
         for rows in (8, 64)]
MIXED_CONTEXT = 2048
SOURCE_PREFIX = "measured per operation by NVIDIA, composed by servesim"
FORM = "piecewise"  # calibrate/fit.py's form with per-kind fixed costs and token knees


def deployments() -> Iterator[tuple[str, str, str, int]]:
    """(hardware, model, dtype, tp) of every composed profile: bf16 everywhere, fp8 on
    GPUs with FP8 tensor cores (the tables have fp8 only there); 8B at TP 1 and 2 (TP 2:
    published 2-GPU 8B serving runs, e.g. SGLang issue 1639); 70B at the TP degrees
    whose weights fit (bf16: 2/4/8, fp8: 1/2/4/8)."""
    for hw in SYSTEMS:
        dtypes = ("bf16", "fp8") if HARDWARE[hw].fp8_tflops is not None else ("bf16",)
        for dtype in dtypes:
            yield hw, "llama-3.1-8b", dtype, 1
            yield hw, "llama-3.1-8b", dtype, 2
            for tp in (1, 2, 4, 8):
                if _weights_fit(MODELS["llama-3.1-70b"], hw, dtype, tp):
                    yield hw, "llama-3.1-70b", dtype, tp


def _weights_fit(model: ModelSpec, hw: str, dtype: str, tp: int) -> bool:
    return model.weight_bytes(dtype) / tp <= FIT_FRACTION * HARDWARE[hw].memory_bytes


def find_data_root() -> Path | None:
    """``aiconfigurator_core/systems`` of the installed 0.12.0 wheel, or None.

    Located with ``importlib.util.find_spec``, which does not import the package."""
    try:
        if version(DISTRIBUTION) != AIC_VERSION:
            return None
        spec = importlib.util.find_spec("aiconfigurator_core")
    except (PackageNotFoundError, ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "systems"
    return root if (root / "query_versions.yaml").is_file() else None


# --------------------------------------------------------------------------------------
# Composition: one engine step from per-op times
# --------------------------------------------------------------------------------------


@dataclass
class Composer:
    """Prices engine steps of ``model`` in ``dtype`` on ``tp`` GPUs from one system's tables."""

    tables: SystemTables
    model: ModelSpec
    dtype: str  # "bf16" or "fp8" (weights, KV cache and context attention)
    tp: int

    def quant(self) -> tuple[str, str, str, float]:
        """Table dtypes (GEMM, context attention, KV cache) and GEMM bytes (dtype pairs:
        calibrate/aic_dtype_pairs.py overrides this)."""
        return QUANT[self.dtype]

    def step_ops(self, chunks: Sequence[tuple[int, int]] = (),
                 decode_contexts: Sequence[int] = ()) -> dict[str, float]:
        """Seconds per op for one step: prefill ``chunks`` (new tokens, cached prefix) and
        decode rows attending ``decode_contexts`` tokens each. Keys name AIConfigurator's
        ops (``context_qkv_gemm`` ... in its LLAMAModel are ``qkv_gemm`` here)."""
        m, tp, t = self.model, self.tp, self.tables
        gemm_dtype, attn_dtype, kv_dtype, _ = self.quant()
        attn_dtype = fmha_dtype(t.backend, attn_dtype)  # vLLM: bf16 FMHA over an fp8 KV cache
        x = sum(n for n, _ in chunks) + len(decode_contexts)
        if x == 0:
            raise ConfigError("a step needs prefill chunks or decode rows")
        layers, h, d, inter = m.num_layers, m.hidden_size, m.head_dim, m.intermediate_size
        n_q, n_kv = m.num_heads // tp, max(1, m.num_kv_heads // tp)
        gemm = t.gemm(gemm_dtype)
        ops = {
            "embedding": t.gpu.mem_op_s(x * h * 2),
            "add_norm_1": layers * t.gpu.mem_op_s((2 * h + 2 * h) * x * 2),
            "qkv_gemm": layers * gemm.query(x, (n_q + 2 * n_kv) * d, h) / 1e3,
            "context_attention": 0.0,
            "generation_attention": 0.0,
            "proj_gemm": layers * gemm.query(x, h, n_q * d) / 1e3,
            "add_norm_2": layers * t.gpu.mem_op_s((2 * h + 2 * h) * x * 2),
            "gate_ffn1_gemm": layers * gemm.query(x, 2 * inter // tp, h) / 1e3,
            "act_gate": layers * t.gpu.mem_op_s((2 * inter // tp + inter // tp) * x * 2),
            "ffn2_gemm": layers * gemm.query(x, h, inter // tp) / 1e3,
            "logits_gemm": t.gemm("bfloat16").query(len(chunks) + len(decode_contexts),
                                                    m.vocab_size // tp, h) / 1e3,
        }
        # AIConfigurator adds rope and KV-write memory ops to each context-attention query,
        # x 1.1 (operators/attention.rs, ContextAttentionOp::query); their byte counts are
        # per head, not per token, so in effect 4 x the 3 us constant.
        fmha_bytes = 1.0 if attn_dtype == "fp8" else 2.0
        extras = 1.1 * (2 * t.gpu.mem_op_s((n_q + n_kv) * d * 2)
                        + 2 * t.gpu.mem_op_s(n_kv * d * fmha_bytes))
        for (n, prefix), count in sorted(Counter(chunks).items()):
            full = n + prefix
            lat = t.context_attention(count, full, n_q, n_kv, d, attn_dtype, kv_dtype)
            ops["context_attention"] += layers * (lat * (full**2 - prefix**2) / full**2 / 1e3
                                                  + extras)
        for ctx, count in sorted(Counter(decode_contexts).items()):
            lat = t.generation_attention(count, ctx, n_q, n_kv, d, kv_dtype)
            ops["generation_attention"] += layers * lat / 1e3
        if tp > 1:
            ops["allreduce"] = (1 + self.model.layer_allreduces) * t.allreduce(x * h, tp) / 1e3
        return ops

    def step_time(self, chunks: Sequence[tuple[int, int]] = (),
                  decode_contexts: Sequence[int] = ()) -> float:
        """Seconds for one step: the sum of its ops."""
        return sum(self.step_ops(chunks, decode_contexts).values())

    def kv_fits(self, tokens: int) -> bool:
        """Whether weights plus ``tokens`` of KV cache fit the GPUs (FIT_FRACTION)."""
        hw = HARDWARE[self.hardware_name]
        need = (self.model.weight_bytes(self.dtype)
                + tokens * self.model.kv_bytes_per_token(self.dtype)) / self.tp
        return need <= FIT_FRACTION * hw.memory_bytes

    @property
    def hardware_name(self) -> str:
        return gpu_of_system(self.tables.system)


def step_shape(chunks: Sequence[tuple[int, int]], contexts: Sequence[int]) -> StepShape:
    """The simulator's shape of a composed step: prefill ``chunks`` as (tokens, cached
    prefix) and one context length per decode row, as :meth:`Composer.step_time` takes them."""
    return StepShape(num_prefill_tokens=sum(n for n, _ in chunks),
                     prefill_attn_work=float(sum(n * (c + n / 2) for n, c in chunks)),
                     num_decode_seqs=len(contexts), decode_context_tokens=sum(contexts))


def sweep(composer: Composer) -> pd.DataFrame:
    """Profile-table rows (contract 2) of the composed prefill, decode and mixed steps."""
    rows = []

    def add(phase: str, chunks: list[tuple[int, int]], contexts: list[int]) -> None:
        shape = step_shape(chunks, contexts)
        rows.append({
            "phase": phase,
            "num_prefill_tokens": shape.num_prefill_tokens,
            "num_decode_seqs": shape.num_decode_seqs,
            "prefill_attn_work": shape.prefill_attn_work,
            "decode_context_tokens": shape.decode_context_tokens,
            "batch_size": len(chunks) + len(contexts),
            "time_s": composer.step_time(chunks, contexts),
        })

    for p in (p + offset for p in PREFILL_PROMPTS for offset in PROMPT_OFFSETS):
        for b in PREFILL_BATCHES:
            if b * p <= MAX_PREFILL_TOKENS and composer.kv_fits(b * p):
                add("prefill", [(p, 0)] * b, [])
    for ctx in DECODE_CONTEXTS:
        for b in DECODE_BATCHES:
            if composer.kv_fits(b * ctx):
                add("decode", [], [ctx] * b)
    for chunk, prefix, n_rows in MIXED:
        if composer.kv_fits(chunk + prefix + n_rows * MIXED_CONTEXT):
            add("mixed", [(chunk, prefix)], [MIXED_CONTEXT] * n_rows)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# Profiles: compose, fit, provenance, write / check
# --------------------------------------------------------------------------------------


def source_line(system: str, data_version: str, backend: str = BACKEND) -> str:
    return (f"{SOURCE_PREFIX}: AIConfigurator {AIC_VERSION} ({DISTRIBUTION}, Apache-2.0) "
            f"system {system}, backend {backend} {data_version}")


def profile_table(composer: Composer) -> ProfileTable:
    """The composed steps of one deployment as a validated profile table (contract 2)."""
    t = composer.tables
    steps = validate_profile_table(sweep(composer), f"composed {t.system} {composer.dtype}")
    meta = validate_metadata({
        "device": composer.hardware_name, "model": composer.model.name, "dtype": composer.dtype,
        "kv_dtype": composer.dtype, "tp": composer.tp,
        "engine_version": f"{ENGINE_NAMES[t.backend]} {t.data_version} (per-op tables)",
        "source": f"composed from AIConfigurator {AIC_VERSION} {t.system} {t.backend} "
                  f"{t.data_version}",
        "notes": "GPU kernel time only; see calibrate/aiconfigurator.py",
    }, "composed table")
    return ProfileTable(steps=steps, metadata=meta)


def provenance(tables: SystemTables, date: str) -> dict[str, Any]:
    extra = {} if tables.backend == BACKEND else provenance_extra(tables.backend,
                                                                  tables.gpu.sm_version)
    return {
        "source": source_line(tables.system, tables.data_version, tables.backend),
        "measured_by": f"NVIDIA (per-op kernel timings in AIConfigurator's {tables.system} "
                       f"{tables.backend} {tables.data_version} tables); steps composed by "
                       "servesim",
        "date": date,
        "software": "composed by servesim calibrate/aiconfigurator.py; fitted by "
                    f"calibrate/fit.py ({FORM} form, NNLS, relative error)",
        "notes": "python -m calibrate.aiconfigurator; steps = sum of per-op times as in "
                 "AIConfigurator's LLAMAModel (GEMMs, context/generation attention and TP "
                 "all-reduce from tables; norms, activation, embedding analytic). Not "
                 "modelled: CPU scheduling, sampling, detokenisation, kernel-launch gaps "
                 "between ops, CUDA graphs, overlap of communication with compute, "
                 "per-request overhead (admission and finishing cost 0). See "
                 "docs/gpu-profiles.md",
        "aiconfigurator": {
            "package": DISTRIBUTION, "version": AIC_VERSION,
            "system_file": str(tables.system_file.relative_to(tables.root.parent)),
            "backend": tables.backend, "backend_version": tables.data_version,
            "tables": tables.table_files(), "model": MODEL_IDS, **extra,
        },
    }


def compose_and_fit(root: Path, date: str, table_out: Path | None = None,
                    backend: str = BACKEND) -> list[tuple[CostProfile, FitReport]]:
    """Compose and fit every deployment from ``backend``'s tables under ``root``."""
    out = []
    loaded: dict[str, SystemTables] = {}
    for hw, model, dtype, tp in deployments():
        system, data_version = systems(backend)[hw]
        if hw not in loaded:
            loaded[hw] = SystemTables(root, system, data_version, backend)
        tables = loaded[hw]
        composer = Composer(tables, MODELS[model], dtype, tp)
        table = profile_table(composer)
        if table_out is not None:
            from simulator.profile_table import write_profile_table

            write_profile_table(table, table_out / f"{profile_file_name(hw, model, dtype, tp)}"
                                .replace(".json", ".parquet"))
        out.append(fit_profile(table.steps, hardware=hw, model=model, weight_dtype=dtype,
                               kv_dtype=dtype, tp=tp, provenance=provenance(tables, date),
                               source=f"composed {hw} {model} {dtype} tp{tp}", form=FORM))
    return out


def _close(a: Any, b: Any) -> bool:
    """Equal JSON values, numbers to 1e-6 relative (refits on other BLAS builds differ)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-15)
    return bool(a == b)


def _without_date(profile: CostProfile) -> dict[str, Any]:
    return {**profile.to_dict(), "provenance": {**profile.provenance, "date": None}}


def sync(root: Path, out_dir: Path, check: bool, date: str, table_out: Path | None = None,
         backend: str = BACKEND) -> tuple[list[str], list[tuple[CostProfile, FitReport]]]:
    """Write (or with ``check`` only compare) the composed profiles; return what changed."""
    changes = []
    fitted = compose_and_fit(root, date, table_out, backend)
    for profile, _ in fitted:
        path = out_dir / profile_file_name(profile.hardware, profile.model,
                                           profile.weight_dtype, profile.tp)
        if path.is_file():
            old = load_profile(path)
            if _close(_without_date(old), _without_date(profile)):
                continue
        changes.append(f"write {path.name}")
        if not check:
            out_dir.mkdir(parents=True, exist_ok=True)
            save_profile(profile, path)
    return changes, fitted


FIT_HEADER = (f"{'profile':46s} {'pts':>4s} {'MAPE':>7s} {'max':>7s} {'prefill':>7s} "
              f"{'decode':>7s} {'mixed':>7s}")  # the columns of fit_line


def fit_line(name: str, report: FitReport) -> str:
    """One composed profile's fit: points, held-out MAPE and worst point, and held-out
    MAPE by phase (what every composing command prints)."""
    q = report.by_phase
    return (f"{name:46s} {report.n_points:4d} {report.mape:7.2%} {report.max_ape:7.2%} "
            + " ".join(f"{q[p]['mape']:7.2%}" if p in q else f"{'-':>7s}"
                       for p in ("prefill", "decode", "mixed")))


def cli_parser(doc: str) -> argparse.ArgumentParser:
    """The options every composing command shares (this one, aic_models, aic_dtype_pairs)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None,
                        help="aiconfigurator_core/systems folder (default: the installed "
                             f"{DISTRIBUTION} {AIC_VERSION})")
    parser.add_argument("--backend", choices=BACKENDS, default=BACKEND,
                        help="whose kernel tables to compose (default trtllm: the generic "
                             "profiles; vllm, sglang: simulator/profiles/stacks/<backend>/)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"profiles folder (default {PROFILES_DIR} for trtllm)")
    parser.add_argument("--check", action="store_true", help="only report; exit 1 if stale")
    parser.add_argument("--date", default=dt.date.today().isoformat(), help="provenance date")
    return parser


def cli_root(args: argparse.Namespace, prog: str) -> Path | None:
    """The tables' folder, or None after saying on stderr how to install them."""
    root = args.data or find_data_root()
    if root is None or not (root / "query_versions.yaml").is_file():
        print(f"{prog}: error: AIConfigurator {AIC_VERSION} tables not found; "
              f"{EXTRA_HINT}, or pass --data", file=sys.stderr)
        return None
    return root


def file_cli(doc: str, out: Path, prog: str, argv: list[str] | None
             ) -> tuple[argparse.Namespace, Path] | None:
    """A command that writes one generated file from the tables: ``--data``, ``--out``
    (default ``out``), ``--check``; its arguments and the tables' folder, or None after
    :func:`cli_root` said what is missing."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="aiconfigurator_core/systems")
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    root = cli_root(args, prog)
    return None if root is None else (args, root)


def main(argv: list[str] | None = None) -> int:
    parser = cli_parser(__doc__)
    parser.add_argument("--table-out", type=Path, default=None,
                        help="also write each composed profile table (Parquet) here")
    args = parser.parse_args(argv)
    root = cli_root(args, "calibrate.aiconfigurator")
    if root is None:
        return 2
    out = args.out or profiles_dir(args.backend)
    changes, fitted = sync(root, out, args.check, args.date, args.table_out, args.backend)
    print(FIT_HEADER)
    for profile, report in fitted:
        print(fit_line(profile_file_name(profile.hardware, profile.model, profile.weight_dtype,
                                         profile.tp), report))
    for line in changes:
        print(line)
    print(f"{len(changes)} change(s); {len(fitted)} composed profiles in {out}")
    return 1 if args.check and changes else 0


if __name__ == "__main__":
    sys.exit(main())
