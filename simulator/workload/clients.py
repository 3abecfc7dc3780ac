"""When each closed-loop client sends its first request (``workload.client_start``).

A closed loop of C clients whose first requests all go out at t = 0 sends C prompts in
one instant; with equal lengths the clients then finish, and send again, together, so
every prompt keeps colliding with C - 1 others (lockstep). Real load generators differ:

- ``together`` (today's default): every client's first request at t = 0. vLLM ``bench
  serve --max-concurrency C`` (rate inf) does this: every request is launched at once
  behind a semaphore of C (vllm/benchmarks/serve.py, ``benchmark``).
- ``ramp`` with ``client_ramp_s = R``: client k (0-based) first sends at ``k * R / C``.
  GuideLLM's concurrent strategy with ``rampup_duration = R`` (guidellm
  src/guidellm/scheduler/strategies.py, ``ConcurrentStrategy.next_request_time``, commit
  03820eb) spreads the first C requests at exactly these times. AIPerf's
  ``--concurrency-ramp-duration D`` raises the limit by one at even steps from 1 to C,
  finishing at D (docs/tutorials/ramping.md, AIPerf 0.13): client k at ``k * D / (C - 1)``,
  i.e. ``R = D * C / (C - 1)`` here.
- ``staggered``: a ramp whose length is one client's estimated cycle, R = L + think, so
  the clients start as they would be spread in a steady state where they are out of step:
  one send every (L + think) / C. L is the latency of a mean request among C running ones,
  priced by the deployment's cost model (:func:`cycle_estimate_s`).
- ``random``: each client first sends at an independent uniform time in one estimated
  cycle (seeded): the phases of a steady state that nothing holds evenly apart, so two
  prompts sometimes meet, as they do behind a real server whose step times jitter.

The start time travels in the request table as the ``think_s`` of each client's first
request (the pause before it is sent, counted from t = 0).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from simulator.errors import ConfigError
from simulator.shapes import StepShape

CLIENT_STARTS: tuple[str, ...] = ("together", "staggered", "ramp", "random")
StepTime = Callable[[StepShape], float]  # seconds one engine step of this shape takes


def first_send_s(clients: int, ramp_s: float) -> np.ndarray:
    """Client k's first send time, ``k * ramp_s / clients`` for k = 0..clients-1 (s)."""
    return np.arange(int(clients), dtype=np.float64) * (float(ramp_s) / int(clients))


def cycle_estimate_s(step_time: StepTime, prompt_tokens: float, output_tokens: float,
                     clients: int, think_s: float) -> float:
    """One client's cycle L + think, s: L = prefill(P) + (O - 1) * decode(C rows).

    P and O are the mean prompt and output tokens (rounded); the prefill is one step of P
    new tokens (attention work P * P / 2); a decode step has C rows each attending to the
    mid-answer context P + O / 2. Queueing is left out: it is what staggering avoids.
    """
    p, o, c = max(1, round(prompt_tokens)), max(1, round(output_tokens)), int(clients)
    prefill = step_time(StepShape(num_prefill_tokens=p, prefill_attn_work=p * p / 2.0,
                                  num_admitted=1))
    decode = step_time(StepShape(num_decode_seqs=c, decode_context_tokens=c * (p + o // 2)))
    return float(prefill + (o - 1) * decode + think_s)


def closed_loop_table(table: pd.DataFrame, *, clients: int, think_time_s: float, start: str,
                      ramp_s: float, step_time: StepTime | None, rng: np.random.Generator,
                      notes: list[str], where: str = "workload") -> pd.DataFrame:
    """Assign clients round-robin (client_id = i % clients) and draw think times.

    think_s ~ exponential with mean think_time_s (all 0 when it is 0), one draw per request;
    the first request of client k (row k) gets instead its start time (module docstring):
    0 for ``together``. ``staggered`` needs ``step_time`` (the deployment's cost model).
    """
    n = len(table)
    think = rng.exponential(think_time_s, size=n) if think_time_s > 0 else np.zeros(n)
    first = min(n, clients)
    think[:first] = _starts(table, clients, think_time_s, start, ramp_s, step_time, notes,
                            where)[:first]
    if start == "random":  # drawn after the think times: the other starts draw nothing
        think[:first] *= rng.uniform(0.0, 1.0, size=first)
    notes.append(
        f"closed loop: {clients} clients send {n} requests in total; client_id = "
        f"i % {clients}; think_s ~ exponential(mean {think_time_s} s)"
    )
    return table.assign(client_id=np.arange(n, dtype=np.int64) % clients, think_s=think)


def _starts(table: pd.DataFrame, clients: int, think_time_s: float, start: str, ramp_s: float,
            step_time: StepTime | None, notes: list[str], where: str) -> np.ndarray:
    if start == "together":
        return np.zeros(clients)
    if start == "ramp":
        notes.append(f"clients ramp up: client k first sends at k * {ramp_s:g} / {clients} s")
        return first_send_s(clients, ramp_s)
    if step_time is None:
        raise ConfigError(
            f"{where}.client_start = {start!r} needs the deployment's cost model to "
            "estimate a client's cycle; here there is none: give client_start = 'ramp' "
            "and client_ramp_s")
    cycle = cycle_estimate_s(step_time, float(table["prompt_tokens"].mean()),
                             float(table["output_tokens"].mean()), clients, think_time_s)
    if start == "random":
        notes.append(f"clients start at uniform random times in one estimated cycle of "
                     f"{cycle:.4g} s")
        return np.full(clients, cycle)
    notes.append(f"clients staggered over one estimated cycle of {cycle:.4g} s: client k "
                 f"first sends at k * {cycle:.4g} / {clients} s")
    return first_send_s(clients, cycle)


def lockstep_lengths(arrival: str, client_start: str, clients: int | None,
                     requests: pd.DataFrame) -> tuple[int, int] | None:
    """(prompt, output) tokens when a closed loop of two or more clients starts
    ``together`` and every one of ``requests`` has those same lengths: its rounds then stay
    in lockstep (module docstring), else None."""
    if arrival != "closed" or client_start != "together" or (clients or 1) < 2 \
            or requests.empty:
        return None
    prompts, outputs = requests["prompt_tokens"].unique(), requests["output_tokens"].unique()
    if len(prompts) != 1 or len(outputs) != 1:
        return None
    return int(prompts[0]), int(outputs[0])


def lockstep_text(prompt: int, output: int) -> str:
    """What a run's report says of clients in lockstep (:func:`lockstep_lengths`)."""
    return (f"closed-loop clients that start together with equal lengths ({prompt} prompt and "
            f"{output} output tokens each) stay in lockstep: each round's prompts reach the "
            "engine at once, so every TTFT waits for the other clients' prefill. Measured "
            "closed loops drift out of step and can read far lower (docs/metrics.md, "
            "\"Closed-loop clients\"); client_start = 'random' gives the other end.")

