"""The workload's prefix knobs: a shared system prompt and multi-turn sessions.

``system_prompt_tokens``, ``system_prompt_share``, ``system_prompts`` and
``session_turns`` of ``[workload]`` (meanings in simulator/workload/prefixes.py and
docs/prefix-caching.md). They are applied last, after the closed loop's clients and think
times are drawn, and draw from the generator only when set, so a workload without them is
the same table, draw for draw, as before they existed. Draw order: which sessions (or
requests) get a system prompt, then which prompt.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.errors import ConfigError
from simulator.workload.prefixes import (
    START,
    STOP,
    PrefixSegments,
    identity_segments,
    session_prompts,
)


def check_prefix_knobs(where: str, *, arrival: str, trace: str | None, system_tokens: int,
                       share: float, num_prompts: int, turns: int) -> None:
    """Combinations the prefix knobs refuse (their ranges are checked by their specs)."""
    if turns > 1 and arrival != "closed":
        raise ConfigError(
            f"{where}.session_turns = {turns}: sessions need arrival = 'closed' (a turn is "
            "sent think_time_s after the previous one ends); set arrival and concurrency")
    if system_tokens == 0 and (share != 1.0 or num_prompts != 1):
        raise ConfigError(
            f"{where}.system_prompt_share = {share} / system_prompts = {num_prompts}: only "
            f"with system_prompt_tokens > 0 (it is 0)")
    if trace is not None and (system_tokens > 0 or turns > 1):
        raise ConfigError(
            f"{where}.trace = {trace!r}: a trace's requests keep their own prefixes; drop "
            "system_prompt_tokens and session_turns")


def add_prefix_identity(
    table: pd.DataFrame, *, system_tokens: int, share: float, num_prompts: int, turns: int,
    clients: int | None, rng: np.random.Generator, max_context_tokens: int | None,
    notes: list[str],
) -> tuple[pd.DataFrame, PrefixSegments | None]:
    """``table`` with the knobs' prompts and segment columns, and the segments (None and
    the table unchanged when no knob is set)."""
    if system_tokens == 0 and turns == 1:
        return table, None
    n = len(table)
    prompt = table["prompt_tokens"].to_numpy(np.int64)
    output = table["output_tokens"].to_numpy(np.int64)
    session = None
    if turns > 1:
        session, turn, prompt = session_prompts(table, int(clients or 1), turns, "workload")
        notes.append(f"sessions of {turns} turns per client: turn t's prompt = turn t-1's "
                     "prompt + output + a new message of the drawn prompt length")
    units = int(session.max()) + 1 if session is not None and n else n
    chosen = np.full(units, -1, dtype=np.int64)  # each unit's system prompt, -1: none
    if system_tokens > 0:  # a unit is a session, or a request without sessions
        shares = rng.random(units) < share
        chosen = np.where(shares, rng.integers(0, num_prompts, size=units), -1)
    system = chosen[session] if session is not None else chosen
    if system_tokens > 0:
        prompt = prompt + np.where(system >= 0, system_tokens, 0)
        notes.append(f"{int((system >= 0).sum())} of {n} requests start with one of "
                     f"{num_prompts} shared {system_tokens}-token system prompt(s)")
    if max_context_tokens is not None:
        over = prompt + output > max_context_tokens
        if over.any():
            prompt = np.where(over, np.maximum(1, max_context_tokens - output), prompt)
            notes.append(f"{int(over.sum())} prompt(s) with a system prompt or earlier turns "
                         f"cut to fit {max_context_tokens} tokens with their output")
    segments, start, stop = identity_segments(prompt, output, system, system_tokens,
                                              num_prompts, session)
    return table.assign(prompt_tokens=prompt, **{START: start, STOP: stop}), segments
