"""Prefix reuse on this CPU: the engine's TTFT with reuse off and on, and the simulator's.

Every request starts with the same 320-token system prompt (20 full blocks of 16) and a
message of 16..48 tokens; requests arrive 0.4 s apart, so each one's TTFT is about one
prefill step. Each case runs three times, off and on interleaved, and a request's TTFT is
the median of its three. In the same test run a small profiling sweep of the engine
(engine/sweep.py, fixed step shapes, none with cached context) is fitted to a linear cost
profile, plus the loop's host costs fitted as calibration fits them. The simulator
predicts both runs with it, and one time scale fitted on the reuse-off run (calibrate
--from-run's time_scale) carries over to the held-out reuse-on run.

What is asserted holds on any machine: the hit counts agree exactly, and the engine saves
at least half the time that this machine's own profile says reuse saves (the profile's
figure, not scaled by the off run's time scale). The held-out error itself
is printed, not bounded: it is a timed fidelity figure, and on the shared 2-vCPU VM it
read -15% to -31% across quiet runs of one build (2026-12-02; it had read -16% a day
earlier). The served hit prefills are small forwards run after a request's wait, and an
idle gap adds about 2 ms to any step there (``python benchmarks/cpu_noise.py``, its third
part), a third of a small step, which the back-to-back profile cannot know
(docs/prefix-caching.md, "TTFT with reuse on the engine"). Runs in seconds on the
random-weight tiny model (its TTFT is timing, not text).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from calibrate.fit import fit_steps  # noqa: E402
from calibrate.host_costs import host_costs_of, serve_synthetic  # noqa: E402
from engine.models import build_model  # noqa: E402
from engine.plan import SweepPlan  # noqa: E402
from engine.serving import replay  # noqa: E402
from engine.sweep import run_sweep  # noqa: E402
from simulator.cluster import ClusterSpec, simulate  # noqa: E402
from simulator.costs.host import Overhead, with_overhead  # noqa: E402
from simulator.costs.linear import LinearCost  # noqa: E402
from simulator.policies import make_policy  # noqa: E402
from simulator.workload.prefixes import START, STOP, from_lists  # noqa: E402

SYSTEM, N, GAP_S, BLOCKS = 320, 10, 0.4, 256
REPEATS = 3  # engine runs of each case; each request's TTFT is the median of its repeats
PLAN = SweepPlan(prefill_batches=(1, 2), prompt_lens=(16, 128, 384), decode_batches=(1, 4),
                 context_lens=(64, 512), mixed_batches=(1,), mixed_chunks=(32, 128),
                 repeats=3, warmup=1)  # 12 shapes, a few seconds


def workload():
    rng = np.random.default_rng(3)
    segments, start, stop = from_lists([[(0, SYSTEM)]] * N)
    table = pd.DataFrame({
        "request_id": range(N), "arrival_s": np.arange(N) * GAP_S,
        "prompt_tokens": SYSTEM + rng.integers(16, 49, N), "output_tokens": 4,
        START: start, STOP: stop,
    })
    return table, segments


def test_engine_ttft_with_reuse_matches_the_simulator(capsys):
    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    em = build_model("tiny", seed=0)
    table, segments = workload()
    policy = {"max_num_batched_tokens": 2048}
    replay(table.head(3), em, make_policy("continuous", **policy), BLOCKS)  # warm up
    report = fit_steps(pd.DataFrame(list(run_sweep(em, PLAN))), form="linear")
    # the serving loop's host work (admit, finish, per step), fitted from a synthetic served
    # run exactly as `servesim calibrate --here` does (calibrate/host_costs.py)
    host = host_costs_of(serve_synthetic(em, num_requests=32))
    cost = with_overhead(LinearCost(**report.coefficients), Overhead(**host.overhead()))
    measured, predicted = {}, {}
    ttfts: dict[bool, list[np.ndarray]] = {False: [], True: []}
    for _ in range(REPEATS):  # off and on interleaved, so a busy spell hits both alike
        for on in (False, True):
            run = replay(table, em, make_policy("continuous", **policy), BLOCKS,
                         segments=segments, prefix_caching=on)
            eng = run.result.requests.sort_values("request_id")
            ttfts[on].append((eng["first_token_s"] - eng["arrival_s"]).to_numpy())
            if on:  # the first request computes the prompt; every other one hits 20 blocks
                hits = eng.set_index("request_id")["cached_tokens"]
                assert hits.tolist() == [0] + [SYSTEM] * (N - 1)
    for on in (False, True):
        spec = ClusterSpec(make_policy("continuous", **policy), cost, kv_blocks=BLOCKS,
                           prefix_caching=on)
        pred = simulate(table, spec, segments=segments).requests
        # per request, the median of the repeats (a load spike on this shared CPU hits
        # one repeat, not three), then the mean over requests as before
        measured[on] = float(np.median(np.vstack(ttfts[on]), axis=0).mean())
        predicted[on] = float((pred["first_token_s"] - pred["arrival_s"]).mean())
        if on:
            assert pred["cached_tokens"].tolist() == [0] + [SYSTEM] * (N - 1)
    with capsys.disabled():
        print(f"\nmean TTFT ms, engine / simulator: reuse off {measured[False] * 1e3:.2f} / "
              f"{predicted[False] * 1e3:.2f}, on {measured[True] * 1e3:.2f} / "
              f"{predicted[True] * 1e3:.2f} (profile held-out MAPE {report.mape:.1%}); reuse on "
              f"after the off run's time scale: "
              f"{measured[False] / predicted[False] * predicted[True] * 1e3:.2f}")
    # calibrate on the reuse-off run (one time scale, as `calibrate --from-run --fit
    # time_scale` fits a measured run), then predict the held-out reuse-on run
    scale = measured[False] / predicted[False]
    err = scale * predicted[True] / measured[True] - 1
    with capsys.disabled():
        print(f"reuse on, held out: {err:+.1%} (scale {scale:.2f}, load average "
              f"{max(load_before, os.getloadavg()[0]):.1f} on {os.cpu_count()} CPUs)")
    # reuse removes most of the prefill it skips, in the engine as the profile predicts:
    # relative to this machine's own profile, not as a fixed share of TTFT (on a CPU whose
    # matmuls are 3x faster the fixed per-step costs are a larger share of both runs). The
    # saving is the skipped tokens' compute, which the back-to-back profile measures itself;
    # the off run's time scale is not applied to it: that scale also carries the idle-gap
    # cost of every served step and any busy spell during the off runs, neither of which the
    # skipped tokens save (a CI run on a loaded VM read scale 1.82 and a saving of 18.7 ms
    # against the profile's 25.0 ms: 75% of the profile's, 41% of the scaled figure)
    assert predicted[True] < predicted[False] and measured[True] < measured[False]
    saved = measured[False] - measured[True]
    assert saved > 0.5 * (predicted[False] - predicted[True])
