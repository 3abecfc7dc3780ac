"""Published runs with per-request records (benchmarks/published_runs/): the client's send
times reconstructed, and a case replaying a run's own lengths."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks.published import run_case
from benchmarks.published_cases import MEASURE_FROM, load_cases, scenario_point
from benchmarks.published_lengths import run_lengths, vllm_bench_arrivals
from simulator.measured import load_measured
from simulator.workload.arrivals import vllm_bench_sends

RUNS = Path(__file__).resolve().parents[1] / "benchmarks" / "published_runs"
LLMK8S = "llmk8s-a100-40gb-llama-3.3-70b-tp8-sharegpt200-qps{}.json"


def test_arrivals_are_numpy_gamma_gaps_from_seed_0() -> None:
    # by hand: legacy RandomState(0).gamma(1, 0.5) twice, then the cumulative sum
    gaps = np.random.RandomState(0).gamma(1.0, 0.5, size=2)
    got = vllm_bench_arrivals(3, rate=2.0)
    assert got.tolist() == [0.0, gaps[0], gaps[0] + gaps[1]]
    # burstiness 1 makes the gamma an exponential: mean gap 1 / rate over many requests
    assert vllm_bench_arrivals(20001, rate=4.0)[-1] / 20000 == pytest.approx(0.25, rel=0.02)
    with pytest.raises(ValueError):
        vllm_bench_arrivals(5, rate=math.inf)


@pytest.mark.parametrize("qps", ["01", "04", "16"])
def test_reconstructed_sends_give_the_recorded_duration(qps: str) -> None:
    """The last request to finish, sent at the reconstructed time and taking its measured
    TTFT plus its gaps, ends where the client's recorded duration does (within 0.15 s of
    runs lasting 31-205 s: the client's own dispatch between sends)."""
    run = json.loads((RUNS / LLMK8S.format(qps)).read_text())
    n = len(run["input_lens"])
    e2e = np.array([t + sum(g) for t, g in zip(run["ttfts"], run["itls"], strict=True)])
    miss = [abs((vllm_bench_sends(float(run["request_rate"]), n, seed=seed) + e2e).max()
                - run["duration"]) for seed in range(5)]
    assert miss[0] < 0.15
    # other seeds' sends miss by 0.38-25.7 s on these runs: it is seed 0's draws that ran
    assert min(miss[1:]) > 2 * miss[0]


def test_run_lengths_are_the_files_own(tmp_path: Path) -> None:
    path = RUNS / LLMK8S.format("01")
    run = json.loads(path.read_text())
    table_path, note = run_lengths(path, tmp_path)
    table = np.genfromtxt(table_path, delimiter=",", names=True)
    assert table["prompt_tokens"].sum() == 42659 == sum(run["input_lens"])
    # outputs as recorded, a 0 served as the 1 token that ended the request
    assert table["output_tokens"].tolist() == [max(1, o) for o in run["output_lens"]]
    assert "200 requests" in note


def test_the_llmk8s_case_replays_the_run_at_its_send_times(tmp_path: Path) -> None:
    (case,) = [c for c in load_cases() if c.id.endswith("llmk8s-a100-40gb-llama-3.3-70b-tp8-"
                                                        "sharegpt200-qps1")]
    point, notes = scenario_point(case, max_prompts=1000, use_stack=True,
                                  burst_rate=math.inf, trace_dir=tmp_path)
    assert point["workload"]["arrival"] == "trace"
    assert point["workload"]["num_requests"] == 200
    assert point["hardware"] == {"gpu": "a100-40gb", "tp": 8}
    assert any("sent when vLLM's benchmark_serving sends them" in n for n in notes)
    sent = np.genfromtxt(point["workload"]["trace"], delimiter=",", names=True)
    np.testing.assert_array_equal(sent["arrival_s"], vllm_bench_sends(1.0, 200))
    assert sent["prompt_tokens"].sum() == 42659


def test_the_measured_loader_rebuilds_the_client_sends(tmp_path: Path) -> None:
    """A vLLM bench file has no send times; at a finite rate the loader rebuilds the
    client's (seed 0) and keeps them only where the file's duration agrees."""
    run = load_measured(RUNS / LLMK8S.format("04"))
    assert run.arrivals_known and "compared request by request" in run.assumed_arrivals
    np.testing.assert_array_equal(run.requests["arrival_s"].to_numpy(), vllm_bench_sends(4.0, 200))
    # the same requests claimed at 5 req/s: sent at those times, the last would end 11.3 s
    # before the recorded duration, not 0.14 s: distributions only, saying why
    data = json.loads((RUNS / LLMK8S.format("04")).read_text())
    data["request_rate"] = 5.0
    other = tmp_path / "bench.json"
    other.write_text(json.dumps(data))
    run = load_measured(other)
    assert not run.arrivals_known and "do not fit this file" in run.assumed_arrivals


def test_a_cached_run_is_replayed_after_the_run_that_cached_it(tmp_path: Path) -> None:
    """The 4 req/s run met the 1 req/s run's prompts in the prefix cache: both are replayed
    in one trace, prompt i with the same hash ids in each, and only the second is scored."""
    (case,) = [c for c in load_cases() if c.id.endswith("-qps4-cached")]
    point, notes = scenario_point(case, max_prompts=1000, use_stack=True,
                                  burst_rate=math.inf, trace_dir=tmp_path)
    first, start = point[MEASURE_FROM]
    warm = json.loads((RUNS / LLMK8S.format("01")).read_text())
    assert first == 200 and start == pytest.approx(warm["duration"] + 30.0)
    rows = [json.loads(line) for line in Path(point["workload"]["trace"]).read_text().splitlines()]
    assert len(rows) == 400 and point["workload"]["trace_format"] == "mooncake"
    assert [r["hash_ids"] for r in rows[:200]] == [r["hash_ids"] for r in rows[200:]]
    assert rows[200]["timestamp"] == pytest.approx(start * 1000.0)
    assert any("prompts cached first by" in n for n in notes)
    row = run_case(case, max_prompts=1000, burst_rate=math.inf)
    assert row["status"] == "ok"
    # cached, the replay's TTFT is well under the cold replay's of the same requests
    cold = run_case(case, max_prompts=1000, burst_rate=math.inf,
                    overrides=["kv.prefix_caching=false"])
    assert (row["metrics"]["mean_ttft_ms"]["simulated"]
            < 0.9 * cold["metrics"]["mean_ttft_ms"]["simulated"])
