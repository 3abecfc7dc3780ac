"""``calibrate --from-run`` on a real server's runs (benchmarks/from_run_llmk8s.py):
llm-k8s's four vLLM 0.8.3 runs of Llama-3.3-70B on eight A100-40GB, shipped in
benchmarks/published_runs/, per-request TTFT and inter-token times, one server, prefix
caching on, so every run after the first found its 200 prompts cached. No torch; the
replays are simulations, the same on any machine.
"""

from __future__ import annotations

import pytest

from benchmarks.from_run_llmk8s import NAMES, fitted_targets
from calibrate.from_run import errors, fit, replay


def test_the_preset_reads_the_runs_once_their_cached_prompts_are_replayed() -> None:
    """The vllm-v1 0.8 preset (host terms fitted on these runs' aggregates) reads every
    run's mean TTFT within 3.1% and mean TPOT within 6.3% when each run's cached prompts are
    replayed first (``--warm``); replayed cold, the three cached runs read +41%, +87% and
    +636%."""
    warm, start = fitted_targets(True)
    cold, _ = fitted_targets(False)
    assert [t.warm_prompts for t in warm] == [1, 200, 200, 200]
    for w, c, name in zip(warm, cold, NAMES, strict=True):
        hot, plain = errors(w.run, replay(w, start)), errors(c.run, replay(c, start))
        assert abs(hot["ttft_mean"]) < 0.05 and abs(hot["tpot_mean"]) < 0.08, name
        if name != "qps01":  # only the warm-up prompt was cached before the first run
            assert plain["ttft_mean"] > 0.3, name


def test_a_per_request_fit_finds_the_presets_intake() -> None:
    """Fitted per request on the four (time_scale, request_s, intake_s; the preset's step
    and row costs held): intake 1.645 ms, where the preset's 1.715 ms was fitted on the
    burst's aggregates (benchmarks/published_fit.py); time_scale 1.004."""
    ts, start = fitted_targets(True)
    got = fit(ts, ("time_scale", "request_s", "intake_s"), start).calibration
    assert got.overhead.intake_s == pytest.approx(start.overhead.intake_s, rel=0.1)
    assert got.time_scale == pytest.approx(1.0, abs=0.02)
