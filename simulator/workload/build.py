"""Turning a ``[workload]`` section (simulator/workload/config.py) into a request table.

``build_requests`` draws the requests with the scenario's generator. Draw order (fixed,
so equal seeds give equal tables): arrivals, prompt lengths, output lengths, think
times; then prefix identity and priority classes, each only when asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from simulator.errors import ConfigError
from simulator.workload.arrivals import constant_arrivals, gamma_arrivals, poisson_arrivals
from simulator.workload.classes import add_classes
from simulator.workload.clients import StepTime, closed_loop_table
from simulator.workload.config import DEFAULT_RATE_PER_S, SYNTHETIC, WorkloadConfig
from simulator.workload.prefix_knobs import add_prefix_identity
from simulator.workload.prefixes import PrefixSegments
from simulator.workload.table import validate_request_table
from simulator.workload.traces import load_trace
from simulator.workload.transforms import fit_context, renumber, scale_to_rate


@dataclass(frozen=True, slots=True)
class BuiltWorkload:
    """A request table ready to simulate, with what was changed or dropped on the way."""

    table: pd.DataFrame  # request table (contract 1), request_id 0..n-1
    counts: dict[str, int]  # truncated, truncated_output, dropped_context, dropped_trace[.why]
    notes: list[str]  # facts about how the table was made
    closed_loop: int | None  # closed loop: number of clients (concurrency); None = open loop
    max_concurrency: int | None = None  # open loop: cap on requests in flight; None = none
    segments: PrefixSegments | None = None  # prefix identity of the rows (prefixes.py)


def build_requests(
    cfg: WorkloadConfig, rng: np.random.Generator, max_context_tokens: int | None,
    step_time: StepTime | None = None,
) -> BuiltWorkload:
    """Draw the requests ``cfg`` describes; fit them to ``max_context_tokens`` (None: no fit).
    ``step_time`` (the deployment's cost model) prices ``client_start = 'staggered'``."""
    counts = {"truncated": 0, "truncated_output": 0, "dropped_context": 0, "dropped_trace": 0}
    notes: list[str] = []
    if cfg.ignored:
        keys = " and ".join(f"{cfg.where}.{k}" for k in cfg.ignored)
        notes.append(f"{keys} ignored: the trace {cfg.trace} supplies the lengths")
    table, segments = (_trace_rows(cfg, counts, notes) if cfg.trace is not None
                       else (None, None))
    n = len(table) if table is not None else int(cfg.num_requests or 0)
    arrivals = _synthetic_arrivals(cfg, n, rng) if cfg.arrival in SYNTHETIC else None
    if table is None:
        table = pd.DataFrame(
            {
                "request_id": np.arange(n, dtype=np.int64),
                "arrival_s": np.full(n, np.nan),
                "prompt_tokens": cfg.prompt.sample(n, rng),
                "output_tokens": cfg.output.sample(n, rng),
            }
        )
    if arrivals is not None:
        table = table.assign(arrival_s=arrivals)
    elif cfg.arrival == "trace" and cfg.rate is not None:
        try:
            table = scale_to_rate(table, cfg.rate)
        except ConfigError as exc:
            raise ConfigError(f"{cfg.where}.rate = {cfg.rate}: {exc}") from exc
        notes.append(f"trace arrivals rescaled to a mean rate of {cfg.rate} req/s")
    elif cfg.arrival == "closed":
        table = table.assign(arrival_s=np.nan)
    if max_context_tokens is not None:
        table, fitted = fit_context(table, max_context_tokens, cfg.context_rule)
        counts.update(fitted)
    table = renumber(table)
    if cfg.arrival == "closed":
        table = closed_loop_table(
            table, clients=int(cfg.concurrency or 1), think_time_s=cfg.think_time_s,
            start=cfg.client_start, ramp_s=cfg.client_ramp_s, step_time=step_time, rng=rng,
            notes=notes, where=cfg.where)
    if table.empty:
        raise ConfigError(f"{cfg.where}: no requests left to simulate ({counts})")
    if cfg.system_prompt_tokens or cfg.session_turns > 1:
        table, segments = add_prefix_identity(
            table, system_tokens=cfg.system_prompt_tokens, share=cfg.system_prompt_share,
            num_prompts=cfg.system_prompts, turns=cfg.session_turns, clients=cfg.concurrency,
            rng=rng, max_context_tokens=max_context_tokens, notes=notes)
    if cfg.classes is not None:  # drawn last: a workload without classes draws as before
        table, note = add_classes(table, cfg.classes, rng)
        notes.append(note)
    return BuiltWorkload(
        validate_request_table(table, cfg.where),
        counts,
        notes,
        cfg.concurrency if cfg.arrival == "closed" else None,
        cfg.max_concurrency,
        segments,
    )


def _synthetic_arrivals(cfg: WorkloadConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    if cfg.rate_schedule is not None:
        return cfg.rate_schedule.arrivals(cfg.arrival, n, rng)
    rate = float(cfg.rate or DEFAULT_RATE_PER_S)
    if cfg.arrival == "gamma":
        return gamma_arrivals(rate, cfg.cv, n, rng)
    if cfg.arrival == "constant":
        return constant_arrivals(rate, n)
    return poisson_arrivals(rate, n, rng)


def _trace_rows(cfg: WorkloadConfig, counts: dict[str, int],
                notes: list[str]) -> tuple[pd.DataFrame, PrefixSegments | None]:
    """The trace's rows (first num_requests), checked against the arrival choice, and
    the prefix segments their segment columns slice (None if the trace has none)."""
    loaded = load_trace(str(cfg.trace), cfg.trace_format)
    notes.extend(f"{loaded.source}: {note}" for note in loaded.notes)
    for reason, count in loaded.dropped.items():
        counts[f"dropped_trace.{reason}"] = count
        counts["dropped_trace"] += count
    table = loaded.table
    if cfg.arrival == "trace" and table["arrival_s"].isna().any():
        raise ConfigError(
            f"{cfg.where}.arrival = 'trace' but {loaded.source} ({loaded.format}) "
            "has no arrival times; pick arrival = 'poisson', 'gamma' or "
            "'constant' (or 'closed')"
        )
    n = cfg.num_requests
    if n is not None and n > len(table):
        raise ConfigError(
            f"{cfg.where}.num_requests = {n}: {loaded.source} has only {len(table)} usable requests"
        )
    if n is not None and n < len(table):
        notes.append(f"using the first {n} of {len(table)} trace requests")
        table = table.iloc[:n]
    if cfg.arrival != "trace" and not table["arrival_s"].isna().all():
        notes.append(f"the trace's own arrival times are replaced (arrival = {cfg.arrival!r})")
    return table.reset_index(drop=True), loaded.segments

