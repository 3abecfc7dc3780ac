"""Published runs with per-request records (benchmarks/published_runs/): the client's send
times reconstructed, and a case replaying a run's own lengths."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.published import run_case, run_point
from benchmarks.published_cases import MEASURE_FROM, load_cases, scenario_point
from benchmarks.published_lengths import resampled_lengths, run_lengths, vllm_bench_arrivals
from simulator.errors import ConfigError
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


def _tiny_run(path: Path, inputs: list[int], outputs: list[int]) -> Path:
    """A vLLM bench result with only its per-request lengths."""
    path.write_text(json.dumps({"input_lens": inputs, "output_lens": outputs,
                                "completed": len(inputs), "errors": [""] * len(inputs)}))
    return path


def test_resampled_lengths_take_each_pair_once_scaled_to_the_means(tmp_path: Path) -> None:
    # four pairs, means 100 / 50; asked 200 / 25: by hand, prompts x 2 and outputs x 0.5
    run = _tiny_run(tmp_path / "run.json", [40, 80, 120, 160], [10, 30, 70, 90])
    table_path, note = resampled_lengths(run, 200.0, 25.0, 4, tmp_path)
    table = np.genfromtxt(table_path, delimiter=",", names=True)
    pairs = sorted(zip(table["prompt_tokens"].tolist(), table["output_tokens"].tolist(),
                       strict=True))
    assert pairs == [(80, 5), (160, 15), (240, 35), (320, 45)]  # the pairs stay together
    assert "4 of the 4 (prompt, output) pairs" in note and "longest output 45" in note
    # three of four: each pair at most once, scaled so the three have the means asked
    table = np.genfromtxt(resampled_lengths(run, 200.0, 25.0, 3, tmp_path)[0],
                          delimiter=",", names=True)
    assert len(set(table["prompt_tokens"].tolist())) == 3
    assert table["prompt_tokens"].mean() == pytest.approx(200.0, abs=0.5)
    assert table["output_tokens"].mean() == pytest.approx(25.0, abs=0.5)
    with pytest.raises(ConfigError, match=r"run.json: 4 requests, so it can shape a run of "
                                          r"1 to 4, not 5"):
        resampled_lengths(run, 200.0, 25.0, 5, tmp_path)


def test_an_iog_case_takes_llmk8s_pairs_at_its_own_means(tmp_path: Path) -> None:
    """IOG's runs (vLLM 0.8.5 benchmark_serving, ShareGPT, replies ended by the model's end
    of sequence) take the one recorded run of that client and dataset as their shape: its
    longest output, 780 tokens, scaled to the case's output mean (201.9 against 213.61).
    The 32 req/s run, the server's first: nothing cached before it."""
    (case,) = [c for c in load_cases() if c.id == (
        "vllm0.8.5-iog-h100-pcie-Meta-Llama-3-8B-Instruct-tp1-sharegpt200-qps32")]
    assert case.workload["shape_run"] == "published_runs/" + LLMK8S.format("01")
    point, notes = scenario_point(case, max_prompts=1000, use_stack=True,
                                  burst_rate=math.inf, trace_dir=tmp_path)
    table = np.genfromtxt(point["workload"]["trace"], delimiter=",", names=True)
    assert table["output_tokens"].mean() == pytest.approx(201.9, abs=0.5)
    assert table["prompt_tokens"].mean() == pytest.approx(205.8, abs=0.5)
    assert table["output_tokens"].max() == pytest.approx(780 * 201.9 / 213.61, abs=8)
    assert "warm_prompts" not in case.workload and MEASURE_FROM not in point
    assert any("pairs of " + LLMK8S.format("01") in n for n in notes)


def test_llmk8s_second_run_found_its_prompts_cached() -> None:
    """Why a V1 server's later runs of the same prompts are replayed warm: in llmk8s's
    first run (1 req/s) the median TTFT grows with the prompt, 44.9 ms under 100 tokens
    and 96.4 ms at 300 or more; in its second (4 req/s, the same 200 prompts, same server)
    it does not, 48.8 and 49.7 ms (docs/gpu-profiles.md, "IOG's runs")."""
    def medians(qps: str) -> tuple[float, float]:
        run = json.loads((RUNS / LLMK8S.format(qps)).read_text())
        ttft, lens = np.array(run["ttfts"]) * 1e3, np.array(run["input_lens"])
        return float(np.median(ttft[lens < 100])), float(np.median(ttft[lens >= 300]))

    assert medians("01") == pytest.approx((44.9, 96.4), abs=0.05)
    assert medians("04") == pytest.approx((48.8, 49.7), abs=0.05)


def test_an_iog_run_after_the_first_finds_its_prompts_cached(tmp_path: Path) -> None:
    """IOG's 1 req/s run came after its 32, 16, 8 and 4 req/s runs of the same 200 prompts
    on the same vLLM V1 server: the prompts are replayed first (1 output token each, at 0),
    then the run at its client's seed-42 send times 600 s later, scored from request 200;
    with V1's prefix caching (16-token blocks) each of its prompts finds its full blocks
    cached, but for the last token, which is always computed (a 128-token prompt: 112)."""
    (case,) = [c for c in load_cases() if c.id == (
        "vllm0.8.5-iog-h100-pcie-Meta-Llama-3-8B-Instruct-tp1-sharegpt200-qps1")]
    point, notes = scenario_point(case, max_prompts=1000, use_stack=True,
                                  burst_rate=math.inf, trace_dir=tmp_path)
    assert point[MEASURE_FROM] == (200, 600.0)
    lines = pd.read_json(point["workload"]["trace"], lines=True)
    assert len(lines) == 400 and (lines.output_length[:200] == 1).all()
    assert (lines.timestamp[:200] == 0).all()
    np.testing.assert_allclose(lines.timestamp[200:].to_numpy() / 1e3,
                               600.0 + vllm_bench_sends(1.0, 200, seed=42), atol=1e-6)
    assert all(lines.hash_ids[200 + i] == lines.hash_ids[i] for i in range(200))
    assert any("first 200 prompt(s) cached before it" in n for n in notes)
    res = run_point({}, point)
    req = res.result.requests.set_index("request_id").loc[200:]
    prompts = lines.input_length[200:].to_numpy()
    assert (req["cached_tokens"].to_numpy() == (prompts - 1) // 16 * 16).all()


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


def test_the_measured_loader_takes_the_clients_seed_when_given(tmp_path: Path) -> None:
    """The file does not say its --seed. One whose duration fits seed 42's sends (by
    construction: the llmk8s requests' latencies sent at seed 42's gaps, the last ending
    0.14 s before the duration, as the real run's did at seed 0) is rebuilt with
    bench_seed = 42; read at the default, its seed-0 sends do not fit, and the note says
    how to give the seed."""
    data = json.loads((RUNS / LLMK8S.format("04")).read_text())
    e2e = np.array(data["ttfts"]) + np.array([sum(g) for g in data["itls"]])
    sends42 = vllm_bench_sends(4.0, 200, seed=42)
    data["duration"] = float((sends42 + e2e).max()) + 0.14
    path = tmp_path / "seed42.json"
    path.write_text(json.dumps(data))
    run = load_measured(path, bench_seed=42)
    assert run.arrivals_known and "from seed 42" in run.assumed_arrivals
    np.testing.assert_allclose(run.requests["arrival_s"].to_numpy(), sends42)
    run = load_measured(path)
    assert not run.arrivals_known
    assert "seed-0 send times do not fit" in run.assumed_arrivals
    assert "--bench-seed" in run.assumed_arrivals


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
