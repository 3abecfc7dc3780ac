"""Pure transformations of a request table: rescale time, attach arrivals, fit a context.

Each function takes a valid request table and returns a new one (inputs are never
modified); request ids are kept, so a transformed row can be traced to its source.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from simulator.errors import ConfigError
from simulator.workload.arrivals import check_span
from simulator.workload.table import validate_request_table

ContextRule = Literal["truncate", "drop"]
CONTEXT_RULES: tuple[str, ...] = ("truncate", "drop")


def scale_to_rate(table: pd.DataFrame, rate_per_s: float) -> pd.DataFrame:
    """Stretch or squeeze arrival times so the mean rate is ``rate_per_s``.

    The mean rate of n arrivals is (n - 1) / (last - first). Every gap is multiplied
    by the same factor k = ((n - 1) / rate_per_s) / (last - first), keeping the first
    arrival where it is: arrival' = first + (arrival - first) * k. Burstiness (the
    gaps' coefficient of variation) is unchanged. ``rate_per_s = inf`` gives k = 0: every
    request at the first arrival, in table order (a burst; a trace read from 0 bursts at 0).
    """
    if isinstance(rate_per_s, bool) or not rate_per_s > 0:
        raise ConfigError(f"scale_to_rate: rate_per_s = {rate_per_s}: must be > 0, or inf")
    arrival = table["arrival_s"].to_numpy(dtype=np.float64)
    n = arrival.size
    if n < 2 or np.isnan(arrival).any():
        raise ConfigError(
            f"scale_to_rate: needs at least 2 requests with arrival times; "
            f"got {n} rows, {int(np.isnan(arrival).sum())} without arrival"
        )
    first, span = arrival[0], arrival[-1] - arrival[0]
    if rate_per_s == np.inf:
        return table.assign(arrival_s=np.full(n, first))
    if span <= 0:
        raise ConfigError(
            "scale_to_rate: all requests arrive at the same time "
            f"({first} s); there is no rate to rescale"
        )
    check_span(rate_per_s, n - 1)  # the rescaled trace spans (n - 1) / rate seconds
    factor = ((n - 1) / rate_per_s) / span
    out = table.copy()
    out["arrival_s"] = first + (arrival - first) * factor
    return out


def with_arrivals(table: pd.DataFrame, arrivals_s: np.ndarray) -> pd.DataFrame:
    """Return ``table`` with its arrival_s replaced (for length-only traces).

    ``arrivals_s`` must have one non-decreasing, finite, non-negative time per row.
    """
    arrivals = np.asarray(arrivals_s, dtype=np.float64)
    if arrivals.shape != (len(table),):
        raise ConfigError(
            f"with_arrivals: {arrivals.shape[0] if arrivals.ndim else 0} "
            f"arrival times for {len(table)} requests"
        )
    out = table.copy()
    out["arrival_s"] = arrivals
    if np.isnan(arrivals).any():
        raise ConfigError("with_arrivals: arrival times must not be NaN")
    return validate_request_table(out, "with_arrivals")


def fit_context(
    table: pd.DataFrame, max_context_tokens: int, rule: ContextRule = "truncate"
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Make every request fit ``prompt_tokens + output_tokens <= max_context_tokens``.

    Requests that already fit are untouched. For the others:

    * ``rule="drop"``: the request is removed (counted in ``dropped_context``).
    * ``rule="truncate"``: the output is kept whole when it can be, because output
      tokens drive decode time and KV growth, and the prompt is shortened to
      ``max_context_tokens - output_tokens``. When the output alone needs the whole
      context (``output_tokens >= max_context_tokens``) the prompt becomes 1 token
      and the output ``max_context_tokens - 1`` (counted also in ``truncated_output``).
      ``prefix_tokens``, if present, is cut to at most ``prompt_tokens - 1``.

    Returns the new table (request ids kept) and counts ``truncated`` (all requests
    changed), ``truncated_output`` (those whose output was also cut) and
    ``dropped_context``; every key is present, zero when nothing happened.
    """
    if (
        isinstance(max_context_tokens, bool)
        or int(max_context_tokens) != max_context_tokens
        or max_context_tokens < 2
    ):
        raise ConfigError(
            f"fit_context: max_context_tokens = {max_context_tokens}: must be "
            "a whole number >= 2 (one prompt and one output token)"
        )
    if rule not in CONTEXT_RULES:
        raise ConfigError(f"fit_context: rule = {rule!r}: must be one of {list(CONTEXT_RULES)}")
    limit = int(max_context_tokens)
    prompt = table["prompt_tokens"].to_numpy(dtype=np.int64)
    output = table["output_tokens"].to_numpy(dtype=np.int64)
    over = prompt + output > limit
    counts = {"truncated": 0, "truncated_output": 0, "dropped_context": 0}
    if rule == "drop":
        counts["dropped_context"] = int(over.sum())
        return table.loc[~over].reset_index(drop=True), counts
    long_output = over & (output >= limit)
    new_output = np.where(long_output, limit - 1, output)
    new_prompt = np.where(over, limit - new_output, prompt)
    out = table.copy()
    out["prompt_tokens"] = new_prompt
    out["output_tokens"] = new_output
    if "prefix_tokens" in out:
        out["prefix_tokens"] = np.minimum(out["prefix_tokens"].to_numpy(), new_prompt - 1)
    counts["truncated"] = int(over.sum())
    counts["truncated_output"] = int(long_output.sum())
    return out, counts


def renumber(table: pd.DataFrame) -> pd.DataFrame:
    """Return ``table`` with request_id = 0..n-1 in row order."""
    out = table.reset_index(drop=True)
    out["request_id"] = np.arange(len(out), dtype=np.int64)
    return out
