"""What ``servesim measure`` sends: a request table (contract 1) and each request's prompt.

The table comes from a scenario TOML (its ``[workload]`` drawn with its ``seed`` by
``build_requests``, exactly as ``servesim run`` draws it, so a simulated and a measured
run see the same requests) or from a trace file any of the simulator's loaders reads.
Requests are fitted (``fit_context``, the scenario's rule) to the server's context, and a
scenario's also to its model's, as ``servesim run`` fits them.

Prompts are token-id lists of exactly ``prompt_tokens`` ids, drawn as
``engine.serving.prompt_ids`` draws them (``default_rng([seed, request_id])``, ids in
``[1, vocab_size)``, the scenario's seed by default), so the engine sees the same prompts
in ``servesim run --backend engine`` and in a measurement of the same scenario point.
Requests of one ``prefix_group`` share their first ``prefix_tokens`` ids. With
``prompt_format="text"`` a prompt is ``prompt_tokens`` common English words instead:
about one token per word for BPE tokenizers, several for the byte-level fallback; the
prompt length recorded is then the server's own count (``usage.prompt_tokens``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.errors import ConfigError
from simulator.scenario import apply_overrides, expand_sweep, load_scenario
from simulator.scenario_types import Scenario
from simulator.workload.build import build_requests
from simulator.workload.traces import load_trace
from simulator.workload.transforms import fit_context

PROMPT_FORMATS = ("ids", "text")
_WORDS = ("the of and to in is it that for on with as was at by be this from or have an "
          "are not but one all can has more will their time new about would there up").split()


@dataclass(slots=True)
class MeasureWorkload:
    """The requests to send, in arrival order, and how they were made."""

    table: pd.DataFrame  # request table (contract 1); arrival_s NaN for a closed loop
    source: str  # the scenario or trace it came from
    concurrency: int | None  # closed loop: clients the workload asks for; None = open loop
    notes: list[str] = field(default_factory=list)
    seed: int = 0  # the scenario's seed (0 for a trace): default seed of the prompt ids


def load_workload(path: str | Path, *, overrides: list[str] | None = None,
                  max_context: int | None = None, num_requests: int | None = None,
                  rate_scale: float = 1.0) -> MeasureWorkload:
    """Load a scenario (``.toml``) or a trace; take the first ``num_requests``; divide
    arrival times by ``rate_scale`` (2 = twice the rate)."""
    if not rate_scale > 0:
        raise ConfigError(f"--rate-scale = {rate_scale}: must be > 0")
    if num_requests is not None and num_requests < 1:
        raise ConfigError(f"--num-requests = {num_requests}: must be >= 1")
    p = Path(path)
    if p.suffix == ".toml":
        wl = _from_scenario(p, overrides or [], max_context)
    elif overrides:
        raise ConfigError(f"--set applies to a scenario TOML, not to the trace {p}")
    else:
        wl = _from_trace(p, max_context)
    table = wl.table
    if num_requests is not None and num_requests < len(table):
        wl.notes.append(f"measuring the first {num_requests} of {len(table)} requests")
        table = table.iloc[:num_requests]
    if rate_scale != 1.0:
        table = table.assign(arrival_s=table["arrival_s"] / rate_scale)
        wl.notes.append(f"arrival times divided by {rate_scale:g} (rate x {rate_scale:g})")
    wl.table = table.reset_index(drop=True)
    return wl


def _from_scenario(path: Path, overrides: list[str], max_context: int | None
                   ) -> MeasureWorkload:
    raw = apply_overrides(load_scenario(path), overrides)
    points = expand_sweep(raw)
    if len(points) != 1:
        axes = ", ".join(sorted(points[0][0]))
        raise ConfigError(f"{path}: a sweep of {len(points)} points ({axes}); measure one "
                          "point, e.g. --set workload.rate=5 (and policy.name=... if swept)")
    sc = Scenario.from_dict(points[0][1], str(path))
    seed = sc.seed
    model_context = sc.served_context()  # what `servesim run` fits to
    max_context = model_context if max_context is None else min(max_context, model_context)
    built = build_requests(sc.workload, np.random.default_rng(seed), max_context)
    notes = list(built.notes) + [f"drawn with seed {seed}; fitted to a context of "
                                 f"{max_context} tokens: {built.counts}"]
    return MeasureWorkload(built.table, str(path), built.closed_loop, notes, int(seed))


def _from_trace(path: Path, max_context: int | None) -> MeasureWorkload:
    loaded = load_trace(path)
    notes = [f"{loaded.source} ({loaded.format}): {n}" for n in loaded.notes]
    notes += [f"dropped {n} trace rows: {why}" for why, n in loaded.dropped.items()]
    table = loaded.table
    if max_context is not None:
        table, counts = fit_context(table, max_context)
        notes.append(f"fitted to a context of {max_context} tokens: {counts}")
    return MeasureWorkload(table, str(path), None, notes)


def prompt_for(row: pd.Series, vocab_size: int, seed: int, fmt: str) -> str | list[int]:
    """The prompt of one request row (see the module docstring)."""
    rid, n = int(row["request_id"]), int(row["prompt_tokens"])
    ids = np.random.default_rng([seed, rid]).integers(1, vocab_size, size=n)
    group = row.get("prefix_group", -1)
    shared = int(row.get("prefix_tokens", 0) or 0)
    if group is not None and not pd.isna(group) and int(group) >= 0 and shared > 0:
        prefix = np.random.default_rng([seed, int(group), 7919]).integers(
            1, vocab_size, size=min(shared, n))
        ids[:prefix.size] = prefix
    if fmt == "ids":
        return [int(i) for i in ids]
    return " ".join(_WORDS[int(i) % len(_WORDS)] for i in ids)
