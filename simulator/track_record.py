"""How close servesim came on published serving runs like the deployment being simulated.

Every run prints a prediction; a capacity planner also needs to know how far to trust it.
``benchmarks/published.py`` replays about 4,600 published, measured serving runs (vLLM,
SGLang, TensorRT-LLM and NIM on A100 to B200; docs/gpu-profiles.md, "Published serving
runs"), and ``benchmarks/track_record.py`` keeps, from one such replay, each held-out
case's signed error on the three headline figures (issue 12's: mean TTFT, else median;
median TPOT, else mean; output throughput), grouped by stack, GPU, GPUs a replica (one or
several) and kind of load, in ``simulator/track_record.json`` (leaving out the runs whose
benchmark runner shared the engine's process: no scenario describes such a deployment).
This module reads that file and answers, for a deployment: of the published runs most like
it, how many did the replay read within 15%, and by how much did it miss. Where runs also
published a tail (vLLM's benchmark_serving P99s of TTFT, TPOT and ITL; GenAI-Perf's P95 TTFT
and ITL), the file keeps those errors too (:data:`TAIL_FIGURES`), and a deployment can ask
for the tails of runs under its own kind of load (:func:`tail_records`): what a P99 target
is margined by (simulator/capacity/margin.py).

The narrowest group with at least :data:`MIN_CASES` cases answers, per figure, in the order
of :data:`SCOPES`: the same stack, GPU, GPUs a replica and load; the same but any GPU of
its class (data-centre or consumer); the GPU, GPUs a replica and load under any stack; the
class, GPUs a replica and load; the class and load; the load alone; and, for a load no
published run had, the stack and GPU, the stack, every case. A deployment with no
``[stack]`` (servesim's own policy) skips the scopes that name a stack. The record says
which group answered, so a thin one is seen as thin. It describes the replays of published
runs, not this run: a scenario far from every published run (another model, a new GPU)
gets the record of its nearest group.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.errors import ConfigError
from simulator.specs.models import MODELS, catalogue_name
from simulator.stacks import NONE as NO_STACK

TRACK_RECORD_FILE = Path(__file__).with_name("track_record.json")
WITHIN = 0.15  # issue 12's tolerance: a case is "within" when |error| <= 15%
MIN_CASES = 10  # the fewest cases a group needs to answer for a figure

FIGURES: tuple[tuple[str, str], ...] = (
    ("ttft", "TTFT"), ("tpot", "TPOT"), ("output_throughput", "output tok/s"))
"""(key in the file, label): mean TTFT (else median), median TPOT (else mean), output
throughput."""

TAIL_FIGURES: tuple[tuple[str, str], ...] = (
    ("ttft_p99", "P99 TTFT"), ("ttft_p95", "P95 TTFT"), ("ttft_p90", "P90 TTFT"),
    ("tpot_p99", "P99 TPOT"), ("tpot_p90", "P90 TPOT"),
    ("itl_p99", "P99 ITL"), ("itl_p95", "P95 ITL"), ("itl_p90", "P90 ITL"))
"""(key in the file, label): the tail percentiles published runs report beside their means
(vLLM's benchmark_serving writes P99s, its result files P90s too; GenAI-Perf's exports,
P95s). TTFT and TPOT over the requests, ITL over every gap between two tokens, as the
tools compute them."""

TAILS: dict[str, tuple[str, ...]] = {
    "ttft": ("ttft_p99", "ttft_p95", "ttft_p90"), "tpot": ("tpot_p99", "tpot_p90"),
    "itl": ("itl_p99", "itl_p95", "itl_p90")}
"""A latency's tail figures, the highest percentile first (:func:`tail_order` orders them
for a target)."""


def tail_percentile(figure: str) -> float:
    """The percentile of a tail figure key: ``ttft_p95`` -> 95."""
    return float(figure.rsplit("_p", 1)[1])


def tail_order(latency: str, percentile: float) -> tuple[str, ...]:
    """``latency``'s tail figures (:data:`TAILS`) in the order a target judged at
    ``percentile`` asks for them: the nearest percentile first, the higher of two as near
    (P99: P99, P95, P90; P95: P95, P99, P90; P90: P90, P95, P99)."""
    q = float(percentile)
    return tuple(sorted(TAILS.get(latency, ()),
                        key=lambda f: (abs(tail_percentile(f) - q), -tail_percentile(f))))

TAIL_FROM = 90.0
"""A target judged at this percentile or above is a tail's: a margin reads the tail records
first (simulator/capacity/margin.py), a median's or lower one the means and medians."""

FIGURE_LABELS: dict[str, str] = {**dict(FIGURES), **dict(TAIL_FIGURES)}
"""Every figure key of the file -> its label."""

MANY_CLIENTS = 25
"""A closed loop of this many clients or more is its own kind of load (``closed_many``):
with fixed lengths its rounds reach the engine in groups that the first round formed and
no published source records, so its mean TTFT reads within 15% about two times in three
where fewer clients' reads six in seven (303 and 263 held-out runs, nearly all NIM's: the
shipped file's groups; docs/metrics.md, "Track record")."""

LOADS: dict[str, str] = {
    "rate": "arrivals at a rate",
    "closed": f"closed loop under {MANY_CLIENTS} clients",
    "closed_many": f"closed loop of {MANY_CLIENTS}+ clients",
    "burst": "all at once",
}
"""Kinds of load: open-loop arrivals (Poisson, gamma, constant, a trace's times), a closed
loop of fewer than :data:`MANY_CLIENTS` clients, one of that many or more, every request
at t = 0 (``rate = inf``, with or without a concurrency cap; offline max-throughput
tables)."""

CONSUMER_GPUS = frozenset({"rtx4090"})
"""GeForce boards: PCIe without peer-to-peer between GPUs, so their tensor-parallel runs are
unlike any data-centre GPU's (IOG's RTX 4090 runs at TP 2 and 4 read 70-100% short on TTFT;
docs/gpu-profiles.md, "Where the TTFT misses are"). A scope that leaves the GPU open keeps
its class."""

PARALLEL: dict[str, str] = {"one": "one GPU", "several": "several GPUs"}
"""GPUs a replica: one, or several (tensor parallel, or attention data parallel with
experts across them). Several read worse where collectives or their transport are not
known: TTFT within 15% on bursts 49% on one GPU, 15% on several (stop 66's replay)."""

_LOAD_SCOPES: tuple[tuple[str, ...], ...] = (
    ("stack", "gpu", "parallel", "load"), ("stack", "gpu_class", "parallel", "load"),
    ("gpu", "parallel", "load"), ("gpu_class", "parallel", "load"), ("gpu_class", "load"),
    ("load",),
)

EXPERTS: dict[str, str] = {"dense": "dense", "moe": "mixture of experts"}
"""The model's kind: dense, or a mixture of experts. MoE runs read apart (bursts on several
GPUs: TTFT within 15% in 1 of 29 MoE runs, 5 of the 12 dense ones; stop 67's replay), so a
deployment reads its own kind's runs first (:data:`SCOPES`)."""

SCOPES: tuple[tuple[str, ...], ...] = (
    *((*s, "experts") for s in _LOAD_SCOPES), *_LOAD_SCOPES,
    ("stack", "gpu"), ("stack",), (),
)
"""The groups asked in turn, narrowest first: the fields that must match (``gpu_class``:
data-centre or consumer, :data:`CONSUMER_GPUS`; ``parallel``: :data:`PARALLEL`; ``experts``:
:data:`EXPERTS`). The kind of load goes before the stack and the GPU: it sets the queueing,
which moves TTFT most (a closed loop of few clients reads within 15% about twice as often as
a burst). Each of those is asked first with the model's kind, then without it (a MoE model
at a rate, where no published MoE run is one, reads the dense runs, and says so)."""

def load_kind(arrival: str, rate: float | None, clients: int | None = None) -> str:
    """The kind of load (a key of :data:`LOADS`) of a workload's ``arrival``, ``rate`` and,
    for a closed loop, its ``clients`` (:data:`MANY_CLIENTS` or more: ``closed_many``; None
    counts as one); a kind of load given as the arrival is itself."""
    if arrival in ("closed", "closed_many"):
        many = arrival == "closed_many" or (clients or 1) >= MANY_CLIENTS
        return "closed_many" if many else "closed"
    if arrival == "burst" or (rate is not None and math.isinf(rate)):
        return "burst"
    return "rate"


def parallel_kind(gpus: int) -> str:
    """A key of :data:`PARALLEL` for a replica of ``gpus`` GPUs."""
    return "several" if gpus > 1 else "one"


def gpu_class(gpu: str) -> str:
    """``consumer`` for :data:`CONSUMER_GPUS`, else ``data-centre``."""
    return "consumer" if gpu in CONSUMER_GPUS else "data-centre"


@dataclass(frozen=True)
class Group:
    """One figure's errors on the held-out cases of one stack, GPU, GPUs a replica and load."""

    stack: str
    gpu: str
    parallel: str  # a key of PARALLEL
    load: str
    figure: str
    errors: tuple[float | None, ...]  # signed, simulated / published - 1; None: no result
    # each case's published figure (ms, or tok/s for throughput), as ``errors``; () in a
    # file written before they were kept
    published: tuple[float, ...] = ()
    experts: str = "dense"  # a key of EXPERTS: the cases' model kind

    def kept(self, limit: float | None) -> tuple[float | None, ...]:
        """The errors of the cases whose published figure is at most ``limit`` (every case
        for None)."""
        if limit is None:
            return self.errors
        return tuple(e for e, p in zip(self.errors, self.published, strict=True) if p <= limit)

    @property
    def gpu_class(self) -> str:
        """``consumer`` for :data:`CONSUMER_GPUS`, else ``data-centre``."""
        return gpu_class(self.gpu)


@dataclass(frozen=True)
class FigureRecord:
    """How one figure read on the published runs of a scope.

    ``within`` counts the cases with |error| <= :data:`WITHIN`; a case with no result
    counts as a miss. ``median_abs``, ``signed_median`` and ``errors`` are over the cases
    with a result (None, or empty, when none has one)."""

    figure: str
    scope: tuple[tuple[str, str], ...]  # the fields matched, (name, value): () for every case
    cases: int
    within: int
    median_abs: float | None
    signed_median: float | None
    errors: tuple[float, ...] = ()  # the signed errors with a result, smallest first
    limit: float | None = None  # only the cases published at or under this counted (None: all)

    @property
    def share(self) -> float:
        """The share of cases within :data:`WITHIN`."""
        return self.within / self.cases if self.cases else 0.0


def read_groups(path: Path | str = TRACK_RECORD_FILE) -> list[Group]:
    """The groups of a track-record file (``benchmarks/track_record.py`` writes it)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{p}: not a readable track-record file ({e})") from None
    groups = data.get("groups") if isinstance(data, dict) else None
    if not isinstance(groups, list):
        raise ConfigError(f"{p}: expected an object with a 'groups' list")
    return [_group(g, p, i) for i, g in enumerate(groups)]


def _group(raw: Any, path: Path, i: int) -> Group:
    where = f"{path}: groups[{i}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected an object")
    names = {}
    for key in ("stack", "gpu", "parallel", "load", "figure"):
        value = raw.get(key)
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}: {key} = {value!r}: expected a non-empty string")
        names[key] = value
    names["experts"] = raw.get("experts", "dense")  # files before stop 67: no MoE split
    if not isinstance(names["experts"], str):
        raise ConfigError(f"{where}: experts = {names['experts']!r}: expected a string")
    known = {"load": list(LOADS), "figure": list(FIGURE_LABELS), "parallel": list(PARALLEL),
             "experts": list(EXPERTS)}
    for key, values in known.items():
        if names[key] not in values:
            raise ConfigError(f"{where}: {key} = {names[key]!r}: unknown (one of {values})")
    errors = raw.get("errors")
    if not isinstance(errors, list) or not all(
            e is None or (isinstance(e, (int, float)) and not isinstance(e, bool)
                          and math.isfinite(e)) for e in errors):
        raise ConfigError(f"{where}: errors must be a list of numbers or nulls")
    published = raw.get("published", [])
    if not isinstance(published, list) or not all(
            isinstance(p, (int, float)) and not isinstance(p, bool) and math.isfinite(p)
            and p > 0 for p in published) or len(published) not in (0, len(errors)):
        raise ConfigError(f"{where}: published must be a list of numbers > 0, one per error")
    return Group(names["stack"], names["gpu"], names["parallel"], names["load"], names["figure"],
                 tuple(None if e is None else float(e) for e in errors),
                 tuple(float(p) for p in published), names["experts"])


def figure_record(groups: Iterable[Group], figure: str, scope: dict[str, str],
                  limit: float | None = None) -> FigureRecord:
    """``figure``'s record over the groups whose fields match ``scope`` (and, with
    ``limit``, over their cases whose published figure is at most that)."""
    errors = [e for g in groups if g.figure == figure
              and all(getattr(g, k) == v for k, v in scope.items()) for e in g.kept(limit)]
    have = [e for e in errors if e is not None]
    return FigureRecord(
        figure=figure, scope=tuple(scope.items()), cases=len(errors),
        within=sum(1 for e in have if abs(e) <= WITHIN),
        median_abs=statistics.median(abs(e) for e in have) if have else None,
        signed_median=statistics.median(have) if have else None, errors=tuple(sorted(have)),
        limit=limit)


def track_record(groups: Sequence[Group], stack: str, gpu: str, load: str,
                 min_cases: int = MIN_CASES, gpus: int = 1,
                 limits: Mapping[str, float] | None = None,
                 experts: str = "dense", tails: bool = False,
                 percentile: float = 99.0) -> list[FigureRecord]:
    """Per figure, the record of the narrowest scope of :data:`SCOPES` holding at least
    ``min_cases`` cases (every case if none does), for a replica of ``gpus`` GPUs;
    ``stack`` :data:`NO_STACK` skips the scopes that name a stack. ``limits`` (figure ->
    value) counts only the cases whose published figure is at most it (a plan's margin
    reads the runs whose measured TTFT was within its target: capacity/margin.py).
    ``experts``: the model's kind (:data:`EXPERTS`). With ``tails``, then each latency's
    tail record where runs like it published one, nearest ``percentile`` first
    (:func:`tail_records`)."""
    limits = limits or {}
    wanted = _wanted(stack, gpu, load, gpus, experts)
    scopes = [s for s in SCOPES if stack != NO_STACK or "stack" not in s]
    out = []
    for figure, _ in FIGURES:
        for fields in scopes:
            rec = figure_record(groups, figure, {k: wanted[k] for k in fields},
                                limits.get(figure))
            if rec.cases >= min_cases or not fields:
                out.append(rec)
                break
    if tails:
        out += tail_records(groups, stack, gpu, load, min_cases, gpus, limits, experts,
                            percentile)
    return out


def tail_records(groups: Sequence[Group], stack: str, gpu: str, load: str,
                 min_cases: int = MIN_CASES, gpus: int = 1,
                 limits: Mapping[str, float] | None = None,
                 experts: str = "dense", percentile: float = 99.0) -> list[FigureRecord]:
    """Per latency of :data:`TAILS` (TTFT, TPOT, ITL), the record of its tail figure in the
    narrowest scope of :data:`SCOPES` that keeps the kind of load and holds at least
    ``min_cases`` cases of one (in a scope, the percentile nearest ``percentile`` first:
    :func:`tail_order`); none for a latency no such scope holds. A tail is read only off
    runs under the same kind of load: a closed loop's P95 says little of a Poisson
    stream's P99 (the other arguments as :func:`track_record`)."""
    limits = limits or {}
    wanted = _wanted(stack, gpu, load, gpus, experts)
    scopes = [s for s in SCOPES if "load" in s and (stack != NO_STACK or "stack" not in s)]
    out = []
    for latency in TAILS:
        figures = tail_order(latency, percentile)
        found = next((rec for fields in scopes for figure in figures
                      if (rec := figure_record(groups, figure, {k: wanted[k] for k in fields},
                                               limits.get(figure))).cases >= min_cases), None)
        if found is not None:
            out.append(found)
    return out


def _wanted(stack: str, gpu: str, load: str, gpus: int, experts: str) -> dict[str, str]:
    """A deployment's value of every field a scope may match."""
    return {"stack": stack, "gpu": gpu, "gpu_class": gpu_class(gpu),
            "parallel": parallel_kind(gpus), "load": load, "experts": experts}


def scope_text(fields: Iterable[tuple[str, str]]) -> str:
    """``vllm-v1, h100-sxm, one GPU, arrivals at a rate, dense``; a stack, GPU or load left
    out reads as "any", GPUs a replica and the model's kind left out go unsaid."""
    scope = dict(fields)
    stack = scope.get("stack", "any stack")
    gpu = scope.get("gpu") or (f"any {scope['gpu_class']} GPU" if "gpu_class" in scope
                               else "any GPU")
    parallel = f", {PARALLEL[scope['parallel']]}" if "parallel" in scope else ""
    load = LOADS[scope["load"]] if "load" in scope else "any load"
    kind = f", {EXPERTS[scope['experts']]}" if "experts" in scope else ""
    return f"{stack}, {gpu}{parallel}, {load}{kind}"


def record_lines(records: Sequence[FigureRecord], whom: str = "") -> list[str]:
    """The report's lines: per figure, the share within 15%, the cases, the signed median
    error and the median |error|, and the scope that answered; ``whom`` names the
    deployment when the report holds several. [] for no records."""
    if not records:
        return []
    lines = ["track record, servesim on published serving runs like this one "
             f"(docs/metrics.md, \"Track record\"){', for ' + whom if whom else ''}:"]
    for r in records:
        if r.median_abs is None or r.signed_median is None:
            body = f"{r.cases} runs, none with a result"
        else:
            body = (f"{r.share:4.0%} of {r.cases} runs within 15%; median error "
                    f"{r.signed_median:+.0%}, |error| {r.median_abs:.0%}")
        lines.append(f"  {FIGURE_LABELS[r.figure]:<13s} {body}  [{scope_text(r.scope)}]")
    return lines


def record_json(r: FigureRecord) -> dict[str, Any]:
    """One figure's record as plain JSON (``plan.json``)."""
    return {"figure": r.figure, "scope": dict(r.scope), "cases": r.cases, "within": r.within,
            "share_within": r.share, "median_abs_error": r.median_abs,
            "median_error": r.signed_median}


def deployment_record(stack: str, gpu: str, load: str, gpus: int = 1,
                      path: Path | str = TRACK_RECORD_FILE,
                      limits: Mapping[str, float] | None = None,
                      experts: str = "dense", tails: bool = False,
                      percentile: float = 99.0) -> list[FigureRecord]:
    """The record for a deployment: ``stack`` as ``Deployment.stack`` says it ("vllm-v1
    0.9", or "none"), its GPU and GPUs a replica, its workload's kind of load
    (:func:`load_kind`) and its model's kind (:func:`model_kind`); ``limits``, ``tails``
    and ``percentile`` as :func:`track_record` takes them.

    [] on the CPU (no published run is one; ``servesim validate`` measures the simulator
    against the engine on the machine itself) and when the shipped file is absent (a
    source tree without it)."""
    if gpu == "cpu" or not Path(path).is_file():  # a CPU: `servesim validate` checks it here
        return []
    name = stack.split()[0] if stack.strip() else NO_STACK
    return track_record(read_groups(path), name, gpu, load, gpus=gpus, limits=limits,
                        experts=experts, tails=tails, percentile=percentile)


def point_record(point: Mapping[str, Any], gpu: str | None = None, rate: float | None = None,
                 path: Path | str = TRACK_RECORD_FILE,
                 limits: Mapping[str, float] | None = None,
                 tails: bool = False, percentile: float = 99.0) -> list[FigureRecord]:
    """The record of a scenario point dict: its ``[stack]``, ``hardware`` (gpu, tp x
    attention_dp GPUs a replica), workload arrival, rate and clients (``concurrency``; a
    sweep's list, its largest), and model; ``gpu`` and ``rate`` override the point's (a
    plan's candidate at its target rate); ``limits``, ``tails`` and ``percentile`` as
    :func:`track_record` takes them."""
    stack = point.get("stack") or {}
    name = f"{stack.get('name', NO_STACK)} {stack.get('version', '')}".strip()
    workload = point.get("workload") or {}
    own = workload.get("rate")
    if rate is None and isinstance(own, int | float) and not isinstance(own, bool):
        rate = float(own)
    hardware = point.get("hardware") or {}
    gpus = 1
    for key in ("tp", "attention_dp"):
        value = hardware.get(key, 1)
        gpus *= value if isinstance(value, int) and not isinstance(value, bool) else 1
    load = load_kind(str(workload.get("arrival", "poisson")), rate,
                     _most_clients(workload.get("concurrency")))
    model = (point.get("model") or {}).get("name", "")
    return deployment_record(name, gpu or str(hardware.get("gpu", "")), load, gpus, path,
                             limits, model_kind(str(model)), tails, percentile)


def _most_clients(value: Any) -> int | None:
    """A point's ``concurrency``: a number, or a sweep's list of them (its largest: the
    most-loaded point's record), else None."""
    values = value if isinstance(value, list) else [value]
    counts = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return max(counts) if counts else None


def model_kind(model: str) -> str:
    """A key of :data:`EXPERTS` for a catalogue model name ("moe" when its layers hold
    several experts; "dense" for the rest, and for a name or config path the catalogue
    does not know)."""
    spec = MODELS.get(catalogue_name(model) or model)
    return experts_kind(spec.num_experts if spec is not None else 1)


def experts_kind(num_experts: int) -> str:
    """A key of :data:`EXPERTS` for a model of ``num_experts`` experts a MoE layer."""
    return "moe" if num_experts > 1 else "dense"
