"""Published serving cases (benchmarks/published_cases.toml): reading them and turning each
into a servesim scenario point.

The cases are a test set: they are read here to be *replayed*, never to fit anything.
``load_cases`` checks every case (a source, at least one metric, known units, a known
stack); ``scenario_point`` builds the point dict that ``simulator.runner.run_point``
takes, with the case's ``[stack]`` when the scenario schema has one.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.published_front_ends import front_end_host, front_end_note
from benchmarks.published_harness import HARNESSES, harness_host, harness_note
from benchmarks.published_lengths import (
    SGLANG_BENCH_SEED,
    random_lengths,
    resampled_lengths,
    run_lengths,
    sharegpt_lengths,
    vllm_bench_arrivals,
    warm_prompt_series,
    warm_series,
)
from benchmarks.trtllm_bench_settings import bench_limits, engine_context
from benchmarks.trtllm_bench_table import table_limits
from benchmarks.trtllm_kv_memory import static_session_kv, trtllm_kv
from benchmarks.trtllm_xqa import masked_mha_reads, xqa_note
from simulator.atomic import atomic_write
from simulator.costs.prefill_pass import DECODE_SCALE_HIGH, DECODE_SCALE_LOW
from simulator.costs.roofline import DECODE_KV_READS_HIGH, DECODE_KV_READS_LOW
from simulator.errors import ConfigError
from simulator.measured.perf_analyzer import TimeWindows
from simulator.scenario_policy import knob_rules
from simulator.scenario_types import Scenario
from simulator.specs.hardware import HARDWARE
from simulator.specs.models import catalogue_name
from simulator.workload.arrivals import sglang_bench_sends

CASES_FILE = Path(__file__).with_name("published_cases.toml")
# Every case file: published_cases.toml and published_cases_<source>.toml beside it; a case
# id is unique across all of them.
CASES_GLOB = "published_cases*.toml"


def case_files() -> list[Path]:
    """The case files beside this module, sorted by name."""
    return sorted(CASES_FILE.parent.glob(CASES_GLOB))

# Metric key -> unit. Keys are servesim summary keys (docs/metrics.md) except the two
# derived ones, which ``simulated_value`` computes from the summary.
UNITS: Mapping[str, str] = {
    "mean_ttft_ms": "ms", "median_ttft_ms": "ms", "median_tpot_ms": "ms", "mean_tpot_ms": "ms",
    "mean_itl_ms": "ms", "median_itl_ms": "ms", "mean_e2el_ms": "ms", "median_e2el_ms": "ms",
    # a perf_analyzer case's: TTFT over its windows' requests, ITL over their steps' gaps
    "p95_ttft_ms": "ms", "p95_itl_ms": "ms",
    # a client's percentiles over the requests (TTFT, TPOT) or every gap (ITL), as
    # vLLM's benchmark_serving writes them (numpy's linear rule, as servesim's summary)
    "p90_ttft_ms": "ms", "p99_ttft_ms": "ms", "p90_tpot_ms": "ms", "p99_tpot_ms": "ms",
    "p90_itl_ms": "ms", "p99_itl_ms": "ms",
    "batch_latency_ms": "ms",  # derived: an offline batch's wall time = duration
    "output_throughput": "tok/s", "total_token_throughput": "tok/s",
    "input_throughput": "tok/s",  # derived: total_input_tokens / duration
    "request_throughput": "req/s",
}
HEADLINE = ("mean_ttft_ms", "median_tpot_ms", "output_throughput")  # issue 12's three
STACKS = ("vllm-v0", "vllm-v1", "sglang", "trtllm")
# burst: every request at t = 0; poisson: open loop at ``rate`` (with ``max_concurrency``
# when the client capped it); closed: ``concurrency`` clients, each sending its next
# request when the last one ends (AIPerf / GenAI-Perf / NIM concurrency sweeps)
ARRIVALS = ("burst", "poisson", "closed")
# Models another engineer is adding to the catalogue (issue 12, item 3): cases naming them
# are reported "skipped: model not in catalogue" until they land.
PENDING_MODELS = ("llama-3-8b", "llama-3-70b", "codellama-34b", "qwen-72b", "internlm-20b",
                  "phi-2", "mistral-7b-v0.3")
FINITE_BURST_RATE = 1e9  # req/s: "everyone at once" where workload.rate = inf is refused
# workload.client: the benchmark client whose rule a case replays, and the arrival it needs
CLIENT_ARRIVALS = {"vllm-bench": "poisson", "sglang-bench": "poisson", "perf-analyzer": "closed"}
# a client's --seed when the case names none (vllm-bench 0, sglang.bench_serving 1)
CLIENT_SEEDS = {"vllm-bench": 0, "sglang-bench": SGLANG_BENCH_SEED}
# Every key a case's workload may carry (a key no replay reads is refused, not ignored):
# the arrival, the lengths (fixed; uniform; ShareGPT's log-normal means and sigmas, and
# output_cap, a runner's max_tokens cutting them; shape_run, a recorded run of the same
# client and dataset whose pairs are resampled to the means; a published run's own), a closed loop's
# clients, start (client_ramp_s: a "ramp" start's length) and think time (exponential with
# mean think_time_s, a measured client turnaround), the benchmark client, its seed
# (client_seed: its --seed, CLIENT_SEEDS by default) and its windows, and a warming run.
WORKLOAD_KEYS = (
    "arrival", "num_prompts", "rate", "max_concurrency", "concurrency", "client_start",
    "client_ramp_s", "think_time_s", "client", "client_seed", "measurement_interval_s",
    "stability_percentage", "max_trials", "measured_windows",
    "prompt_tokens", "output_tokens", "prompt_low", "prompt_high", "output_low",
    "output_high", "dataset", "prompt_tokens_mean", "prompt_sigma", "output_tokens_mean",
    "output_sigma", "output_cap", "shape_run", "run", "warm", "warm_rate", "warm_prompts")
# A point key (ignored like MEASURE_FROM): perf_analyzer's time windows (the fields of
# simulator/measured/perf_analyzer.py TimeWindows, in order) score
# the requests of a ``client = "perf-analyzer"`` case
PA_WINDOWS = "_perf_analyzer_windows"
PA_KEYS = ("measurement_interval_s", "stability_percentage", "max_trials", "measured_windows")
# the metrics only a perf_analyzer case is scored on, its p95s (benchmarks/published.py
# PA_PERCENTILES)
PA_METRICS = tuple(k for k in UNITS if k.startswith("p95_"))
# A point key (ignored by the scenario schema, which skips "_" keys): (first request id,
# its send time in s) of the requests a case scores, the ones before only warm a cache
MEASURE_FROM = "_measure_from"
# TensorRT-LLM's --scheduler_policy as servesim's admission and preemption rules
# (cpp/tensorrt_llm/batch_manager/capacityScheduler.h): MAX_UTILIZATION reserves blocks for
# the next step only and pauses the requests started last when they run out (they restart
# from their context later); GUARANTEED_NO_EVICT admits a request only when its whole
# input + output fits.
SCHEDULER_POLICY_KNOBS: Mapping[str, Mapping[str, str]] = {
    "max_utilization": {"admission": "greedy", "preemption": "newest"},
    "guaranteed_no_evict": {"admission": "no_evict"},
}


@dataclass(frozen=True, slots=True)
class Case:
    """One published measurement and the setup it was taken under."""

    id: str
    source: str  # URL or repo path @ commit
    stack: str  # vllm-v0 | vllm-v1 | sglang | trtllm
    stack_version: str  # the stack's release the source ran
    gpu: str  # servesim catalogue name
    model: str  # servesim catalogue name (maybe pending)
    weight_dtype: str
    kv_dtype: str
    tp: int
    workload: Mapping[str, Any]  # lengths, num_prompts, arrival (burst | poisson + rate)
    metrics: Mapping[str, float]  # published figures, keys of UNITS
    # scheduler settings the source states, or a fit set (its notes and ``fitted`` say so)
    knobs: Mapping[str, Any] = field(default_factory=dict)
    notes: str = ""
    quote: str = ""  # the row as published
    # what a preset fitted on this case ("" = none: a held-out test case); the report
    # leaves such cases out of its group table
    fitted: str = ""
    # the stack preset version the replay takes where ``stack_version`` names a product
    # release rather than the stack's (NIM 1.0 serves TensorRT-LLM 0.10 engines); "" = the
    # stack_version itself
    preset: str = ""
    # how the source spread the model over its GPUs: "" = tensor parallel over ``tp``;
    # "dep" = attention data parallel + expert parallel (TensorRT-LLM's DEP) over ``tp``
    # GPUs, replayed as hardware.attention_dp = tp at tp 1 (simulator/costs/roofline.py)
    parallelism: str = ""
    # a runner that shares the engine's process (benchmarks/published_harness.py): its
    # host cost is replayed; "" = a client in another process
    harness: str = ""
    # cost and KV-cache settings a fit gave the case's engines (keys of CASE_COST_KEYS and
    # CASE_KV_KEYS), replayed as the scenario's [cost] and [kv] keys; {} = none
    cost: Mapping[str, float] = field(default_factory=dict)
    kv: Mapping[str, float] = field(default_factory=dict)

    @property
    def group(self) -> str:
        """``stack-version/gpu`` (``trtllm-1.0/h100-sxm``): the unit the report summarises
        by; the version is part of it because one stack's releases differ by tens of
        percent on the same GPU."""
        return f"{self.stack}-{self.stack_version}/{self.gpu}"


def load_cases(paths: str | Path | Sequence[str | Path] | None = None) -> list[Case]:
    """Every case of ``paths`` (default: every case file), checked; a ConfigError names
    the file, the case and the field."""
    if paths is None:
        paths = case_files()
    elif isinstance(paths, str | Path):
        paths = [paths]
    cases: list[Case] = []
    seen: set[str] = set()
    for path in paths:
        cases += _load_file(Path(path), seen)
    return cases


def _load_file(path: Path, seen: set[str]) -> list[Case]:
    """The cases of one file; ``seen`` holds the ids read so far (from every file)."""
    with open(path, "rb") as f:
        raw = tomllib.load(f).get("case", [])
    cases = []
    for i, c in enumerate(raw):
        where = f"{path}: case {i} ({c.get('id', '?')})"
        for key in ("id", "source", "stack", "stack_version", "gpu", "model", "weight_dtype",
                    "tp", "workload", "metrics"):
            if key not in c:
                raise ConfigError(f"{where}: missing {key}")
        if c["id"] in seen:
            raise ConfigError(f"{where}: id {c['id']!r} used twice")
        seen.add(c["id"])
        _check(c, where)
        cases.append(Case(
            id=c["id"], source=c["source"], stack=c["stack"], stack_version=str(c["stack_version"]),
            gpu=c["gpu"], model=c["model"], weight_dtype=c["weight_dtype"],
            kv_dtype=c.get("kv_dtype", c["weight_dtype"]), tp=int(c["tp"]),
            workload=dict(c["workload"]), metrics=dict(c["metrics"]),
            knobs=dict(c.get("knobs", {})), notes=c.get("notes", ""), quote=c.get("quote", ""),
            fitted=c.get("fitted", ""), preset=str(c.get("preset", "")),
            parallelism=str(c.get("parallelism", "")), harness=str(c.get("harness", "")),
            cost=dict(c.get("cost", {})), kv=dict(c.get("kv", {}))))
    return cases


PARALLELISMS = ("", "dep")  # Case.parallelism
# Case.cost and Case.kv: the [cost] and [kv] keys a case file may give its engines, each a
# number in [low, high] (NIM 1.0's 16-bit decode steps, their XQA KV reads and KV memory:
# benchmarks/nim_dli_cases.py DECODE_SCALE_16BIT, XQA_REREAD_16BIT, KV_MEMORY_FRACTION)
CASE_COST_KEYS: Mapping[str, tuple[float, float]] = {
    "decode_scale": (DECODE_SCALE_LOW, DECODE_SCALE_HIGH),
    "decode_kv_reads": (DECODE_KV_READS_LOW, DECODE_KV_READS_HIGH)}
CASE_KV_KEYS: Mapping[str, tuple[float, float]] = {"gpu_memory_utilization": (0.05, 1.0)}


def _check(c: Mapping[str, Any], where: str) -> None:
    if not str(c["source"]).strip():
        raise ConfigError(f"{where}: source is empty")
    if c.get("parallelism", "") not in PARALLELISMS:
        raise ConfigError(f"{where}: parallelism = {c['parallelism']!r}: must be one of "
                          f"{list(PARALLELISMS)}")
    if c["stack"] not in STACKS:
        raise ConfigError(f"{where}: stack = {c['stack']!r}: must be one of {list(STACKS)}")
    if c.get("harness", "") not in ("", *HARNESSES):
        raise ConfigError(f"{where}: harness = {c['harness']!r}: must be one of "
                          f"{list(HARNESSES)} (a runner sharing the engine's process), or "
                          "absent")
    for section, known in (("cost", CASE_COST_KEYS), ("kv", CASE_KV_KEYS)):
        _check_engine(c.get(section, {}), section, known, where)
    if not c["metrics"]:
        raise ConfigError(f"{where}: no metrics")
    for key, value in c["metrics"].items():
        if key not in UNITS:
            raise ConfigError(f"{where}: metrics.{key}: unknown metric; known: {list(UNITS)}")
        if not isinstance(value, (int, float)) or not value > 0:
            raise ConfigError(f"{where}: metrics.{key} = {value!r}: must be a number > 0")
    wl = c["workload"]
    for key in wl:
        if key not in WORKLOAD_KEYS:
            raise ConfigError(f"{where}: workload.{key}: unknown key; known: {list(WORKLOAD_KEYS)}")
    if wl.get("arrival") not in ARRIVALS:
        raise ConfigError(f"{where}: workload.arrival = {wl.get('arrival')!r}: one of {ARRIVALS}")
    if wl["arrival"] == "closed" and (not isinstance(wl.get("concurrency"), int)
                                      or wl["concurrency"] < 1):
        raise ConfigError(f"{where}: workload.concurrency = {wl.get('concurrency')!r}: a "
                          "closed loop needs an int >= 1")
    ramp = wl.get("client_ramp_s")
    if ramp is not None and (isinstance(ramp, bool) or not isinstance(ramp, (int, float))
                             or not ramp > 0 or not math.isfinite(ramp)
                             or wl.get("client_start") != "ramp"):
        raise ConfigError(f"{where}: workload.client_ramp_s = {ramp!r}: a 'ramp' start's "
                          "length, a number > 0 in seconds, with client_start = 'ramp'")
    think = wl.get("think_time_s", 0.0)
    if (isinstance(think, bool) or not isinstance(think, (int, float)) or not think >= 0
            or not math.isfinite(think) or (think and wl["arrival"] != "closed")):
        raise ConfigError(f"{where}: workload.think_time_s = {think!r}: a closed loop's mean "
                          "think time, a number >= 0 in seconds")
    if "warm" in wl and ("run" not in wl or "warm_rate" not in wl):
        raise ConfigError(f"{where}: workload.warm needs run (the measured run's file) and "
                          "warm_rate (the warming run's request rate, inf for a burst)")
    warm = wl.get("warm_prompts")
    if warm is not None and (isinstance(warm, bool) or not isinstance(warm, int)
                             or not 1 <= warm <= int(wl.get("num_prompts", 0))
                             or not (wl.get("output_low") == 0
                                     or wl.get("client") == "vllm-bench") or "warm" in wl):
        raise ConfigError(f"{where}: workload.warm_prompts = {warm!r}: how many of a run's "
                          "first prompts the server cached before it (1 to num_prompts; a "
                          "bench_serving random run, output_low = 0, or a vllm-bench "
                          "client's; not with warm)")
    client = wl.get("client")
    if client not in (None, *CLIENT_ARRIVALS) or (
            client is not None and wl["arrival"] != CLIENT_ARRIVALS[client]):
        raise ConfigError(f"{where}: workload.client = {client!r}: 'vllm-bench' or "
                          "'sglang-bench' (their send times at a finite rate, arrival = "
                          "'poisson') or 'perf-analyzer' (its time windows over a closed "
                          "loop, arrival = 'closed')")
    if client == "sglang-bench" and wl.get("dataset") != "sharegpt" \
            and wl.get("output_low") != 0:
        raise ConfigError(f"{where}: workload.client = 'sglang-bench': its send times follow "
                          "its dataset's draws: dataset = 'sharegpt', or the random dataset "
                          "at range ratio 0 (prompt_low/high, output_low = 0, output_high)")
    if "shape_run" in wl and (wl.get("dataset") != "sharegpt" or "output_cap" in wl
                              or any(f"{k}_sigma" in wl for k in ("prompt", "output"))):
        raise ConfigError(f"{where}: workload.shape_run: a recorded ShareGPT run whose pairs "
                          "are resampled to the case's means: needs dataset = 'sharegpt' and "
                          "no output_cap or sigmas (the run gives the shape)")
    seed = wl.get("client_seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                             or not 0 <= seed < 2**32 or client not in CLIENT_SEEDS):
        raise ConfigError(f"{where}: workload.client_seed = {seed!r}: the benchmark "
                          "client's --seed, an int from 0 to 2**32 - 1, with client = "
                          "'vllm-bench' or 'sglang-bench'")
    if client == "perf-analyzer":
        _windows(wl, where)
    else:
        for key in PA_KEYS:
            if key in wl:
                raise ConfigError(f"{where}: workload.{key}: perf_analyzer's setting, only "
                                  "with client = 'perf-analyzer'")
        for key in c["metrics"]:
            if key in PA_METRICS:
                raise ConfigError(f"{where}: metrics.{key}: a p95 is compared only for "
                                  "client = 'perf-analyzer' (over its windows' requests)")
    if not isinstance(wl.get("num_prompts"), int) or wl["num_prompts"] < 1:
        raise ConfigError(f"{where}: workload.num_prompts = {wl.get('num_prompts')!r}: int >= 1")
    _lengths(wl, where)  # raises on a workload whose lengths it cannot read


def _check_engine(given: object, section: str, known: Mapping[str, tuple[float, float]],
                  where: str) -> None:
    """A case's ``cost`` or ``kv`` table: only the keys ``known`` names, each a number in
    its [low, high]."""
    if not isinstance(given, Mapping):
        raise ConfigError(f"{where}: {section} = {given!r}: a table of {section} settings")
    for key, value in given.items():
        if key not in known:
            raise ConfigError(f"{where}: {section}.{key}: not a case's {section} setting; "
                              f"known: {list(known)}")
        low, high = known[key]
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not low <= value <= high):
            raise ConfigError(f"{where}: {section}.{key} = {value!r}: a number in "
                              f"[{low}, {high}]")


def _windows(wl: Mapping[str, Any], where: str) -> TimeWindows:
    """perf_analyzer's windows of a ``client = "perf-analyzer"`` workload
    (``measurement_interval_s``, ``stability_percentage``, ``max_trials``; GenAI-Perf's and
    perf_analyzer's defaults where absent; ``measured_windows``: the windows the source's
    counts say the run scored)."""
    given = {k: wl[k] for k in PA_KEYS if k in wl and k != "measurement_interval_s"}
    try:
        return TimeWindows(interval_s=float(wl.get("measurement_interval_s", 10.0)), **given)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: workload: perf_analyzer's windows: {exc}") from None


def catalogue_status(case: Case) -> str | None:
    """None when the case's GPU and model are in servesim's catalogues, else why not."""
    if case.gpu not in HARDWARE:
        return f"skipped: GPU {case.gpu!r} not in catalogue"
    if catalogue_name(case.model) is None:
        pending = " (pending)" if case.model in PENDING_MODELS else ""
        return f"skipped: model not in catalogue: {case.model}{pending}"
    return None


def run_file(wl: Mapping[str, Any], where: str, key: str = "run") -> Path:
    """The published run whose per-request lengths a case replays (``workload.run``, a path
    from this folder; or another key naming one, ``shape_run``), checked to exist."""
    path = Path(__file__).parent / str(wl[key])
    if not path.is_file():
        raise ConfigError(f"{where}: workload.{key} = {wl[key]!r}: no such file ({path})")
    return path


def _lengths(wl: Mapping[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(prompt, output) length distributions of a case's workload."""
    if "run" in wl:  # a published run's own lengths (benchmarks/published_runs/)
        path = str(run_file(wl, where))
        prompt, output = ({"dist": "trace", "path": path, "column": c, "format": "vllm_bench"}
                          for c in ("prompt", "output"))
        return prompt, output
    if "prompt_tokens" in wl:
        return ({"dist": "fixed", "tokens": int(wl["prompt_tokens"])},
                {"dist": "fixed", "tokens": int(wl["output_tokens"])})
    if "prompt_low" in wl:
        return ({"dist": "uniform", "low": int(wl["prompt_low"]), "high": int(wl["prompt_high"])},
                {"dist": "uniform", "low": int(wl["output_low"]), "high": int(wl["output_high"])})
    if wl.get("dataset") == "sharegpt" and "shape_run" in wl:  # resampled_lengths
        prompt, output = ({"dist": "resampled", "mean": wl[f"{k}_tokens_mean"],
                           "run": str(run_file(wl, where, "shape_run"))}
                          for k in ("prompt", "output"))
        return prompt, output
    if wl.get("dataset") == "sharegpt":
        prompt, output = ({"dist": "lognormal", "mean": wl[f"{k}_tokens_mean"],
                           "sigma": wl[f"{k}_sigma"]} for k in ("prompt", "output"))
        return prompt, output
    raise ConfigError(f"{where}: workload: give prompt_tokens/output_tokens, prompt_low/high "
                      f"and output_low/high, dataset = 'sharegpt' with means and sigmas, or "
                      f"run = a published run's file")


def scenario_point(case: Case, *, max_prompts: int, use_stack: bool,
                   burst_rate: float, trace_dir: Path | None = None,
                   trtllm_buffers: str = "log") -> tuple[dict[str, Any], list[str]]:
    """The scenario point replaying ``case`` and notes on what differs from the source
    (``trtllm_buffers``: benchmarks/trtllm_kv_memory.py's BUFFER_READINGS)."""
    wl, notes = case.workload, []
    folder = trace_dir or Path(tempfile.gettempdir()) / "servesim-published"  # tables written
    prompt, output = _lengths(wl, case.id)
    # A burst's latencies grow with its queue: a case giving any (TTFT, TPOT, E2E) runs all
    # its prompts; throughput alone is set by the steady state, which a sample reaches --
    # except with ShareGPT's long-tailed outputs: the last, longest requests decode at small
    # batches for a fixed time, a larger share of a shorter run (SGLang 0.3's 5000-prompt
    # bursts: -11.5% and -8.0% with 1000 prompts, +10.2% and +30.9% with all 5000).
    latencies = any(UNITS[k] == "ms" and k != "batch_latency_ms" for k in case.metrics)
    whole = latencies or wl.get("dataset") == "sharegpt"
    n = int(wl["num_prompts"]) if whole else min(int(wl["num_prompts"]), max_prompts)
    if n < wl["num_prompts"]:
        notes.append(f"{n} of the source's {wl['num_prompts']} prompts")
    workload = _arrivals(wl, n, burst_rate)
    workload.update(prompt=prompt, output=output)
    if prompt["dist"] == "resampled":  # a recorded run's pairs, scaled to the case's means
        try:
            trace, kept = resampled_lengths(Path(prompt["run"]), float(prompt["mean"]),
                                            float(output["mean"]), n, folder)
        except ConfigError as err:
            raise ConfigError(f"{case.id}: workload.shape_run: {err}") from None
        workload = {**_arrivals(wl, n, burst_rate), "trace": str(trace)}
        notes.append(f"ShareGPT lengths: {kept}")
    elif wl.get("dataset") == "sharegpt":
        cap = wl.get("output_cap")
        trace, kept = sharegpt_lengths(prompt, output, n, folder,
                                       None if cap is None else int(cap))
        workload = {**_arrivals(wl, n, burst_rate), "trace": str(trace)}
        notes.append(f"ShareGPT lengths: lognormal draws kept by the benchmark tools' filter "
                     f"(prompt and output >= 4, prompt <= 1024, prompt + output <= 2048): "
                     f"{kept}" if cap is None else f"ShareGPT lengths: lognormal draws "
                     f"(prompt and output >= 4, prompt <= 1024): {kept}")
    elif "run" in wl and "warm" not in wl:  # the run's own lengths
        trace, drawn = run_lengths(run_file(wl, case.id), folder)
        workload = {**_arrivals(wl, n, burst_rate), "trace": str(trace)}
        notes.append(drawn)
    elif wl.get("output_low") == 0:  # bench_serving's random dataset at range ratio 0
        trace, drawn = random_lengths(int(wl["prompt_low"]), int(wl["prompt_high"]),
                                      int(wl["output_high"]), n, folder,
                                      int(wl.get("client_seed", SGLANG_BENCH_SEED)))
        workload = {**_arrivals(wl, n, burst_rate), "trace": str(trace)}
        notes.append(drawn)
    measure_from: tuple[int, float] | None = None
    if "warm" in wl:  # a run whose prompts an earlier run cached: replay both, score this
        rate = math.inf if wl["arrival"] == "burst" else float(wl["rate"])
        trace, n_warm, start, note = warm_series(
            Path(__file__).parent / str(wl["warm"]), float(wl["warm_rate"]),
            run_file(wl, case.id), rate, folder)
        workload = {"arrival": "trace", "num_requests": n_warm + n, "trace": str(trace),
                    "trace_format": "mooncake"}
        measure_from = (n_warm, start)
        notes.append(note)
    elif wl.get("client") in ("vllm-bench", "sglang-bench") and wl["arrival"] == "poisson":
        workload, note = client_sent(workload, wl, n, folder, case.id)
        notes.append(note)
    if "warm_prompts" in wl:  # its first prompts cached by the server's earlier run
        trace, n_warm, start, note = warm_prompt_series(Path(workload["trace"]),
                                                        int(wl["warm_prompts"]), folder)
        cap = workload.get("max_concurrency", wl.get("max_concurrency"))
        workload = {"arrival": "trace", "num_requests": n_warm + n, "trace": str(trace),
                    "trace_format": "mooncake"}
        if cap is not None:
            workload["max_concurrency"] = int(cap)
        measure_from = (n_warm, start)
        notes.append(note)
    policy: dict[str, Any] = {}
    known = set(knob_rules())  # the scheduler knobs servesim has today
    for key, value in case.knobs.items():
        if key in known:
            policy[key] = value
        elif key == "scheduler_policy" and value in SCHEDULER_POLICY_KNOBS:
            policy.update(SCHEDULER_POLICY_KNOBS[value])
        else:
            notes.append(f"knob {key}={value!r} not modelled")
    point: dict[str, Any] = {
        "name": case.id, "seed": 0,
        "model": {"name": case.model, "weight_dtype": case.weight_dtype,
                  "kv_dtype": case.kv_dtype},
        "hardware": ({"gpu": case.gpu, "tp": 1, "attention_dp": case.tp}
                     if case.parallelism == "dep" else {"gpu": case.gpu, "tp": case.tp}),
        "workload": workload,
    }
    notes += table_limits(case, prompt, output, policy)
    notes += bench_limits(case, prompt, output, policy)
    if case.parallelism == "dep":
        notes.append(f"DEP over {case.tp} GPUs: hardware.attention_dp = {case.tp} at tp 1; the "
                     "batch limits are each rank's (the group's: x attention_dp)")
    notes += engine_context(case, prompt, output, policy)
    kv, kv_notes = trtllm_kv(case, prompt, output, policy, trtllm_buffers)
    if not kv:
        kv, kv_notes = static_session_kv(case, prompt, output, policy)
    notes += kv_notes
    if case.kv:  # a fit's KV-cache settings for the case's engines win (Case.kv)
        kv = {**kv, **case.kv}
        notes.append("engine KV cache: " + ", ".join(f"{k} = {v:g}" for k, v in case.kv.items()))
    if kv:
        point["kv"] = kv
    notes += xqa_note(case)
    reads = masked_mha_reads(case)
    if reads is not None:
        point["cost"] = {"decode_kv_reads": reads}
    if case.cost:  # a fit's settings for the case's engines (Case.cost)
        point.setdefault("cost", {}).update(case.cost)
        notes.append("engine cost: " + ", ".join(f"{k} = {v:g}" for k, v in case.cost.items()))
    if policy:
        point["policy"] = policy
    host = harness_host(case.harness, case.stack)
    if host:  # the runner's own work on the engine's critical path
        point.setdefault("cost", {})["overhead"] = host
        notes.append(harness_note(case.harness, case.stack))
    stream = front_end_host(case.stack_version)
    if stream:  # the server in front of the engine hands out its tokens
        point.setdefault("cost", {}).setdefault("overhead", {}).update(stream)
        notes.append(front_end_note(case.stack_version))
    if use_stack:
        point["stack"] = {"name": case.stack}
    if measure_from is not None:  # scored from this request id and time (MEASURE_FROM)
        point[MEASURE_FROM] = measure_from
    if wl.get("client") == "perf-analyzer":  # scored by its windows (PA_WINDOWS)
        w = _windows(wl, case.id)
        point[PA_WINDOWS] = dataclasses.astuple(w)  # TimeWindows(*it) in published.py
    return point, notes


def client_sent(workload: Mapping[str, Any], wl: Mapping[str, Any], n: int, folder: Path,
                name: str) -> tuple[dict[str, Any], str]:
    """``workload`` with each request sent when the case's benchmark client sent it at the
    case's rate, from the client's ``--seed`` (``client_seed``, else CLIENT_SEEDS), as a
    trace; and a note. ``client = "vllm-bench"``: vLLM's ``benchmark_serving``
    (simulator/workload/arrivals.py ``vllm_bench_sends``, exact for the sonnet and
    ShareGPT datasets); ``"sglang-bench"``: SGLang's ``bench_serving``
    (``sglang_bench_sends``, after its random dataset's length draws where it has them).
    Lengths from the workload's trace, else its fixed lengths."""
    client = str(wl["client"])
    seed = int(wl.get("client_seed", CLIENT_SEEDS[client]))
    if client == "sglang-bench":
        dataset = None if wl.get("dataset") == "sharegpt" else (
            int(wl["prompt_low"]), int(wl["prompt_high"]), 0, int(wl["output_high"]))
        sends = sglang_bench_sends(float(wl["rate"]), n, seed, dataset)
        tool = "SGLang's bench_serving"
    else:
        sends = vllm_bench_arrivals(n, float(wl["rate"]), seed)
        tool = "vLLM's benchmark_serving"
    if "trace" in workload:
        table = pd.read_csv(workload["trace"]).iloc[:n]
    elif "prompt_tokens" in wl:
        table = pd.DataFrame({"request_id": np.arange(n), "prompt_tokens": int(wl["prompt_tokens"]),
                              "output_tokens": int(wl["output_tokens"])})
    else:
        raise ConfigError(f"{name}: workload.client = {client!r} needs fixed lengths, "
                          "dataset = 'sharegpt' or run")
    table = table.assign(arrival_s=sends[: len(table)])
    path = folder / f"sent_{name}.csv"
    atomic_write(path, lambda tmp: table.to_csv(tmp, index=False))
    sent: dict[str, Any] = {"arrival": "trace", "num_requests": n, "trace": str(path)}
    if wl.get("max_concurrency") is not None:  # the client's cap on requests in flight
        sent["max_concurrency"] = int(wl["max_concurrency"])
    return sent, f"sent when {tool} sends them (numpy's gaps from seed {seed})"


def _arrivals(wl: Mapping[str, Any], n: int, burst_rate: float) -> dict[str, Any]:
    """The ``[workload]`` arrival keys replaying a case's load (ARRIVALS)."""
    out: dict[str, Any]
    if wl["arrival"] == "closed":
        out = {"arrival": "closed", "concurrency": int(wl["concurrency"]), "num_requests": n,
               "client_start": str(wl.get("client_start", "together")),
               "think_time_s": float(wl.get("think_time_s", 0.0))}
        if "client_ramp_s" in wl:
            out["client_ramp_s"] = float(wl["client_ramp_s"])
        return out
    rate = burst_rate if wl["arrival"] == "burst" else float(wl["rate"])
    out = {"arrival": "poisson", "rate": rate, "num_requests": n}
    if wl.get("max_concurrency") is not None:
        out["max_concurrency"] = int(wl["max_concurrency"])
    return out


def stack_accepted(point: Mapping[str, Any], case: Case) -> tuple[dict[str, Any], str | None]:
    """``point`` with ``[stack]`` and the case's version when the schema accepts them; else
    the nearest that it accepts, and a note saying what was dropped."""
    version = case.preset or case.stack_version
    versioned = {**point, "stack": {"name": case.stack, "version": version}}
    for candidate, note in ((versioned, None),
                            (dict(point), f"no {case.stack} {version} preset: "
                                          f"the stack's default version")):
        try:
            Scenario.from_dict(candidate, "published")
            return dict(candidate), note
        except ConfigError:
            continue
    bare = {k: v for k, v in point.items() if k != "stack"}
    return bare, "no stack preset yet"


def burst_rate_accepted() -> tuple[float, str | None]:
    """``inf`` when ``workload.rate = inf`` is accepted, else a finite stand-in and a note."""
    probe = {"name": "probe", "model": {"name": "tiny"}, "hardware": {"gpu": "cpu"},
             "workload": {"arrival": "poisson", "rate": math.inf, "num_requests": 1}}
    try:
        Scenario.from_dict(probe, "published")
        return math.inf, None
    except ConfigError:
        return FINITE_BURST_RATE, (f"bursts approximated by Poisson arrivals at "
                                   f"{FINITE_BURST_RATE:g} req/s (workload.rate = inf refused)")
