"""``calibrate --from-run --warm PATH=N``: a run whose first N prompts the server had served
(and cached) before it, replayed after them (calibrate/from_run.py ``with_warm_prompts``).
No torch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import TokenCost, table

from calibrate.from_run import (
    WARM_GAP_S,
    Calibration,
    Target,
    describe_terms,
    fit,
    with_warm_prompts,
)
from calibrate.from_run_setup import parse_warm, warm_prompts
from calibrate.run_records import MeasuredRun
from simulator.cluster import ClusterSpec, simulate
from simulator.costs import load_profile
from simulator.costs.host import HostCost, Overhead
from simulator.errors import ConfigError
from simulator.policies import ContinuousPolicy
from simulator.workload.prefixes import START, STOP, from_lists

BASE = load_profile(Path("simulator/profiles/cpu__tiny__fp32__tp1.json")).build_fitted()
TRUE = Overhead(token_s=4e-4, request_s=5e-3)


def test_warm_prompts_come_first_with_the_runs_prompt_identity() -> None:
    """Three requests sent at 1, 2, 3 s, two prompts warm: those two at 0 (600 s before
    the first send, the clock moved so nothing is before 0), the run at 600, 601, 602;
    prompt i is segment i in both. Replayed with caching on, blocks of 4 tokens, the run's
    first two prompts find their full blocks cached: 8 of 10 tokens, and 8 of 12 (a prompt
    found whole still computes its last block), the third none."""
    reqs = table([(1.0, 10, 3), (2.0, 12, 3), (3.0, 9, 3)])
    got, segments = with_warm_prompts(reqs, 2)
    assert got["arrival_s"].tolist() == [0.0, 0.0, WARM_GAP_S, WARM_GAP_S + 1, WARM_GAP_S + 2]
    assert got["request_id"].tolist() == [3, 4, 0, 1, 2]
    assert got["output_tokens"].tolist() == [1, 1, 3, 3, 3]
    ids = [segments.ids[a:b].tolist() for a, b in zip(got[START], got[STOP], strict=True)]
    assert ids == [[0], [1], [0], [1], [2]]
    spec = ClusterSpec(ContinuousPolicy(), TokenCost(step_s=0.01), 100, 4, prefix_caching=True)
    res = simulate(got, spec, segments=segments).requests.set_index("request_id")
    assert res.loc[[0, 1, 2], "cached_tokens"].tolist() == [8, 8, 0]


def test_bad_warm_settings_are_named(tmp_path: Path) -> None:
    inputs = ["a.json", "runs/b"]
    assert parse_warm(["a.json=200", "runs/b=1"], inputs) == {"a.json": 200, "runs/b": 1}
    assert warm_prompts("runs/b point 2", {"runs/b": 5}) == 5
    assert warm_prompts("runs/bb", {"runs/b": 5}) == 0
    for bad, named in (("a.json", "give PATH=N"), ("a.json=0", "give PATH=N"),
                       ("a.json=x", "give PATH=N"), ("c.json=3", "'c.json' is not one of")):
        with pytest.raises(ConfigError, match=named):
            parse_warm([bad], inputs)
    with pytest.raises(ConfigError, match="of an open loop"):
        with_warm_prompts(table([(0.0, 8, 2)]).assign(arrival_s=np.nan), 1)
    with pytest.raises(ConfigError, match="1 to the run's 1 requests"):
        with_warm_prompts(table([(0.0, 8, 2)]), 2)


def _measured(name: str, sends: np.ndarray, seed: int, warm: int) -> MeasuredRun:
    """A run served with TRUE after its first ``warm`` prompts were (a warm series built
    here by hand, not by with_warm_prompts), as a per-request measured run."""
    rng = np.random.default_rng(seed)
    n = len(sends)
    reqs = table([(float(t), int(p), int(o)) for t, p, o in
                  zip(sends, rng.integers(64, 400, n), rng.integers(4, 30, n), strict=True)])
    earlier = pd.DataFrame({"request_id": np.arange(n, n + warm), "arrival_s": 0.0,
                            "prompt_tokens": reqs["prompt_tokens"][:warm], "output_tokens": 1})
    run = reqs.assign(arrival_s=reqs["arrival_s"] + 1000.0)
    both = pd.concat([earlier, run], ignore_index=True)
    segments, start, stop = from_lists([[(int(i), int(p))] for i, p in
                                        zip([*range(warm), *range(n)], both["prompt_tokens"],
                                            strict=True)])
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=64), HostCost(BASE, TRUE), 4000, 16,
                       request_s=TRUE.request_s, prefix_caching=True)
    r = simulate(both.assign(**{START: start, STOP: stop}), spec, segments=segments).requests
    r = r.set_index("request_id").reindex(reqs["request_id"])
    out = r["output_tokens"].to_numpy()
    return MeasuredRun(name, reqs, (r["first_token_s"] - r["arrival_s"]).to_numpy(),
                       ((r["finish_s"] - r["first_token_s"]) / (out - 1)).to_numpy(),
                       (r["finish_s"] - r["arrival_s"]).to_numpy(), per_request=True)


def test_a_warm_run_is_fitted_only_with_its_cached_prompts() -> None:
    """A cold run at 4 req/s and the same 200 prompts again at 16 req/s, found cached:
    fitted with the second run's prompts replayed first, token 0.42 ms and request 5.2 ms
    (TRUE: 0.4, 5), both runs' mean TTFT within 1%; replayed cold, the fit reads the warm
    run's slow prefills as a faster engine (time_scale 0.21) and misses the cold run's mean
    TTFT by half."""
    sends = np.cumsum(np.random.default_rng(1).exponential(1 / 4.0, 200))
    cold = _measured("cold", sends, 1, 0)
    warm = _measured("warm", sends / 4.0, 1, 200)
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=64), BASE, 4000, 16, prefix_caching=True)
    terms = ("time_scale", "token_s", "request_s")
    right = fit([Target(cold, spec), Target(warm, spec, warm_prompts=200)], terms)
    blind = fit([Target(cold, spec), Target(warm, spec)], terms, Calibration())
    for label, got in (("--warm", right), ("cold replay", blind)):  # pytest -s shows them
        print(f"\n{label}: " + ", ".join(f"{t} {v}" for t, v in
                                         describe_terms(got.calibration, terms))
              + "; mean TTFT " + ", ".join(f"{n} {e['ttft_mean']:+.1%}"
                                           for n, e in got.errors.items()))
    assert right.calibration.time_scale == pytest.approx(1.0, abs=0.02)
    assert right.calibration.overhead.token_s == pytest.approx(4e-4, rel=0.1)
    assert right.calibration.overhead.request_s == pytest.approx(5e-3, rel=0.1)
    assert max(abs(e["ttft_mean"]) for e in right.errors.values()) < 0.02
    assert blind.calibration.time_scale < 0.5
    assert abs(blind.errors["cold"]["ttft_mean"]) > 0.3
