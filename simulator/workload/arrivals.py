"""Synthetic open-loop arrival processes: times in seconds from the start of the run.

Every process draws from the ``numpy.random.Generator`` it is given (none keeps
state of its own) and returns a non-decreasing float64 array of ``n`` times. Gaps
are never capped or truncated: a cap on exponential gaps shortens the mean gap and
runs the workload faster than the rate asked for.

A workload may span at most ``MAX_SPAN_S`` of simulated time: float64 seconds resolve
0.12 microseconds at 1e9 s but a whole second at 1e16 s, so much beyond it a 10 ms step
vanishes in the sum ``arrival + step`` and every latency reads 0 (``rate = 1e-300``
did exactly that). Such a rate is refused with the span it would take.

``rate_per_s = inf`` means "every request at once" (vLLM ``bench serve --request-rate
inf``): every process returns ``n`` zeros, in request order, and draws nothing.
"""

from __future__ import annotations

import numpy as np

from simulator.errors import ConfigError

MAX_SPAN_S = 1e9
"""Longest simulated time a synthetic workload may span, s (about 31.7 years)."""


def check_span(rate_per_s: float, n: int) -> None:
    """Refuse a rate that is not positive (or is NaN), or whose ``n`` requests would span
    more than ``MAX_SPAN_S`` of simulated time (ConfigError naming workload.rate).
    ``inf`` spans 0 s (a burst) and passes."""
    if isinstance(rate_per_s, bool) or not rate_per_s > 0:
        raise ConfigError(f"{rate_per_s=}: must be > 0 (requests per second), or inf")
    if isinstance(n, bool) or int(n) != n or n < 0:
        raise ConfigError(f"{n=}: must be a whole number >= 0")
    span_s = n / rate_per_s
    if span_s > MAX_SPAN_S:
        raise ConfigError(
            f"workload.rate = {rate_per_s:g} req/s: {int(n):,} requests at this rate span about "
            f"{span_s:.3g} s of simulated time, more than the {MAX_SPAN_S:.0e} s limit (beyond "
            "it float64 times cannot resolve a step, and latencies would read 0); raise "
            f"workload.rate to at least {n / MAX_SPAN_S:.3g} req/s or lower num_requests")


def poisson_arrivals(rate_per_s: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Poisson process: gaps are i.i.d. exponential with mean ``1 / rate_per_s``.

    The first request arrives after the first gap (not at 0), so the whole run
    is a stationary Poisson process started at t = 0.
    """
    check_span(rate_per_s, n)
    if rate_per_s == np.inf:
        return burst_arrivals(n)
    return np.cumsum(rng.exponential(1.0 / rate_per_s, size=int(n)))


def gamma_arrivals(rate_per_s: float, cv: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Renewal process with gamma-distributed gaps of mean ``1 / rate_per_s``.

    Shape k = 1 / cv**2 and scale theta = 1 / (rate_per_s * k) give mean k * theta =
    1 / rate and coefficient of variation (std / mean) 1 / sqrt(k) = cv. cv = 1 is the
    exponential (Poisson) case and then draws exactly what :func:`poisson_arrivals`
    draws from the same generator; cv > 1 is burstier than Poisson (many short gaps,
    a few long ones), cv < 1 more regular. As with Poisson, the first arrival is the
    first gap. (vLLM's ``--burstiness`` b is this with cv = 1 / sqrt(b).)
    """
    check_span(rate_per_s, n)
    if isinstance(cv, bool) or not (np.isfinite(cv) and cv > 0):
        raise ConfigError(f"{cv=}: must be > 0 and finite")
    if cv == 1.0 or rate_per_s == np.inf:
        return poisson_arrivals(rate_per_s, n, rng)
    shape = 1.0 / cv**2
    return np.cumsum(rng.gamma(shape, 1.0 / (rate_per_s * shape), size=int(n)))


def sglang_bench_sends(rate_per_s: float, n: int, seed: int = 1,
                       random_dataset: tuple[int, int, int, int] | None = None) -> np.ndarray:
    """When SGLang's ``bench_serving`` sends ``n`` requests at ``--request-rate`` r: the
    first at 0, then after each request a gap ``np.random.exponential(1 / r)``
    (``get_request``) from numpy's global generator, which it seeds with ``--seed``
    (default 1) before it samples the dataset.

    Its random dataset draws from that generator first, the prompt lengths
    ``randint(prompt_low, prompt_high + 1, n)`` and then the output lengths
    ``randint(output_low, output_high + 1, n)``: ``random_dataset = (prompt_low,
    prompt_high, output_low, output_high)`` makes the same draws before the gaps. Its
    ShareGPT dataset samples with Python's ``random`` and draws nothing from numpy (no
    ``random_dataset``). DataCrunch's SGLang 0.4 runs at 1 and 2 req/s, sent at these times
    with their random lengths at each run's median TTFT and ITL, end within 2.2 s of their
    recorded durations of about 300 s; seeds 0, 2, 3 and 42 miss one of them by 14-21 s
    (tests/test_arrivals_sglang_bench.py)."""
    check_span(rate_per_s, n)
    if rate_per_s == np.inf:
        return burst_arrivals(n)
    legacy = np.random.RandomState(seed)  # what np.random.seed(seed) seeds
    if random_dataset is not None:
        sglang_random_lengths(legacy, random_dataset, n)
    gaps = legacy.exponential(1.0 / rate_per_s, size=max(int(n) - 1, 0))
    return np.concatenate([np.zeros(min(int(n), 1)), np.cumsum(gaps)])


def sglang_random_lengths(legacy: np.random.RandomState,
                          random_dataset: tuple[int, int, int, int], n: int
                          ) -> tuple[np.ndarray, np.ndarray]:
    """(prompt lengths, output lengths asked) of SGLang ``bench_serving``'s random dataset,
    drawn from ``legacy`` (its seeded global generator) as the tool draws them: the
    prompts ``randint(prompt_low, prompt_high + 1, n)``, then the outputs
    ``randint(output_low, output_high + 1, n)`` (``random_dataset = (prompt_low,
    prompt_high, output_low, output_high)``). The one place that order lives: the send
    times (:func:`sglang_bench_sends`) are the draws after these."""
    prompt_low, prompt_high, output_low, output_high = random_dataset
    prompts = legacy.randint(prompt_low, prompt_high + 1, size=int(n))
    return prompts, legacy.randint(output_low, output_high + 1, size=int(n))


def constant_arrivals(rate_per_s: float, n: int) -> np.ndarray:
    """Evenly spaced arrivals ``i / rate_per_s`` for i = 0..n-1: the first is at 0.

    Deterministic (no generator). Unlike the random processes the first request
    arrives at t = 0, so n requests span exactly (n - 1) / rate seconds and the mean
    rate (n - 1) / (last - first) is exactly ``rate_per_s``.
    """
    check_span(rate_per_s, n)
    if rate_per_s == np.inf:
        return burst_arrivals(n)
    return np.arange(int(n), dtype=np.float64) / rate_per_s


def burst_arrivals(n: int) -> np.ndarray:
    """``rate = inf``: all ``n`` requests arrive at t = 0, in request order (the simulator
    keeps table order among equal times). Nothing is drawn."""
    return np.zeros(int(n), dtype=np.float64)


def vllm_bench_sends(rate_per_s: float, n: int, burstiness: float = 1.0,
                     seed: int = 0) -> np.ndarray:
    """When vLLM's ``benchmark_serving`` (``vllm bench serve``) sends ``n`` requests at
    ``--request-rate`` r: the first at 0, then after each request a gap
    ``np.random.gamma(shape=b, scale=1 / (r b))`` (``get_request``; b = ``--burstiness``)
    from numpy's global generator, which ``main`` seeds with ``--seed`` (default 0).

    The client's own times, not a draw like them: exact when nothing drew from numpy's
    global generator before the first gap (true of the ShareGPT and sonnet datasets, which
    Python's ``random`` samples; not of ``random``, drawn with ``np.random.randint``).
    Three published runs at 1, 4 and 16 req/s (benchmarks/published_runs/) end, sent at
    these times with their measured latencies, 0.12-0.15 s before their recorded durations
    (the client's own work between sends); seeds 1-4 miss by 0.38-25.7 s."""
    check_span(rate_per_s, n)
    if rate_per_s == np.inf:
        return burst_arrivals(n)
    if isinstance(burstiness, bool) or not (np.isfinite(burstiness) and burstiness > 0):
        raise ConfigError(f"{burstiness=}: must be > 0 and finite")
    legacy = np.random.RandomState(seed)  # what np.random.seed(seed) seeds
    gaps = legacy.gamma(burstiness, 1.0 / (rate_per_s * burstiness), size=max(int(n) - 1, 0))
    return np.concatenate([np.zeros(min(int(n), 1)), np.cumsum(gaps)])
