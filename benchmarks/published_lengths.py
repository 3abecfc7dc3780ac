"""ShareGPT request lengths as the serving benchmarks keep them (benchmarks/published.py).

vLLM's and SGLang's ``sample_sharegpt_requests`` drop conversations whose prompt or output
is under 4 tokens, whose prompt is over 1024, or whose prompt + output is over 2048. A case
gives the kept sample's mean lengths; :func:`sharegpt_lengths` draws log-normal pairs, keeps
them by the same filter, and scales the log-normals until the kept means are the case's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.workload.lengths import LogNormal


def sharegpt_lengths(prompt: Mapping[str, Any], output: Mapping[str, Any], n: int,
                     folder: Path) -> tuple[Path, str]:
    """``n`` (prompt, output) pairs kept as vLLM's and SGLang's ``sample_sharegpt_requests``
    keep ShareGPT conversations (both >= 4 tokens, prompt <= 1024, prompt + output <=
    2048), written as a request table in ``folder``; also their means, for the notes.

    The case's means are those of the kept sample, so each log-normal's mean before the
    filter is scaled (a few fixed-point passes) until the kept means match them. Seeded:
    the same pairs every run."""
    target = np.array([float(prompt["mean"]), float(output["mean"])])
    sigmas = (float(prompt["sigma"]), float(output["sigma"]))
    pre = target.copy()
    for _ in range(8):
        p, o = _kept_pairs(pre, sigmas, n)
        pre *= target / np.array([p.mean(), o.mean()])
    p, o = _kept_pairs(pre, sigmas, n)
    table = pd.DataFrame({"request_id": np.arange(n), "arrival_s": np.zeros(n),
                          "prompt_tokens": p, "output_tokens": o})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"sharegpt_{n}_{prompt['mean']}_{output['mean']}.csv"
    table.to_csv(path, index=False)
    return path, (f"kept means {p.mean():.0f} / {o.mean():.0f} (log-normal means "
                  f"{pre[0]:.0f} / {pre[1]:.0f} before the filter), longest output {o.max()}")


def _kept_pairs(means: np.ndarray, sigmas: tuple[float, float], n: int
                ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    dists = [LogNormal(float(m), s) for m, s in zip(means, sigmas, strict=True)]
    kept_p: list[int] = []
    kept_o: list[int] = []
    while len(kept_p) < n:
        p = dists[0].sample(4 * n, rng).astype(np.int64)
        o = dists[1].sample(4 * n, rng).astype(np.int64)
        ok = (p >= 4) & (o >= 4) & (p <= 1024) & (p + o <= 2048)
        kept_p += p[ok].tolist()
        kept_o += o[ok].tolist()
    return np.array(kept_p[:n]), np.array(kept_o[:n])
