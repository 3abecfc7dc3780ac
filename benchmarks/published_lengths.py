"""Request lengths as the serving benchmarks draw them (benchmarks/published.py).

vLLM's and SGLang's ``sample_sharegpt_requests`` drop conversations whose prompt or output
is under 4 tokens, whose prompt is over 1024, or whose prompt + output is over 2048. A case
gives the kept sample's mean lengths; :func:`sharegpt_lengths` draws log-normal pairs, keeps
them by the same filter, and scales the log-normals until the kept means are the case's.

``sglang.bench_serving``'s random dataset draws each prompt length with
``np.random.randint(max(int(input_len * range_ratio), 1), input_len + 1)`` and then each
output length with ``np.random.randint(int(output_len * range_ratio), output_len + 1)``
(from 0 when the range ratio is 0), after ``np.random.seed(args.seed)``, seed 1 by default.
:func:`random_lengths` makes the same draws from the same legacy generator, so a case gets
the very lengths its run sent (the printed totals check it), and serves a 0 as one token.

A published run that kept its per-request lengths (a ``--save-result`` JSON, shipped in
benchmarks/published_runs/) is replayed with them: :func:`run_lengths`; at a finite rate
with the client's own send times, :func:`vllm_bench_arrivals`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.atomic import atomic_write
from simulator.errors import ConfigError
from simulator.workload.arrivals import sglang_random_lengths, vllm_bench_sends
from simulator.workload.lengths import LogNormal
from simulator.workload.traces_json import load_vllm_bench, load_vllm_bench_result


def sharegpt_lengths(prompt: Mapping[str, Any], output: Mapping[str, Any], n: int,
                     folder: Path, output_cap: int | None = None) -> tuple[Path, str]:
    """``n`` (prompt, output) pairs kept as vLLM's and SGLang's ``sample_sharegpt_requests``
    keep ShareGPT conversations (both >= 4 tokens, prompt <= 1024, prompt + output <=
    2048), written as a request table in ``folder``; also their means, for the notes.

    The case's means are those of the kept sample, so each log-normal's mean before the
    filter is scaled (a few fixed-point passes) until the kept means match them. Seeded:
    the same pairs every run.

    ``output_cap``: a runner that sends a fixed prompt file with ``max_tokens`` = the cap
    instead (AccelMark's): no tool filter but prompts of 4-1024 tokens, every output cut
    at the cap, the case's output mean that of the cut outputs."""
    target = np.array([float(prompt["mean"]), float(output["mean"])])
    sigmas = (float(prompt["sigma"]), float(output["sigma"]))
    if output_cap is not None and not 4 < target[1] < output_cap:
        raise ConfigError(f"workload.output_cap = {output_cap}: must exceed the output mean "
                          f"{target[1]:g} (itself over 4 tokens)")
    pre = target.copy()
    for _ in range(8 if output_cap is None else 30):
        p, o = _kept_pairs(pre, sigmas, n, output_cap)
        pre *= target / np.array([p.mean(), o.mean()])
    p, o = _kept_pairs(pre, sigmas, n, output_cap)
    cap = "" if output_cap is None else f"_cap{output_cap}"
    path = _burst_table(folder / f"sharegpt_{n}_{prompt['mean']}_{output['mean']}{cap}.csv",
                        p, o)
    if output_cap is not None:
        return path, (f"means {p.mean():.0f} / {o.mean():.0f} (log-normal means {pre[0]:.0f} "
                      f"/ {pre[1]:.0f} before the cut), outputs cut at max_tokens "
                      f"{output_cap}: {int((o == output_cap).sum())} of {n}")
    return path, (f"kept means {p.mean():.0f} / {o.mean():.0f} (log-normal means "
                  f"{pre[0]:.0f} / {pre[1]:.0f} before the filter), longest output {o.max()}")


def _kept_pairs(means: np.ndarray, sigmas: tuple[float, float], n: int,
                output_cap: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    dists = [LogNormal(float(m), s) for m, s in zip(means, sigmas, strict=True)]
    kept_p: list[int] = []
    kept_o: list[int] = []
    while len(kept_p) < n:
        p = dists[0].sample(4 * n, rng).astype(np.int64)
        o = dists[1].sample(4 * n, rng).astype(np.int64)
        ok = (p >= 4) & (o >= 4) & (p <= 1024)
        if output_cap is None:
            ok &= p + o <= 2048
        else:
            o = np.minimum(o, output_cap)
        kept_p += p[ok].tolist()
        kept_o += o[ok].tolist()
    return np.array(kept_p[:n]), np.array(kept_o[:n])


SGLANG_BENCH_SEED = 1  # sglang.bench_serving's --seed default (np.random.seed(args.seed))


def random_lengths(prompt_low: int, prompt_high: int, output_high: int, n: int,
                   folder: Path, seed: int = SGLANG_BENCH_SEED) -> tuple[Path, str]:
    """``n`` (prompt, output) pairs as ``sglang.bench_serving``'s random dataset draws them
    at range ratio 0: prompts uniform in [prompt_low, prompt_high], then outputs uniform in
    [0, output_high], from numpy's legacy generator seeded as the tool seeds it; written as
    a request table in ``folder``; also a note for the case. The draws are the run's own:
    seed 1 gives 6,101 input and 4,210 output tokens for 10 prompts of 1000/1000 and
    152,612 / 160,347 for 300 of 1024/1024, as the runs printed.

    A request asking for 0 new tokens still gets the token its prefill samples (the server
    finishes a request once it holds ``max_new_tokens`` outputs, checked after each token),
    so a 0 is served as 1. The benchmark's "Total generated tokens" counts the 0s as 0."""
    p, asked, served = random_draws(prompt_low, prompt_high, output_high, n, seed)
    path = _burst_table(folder / f"random_{n}_{prompt_low}_{prompt_high}_0_{output_high}.csv",
                        p, served)
    return path, (f"outputs uniform in [0, {output_high}] (bench_serving's random dataset, "
                  f"its seed-{seed} draws): {int((asked == 0).sum())} of {n} ask for 0 and are "
                  f"served 1; totals {int(p.sum())} / {int(asked.sum())} asked, means "
                  f"{p.mean():.0f} / {asked.mean():.2f} asked, {served.mean():.2f} served")


def random_draws(prompt_low: int, prompt_high: int, output_high: int, n: int,
                 seed: int = SGLANG_BENCH_SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(prompts, outputs asked, outputs served) as :func:`random_lengths` draws them. The
    legacy generator draws in sequence, so the first ``k`` prompts of ``n`` are those of a
    run of ``k``: a page's runs of 10, 80 and 320 prompts start with the same prompts."""
    rng = np.random.RandomState(seed)  # the tool's own generator: the same values
    p, asked = sglang_random_lengths(rng, (prompt_low, prompt_high, 0, output_high), n)
    return p, asked, np.maximum(asked, 1)


def warm_prompt_series(table: Path, warm: int, folder: Path,
                       gap_s: float = 600.0) -> tuple[Path, int, float, str]:
    """A run (``table``: its request table, as :func:`random_lengths` or a client's send
    times wrote it) whose first ``warm`` prompts the same server cached before it: a
    Mooncake-format trace of those prompts (1 output token each, every one at 0), then,
    ``gap_s`` later, this run's requests at their own times (the table's ``arrival_s``,
    else all at once). Prompt ``i`` is the same text in both: bench_serving takes the
    ``i``-th shuffled ShareGPT conversation, repeated or cut to the ``i``-th drawn length,
    with the same seeds every run, and vLLM's benchmark_serving samples the same prompts
    at the same seed. So both carry hash ids ``1000 i + k``, one per 512 tokens. Returns
    the file, the number of warming requests, this run's first send time and a note."""
    lengths = pd.read_csv(table)
    prompts = lengths["prompt_tokens"].to_numpy()
    served = lengths["output_tokens"].to_numpy()
    sends = (lengths["arrival_s"].to_numpy(np.float64) if "arrival_s" in lengths
             else np.zeros(len(prompts)))
    if not 1 <= warm <= len(prompts):
        raise ValueError(f"warm = {warm}: between 1 and the run's {len(prompts)} prompts")
    lines: list[str] = []
    for offset, outputs, times in ((0.0, np.ones(warm, dtype=int), np.zeros(warm)),
                                   (gap_s, served, sends)):
        for i, (p, o, t) in enumerate(zip(prompts[:len(outputs)], outputs, times,
                                          strict=True)):
            lines.append(_prompt_line(round((offset + t) * 1000.0, 3), i, int(p), int(o)))
    path = folder / f"warm{warm}_{table.stem}.jsonl"
    text = "\n".join(lines) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text))
    return path, warm, gap_s, (
        f"its first {warm} prompt(s) cached before it (the same server's earlier run of "
        f"{warm} prompt(s), or the warm-up request, prompt 0; replayed {gap_s:g} s before "
        "and not scored)")


def _burst_table(path: Path, prompts: np.ndarray, outputs: np.ndarray) -> Path:
    """Write a request table of these lengths, every request at t = 0, to ``path``."""
    n = len(prompts)
    table = pd.DataFrame({"request_id": np.arange(n), "arrival_s": np.zeros(n),
                          "prompt_tokens": prompts, "output_tokens": outputs})
    atomic_write(path, lambda tmp: table.to_csv(tmp, index=False))
    return path


def vllm_bench_arrivals(n: int, rate: float, seed: int = 0) -> np.ndarray:
    """The send times (s from the first) of ``n`` requests as vLLM's ``benchmark_serving``
    spaces them at ``rate`` req/s with its ``--seed`` (default 0) and default burstiness
    (simulator/workload/arrivals.py ``vllm_bench_sends``; exact for the ShareGPT dataset)."""
    if n < 1 or not rate > 0 or math.isinf(rate):
        raise ValueError(f"{n=}, {rate=}: need n >= 1 and a finite rate > 0")
    return vllm_bench_sends(rate, n, seed=seed)


def run_lengths(path: Path, folder: Path) -> tuple[Path, str]:
    """A published run's own per-request (prompt, output) lengths, in send order, as a
    request table in ``folder`` (every request at 0); also a note. The run's file is read
    by servesim's ``vllm_bench`` trace loader (a completion with 0 output tokens is served
    1, the token that ended it)."""
    table = load_vllm_bench(path).table
    prompts = table["prompt_tokens"].to_numpy(np.int64)
    outputs = table["output_tokens"].to_numpy(np.int64)
    out = _burst_table(folder / f"run_{path.stem}.csv", prompts, outputs)
    return out, (f"the run's own {len(prompts)} requests (means {prompts.mean():.0f} / "
                 f"{outputs.mean():.0f}, {path.name})")


def resampled_lengths(run: Path, prompt_mean: float, output_mean: float, n: int,
                      folder: Path, seed: int = 0) -> tuple[Path, str]:
    """``n`` (prompt, output) pairs from a published run's own (``run``: a ``--save-result``
    JSON of the same client on the same dataset, read as :func:`run_lengths` reads it),
    each pair at most once (a seeded permutation), both columns scaled so their means are
    the case's (``prompt_mean``, ``output_mean``: rounded, at least 1 token; a few
    fixed-point passes); written as a request table in ``folder``, and a note.

    For a ShareGPT run whose client serves each reply until the model's end of sequence
    (vLLM's ``benchmark_serving`` without ``--ignore-eos``): its outputs are the model's,
    cut by the conversation's own reply, a shape no log-normal gives. A run of more
    requests than ``run`` holds is refused: its longest outputs, which set its end, lie
    past what this sample saw."""
    table = load_vllm_bench(run).table
    pairs = table[["prompt_tokens", "output_tokens"]].to_numpy(np.float64)
    if not 1 <= n <= len(pairs):
        raise ConfigError(f"{run.name}: {len(pairs)} requests, so it can shape a run of 1 to "
                          f"{len(pairs)}, not {n}")
    total = len(pairs)
    pairs = pairs[np.random.default_rng(seed).permutation(total)[:n]]
    target = np.array([float(prompt_mean), float(output_mean)])
    scale = target / pairs.mean(axis=0)
    for _ in range(8):
        got = np.maximum(np.rint(pairs * scale), 1).astype(np.int64)
        scale *= target / got.mean(axis=0)
    got = np.maximum(np.rint(pairs * scale), 1).astype(np.int64)
    out = _burst_table(folder / f"resampled_{n}_{prompt_mean}_{output_mean}_{run.stem}.csv",
                       got[:, 0], got[:, 1])
    return out, (f"{n} of the {total} (prompt, output) pairs of {run.name}, scaled x "
                 f"{scale[0]:.3f} / {scale[1]:.3f}: means {got[:, 0].mean():.0f} / "
                 f"{got[:, 1].mean():.0f}, longest output {got[:, 1].max()}")


def _prompt_line(timestamp_ms: float, i: int, prompt: int, output: int) -> str:
    """One Mooncake-format trace line for prompt ``i`` of a run: hash ids ``1000 i + k``,
    one per 512 tokens, so prompt ``i`` of two runs is the same content."""
    ids = [1000 * i + k for k in range(max(1, math.ceil(prompt / 512)))]
    return json.dumps({"timestamp": timestamp_ms, "input_length": prompt,
                       "output_length": max(1, output), "hash_ids": ids})


def warm_series(warm: Path, warm_rate: float, run: Path, rate: float, folder: Path,
                gap_s: float = 30.0) -> tuple[Path, int, float, str]:
    """Two published runs of the same prompts against one server, the first warming its
    prefix cache for the second: a Mooncake-format trace (servesim's only format with
    prefix identity) of the first run's requests at its client's send times, then, ``gap_s``
    after the first can have ended (its recorded duration), the second's at its own (each
    at 0 for a burst). Prompt i of both runs carries the same hash ids (one per 512
    tokens), so the second finds what the first left cached. Returns the file, the number
    of warm-up requests (the measured ones follow), the measured run's first send (s) and
    a note."""
    first, second = load_vllm_bench_result(warm)[1], load_vllm_bench_result(run)[1]
    lines: list[str] = []
    start = float(first["duration"]) + gap_s
    for offset, data, r in ((0.0, first, warm_rate), (start, second, rate)):
        n = len(data["input_lens"])
        sends = np.zeros(n) if math.isinf(r) else vllm_bench_sends(r, n)
        for i, (p, o, t) in enumerate(zip(data["input_lens"], data["output_lens"], sends,
                                          strict=True)):
            lines.append(_prompt_line(round((offset + t) * 1000.0, 3), i, int(p), int(o)))
    path = folder / f"warm_{warm.stem}__{run.stem}.jsonl"
    text = "\n".join(lines) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text))
    n_warm = len(first["input_lens"])
    return path, n_warm, start, (
        f"prompts cached first by {warm.name} (replayed before, its {n_warm} requests not "
        f"scored; the same prompt, the same prefix), then this run {gap_s:g} s after it ended")
