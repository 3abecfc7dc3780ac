"""benchmarks/published_cases.toml: the published serving cases parse and are complete.

No simulation here beyond one tiny case: the full replay is benchmarks/published.py.
"""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import published_case_toml

from simulator.errors import ConfigError
from simulator.specs.hardware import HARDWARE
from simulator.specs.models import catalogue_name

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
pc = importlib.import_module("benchmarks.published_cases")
published = importlib.import_module("benchmarks.published")


@pytest.fixture(scope="module")
def cases() -> list:
    return pc.load_cases()


def test_every_case_has_a_source_a_metric_and_known_units(cases: list) -> None:
    assert len(cases) >= 40
    for c in cases:
        assert c.source.strip() and c.quote.strip(), c.id
        assert c.metrics, c.id
        assert set(c.metrics) <= set(pc.UNITS), c.id
        assert c.stack in pc.STACKS, c.id


def test_catalogue_names_resolve_or_are_pending(cases: list) -> None:
    # every model the published tables name is in the catalogue since stop 61 (Llama 4
    # Maverick and DeepSeek-R1 were the last two outside it), so a misspelt name fails
    for c in cases:
        assert c.gpu in HARDWARE, c.id
        assert catalogue_name(c.model) is not None or c.model in pc.PENDING_MODELS, c.id


def test_quoted_row_holds_the_published_figure(cases: list) -> None:
    """Each table figure appears in its quoted row as published (thousands commas or not)."""
    for c in cases:
        for value in c.metrics.values():
            forms = {f"{value:,.0f}", f"{value:,.2f}", f"{value:g}", f"{value:.2f}", str(value)}
            assert any(f in c.quote for f in forms), (c.id, value)


def test_scenario_point_of_a_burst_case(cases: list) -> None:
    case = next(c for c in cases if c.id == "trtllm1.0-h100-sxm-llama3.1-8b-fp8-tp1-128-128")
    point, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf)
    assert point["workload"]["num_requests"] == 1000
    assert point["workload"]["prompt"] == {"dist": "fixed", "tokens": 128}
    assert point["stack"] == {"name": "trtllm"}
    # trtllm-bench's sizing for 128/128 (tests/test_trtllm_bench_settings.py): 4,409 requests
    # fit, capped at 4,096; 8,192 tokens
    assert point["policy"] == {"max_num_seqs": 4096, "max_num_batched_tokens": 8192,
                               "chunked_prefill": True}
    assert notes[0] == "1000 of the source's 30000 prompts" and len(notes) == 2


def test_a_0_10_case_runs_its_preset_and_its_stated_scheduler_policy(cases: list) -> None:
    # gptManagerBenchmark --scheduler_policy max_utilization: greedy admission, the newest
    # paused; the case's engine limits (max_batch_size / max_num_tokens 2048) as knobs
    case = next(c for c in cases if c.id == "trtllm0.10-h200-llama-2-7b-fp8-tp1-128-128")
    point, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf)
    assert point["policy"] == {"max_num_seqs": 2048, "max_num_batched_tokens": 2048,
                               "chunked_prefill": True, "admission": "greedy",
                               "preemption": "newest"}
    assert not any("not modelled" in n for n in notes)
    point, note = pc.stack_accepted(point, case)
    assert point["stack"] == {"name": "trtllm", "version": "0.10"} and note is None


def test_a_case_giving_latencies_runs_all_its_prompts(cases: list, tmp_path: Path) -> None:
    """A burst's TTFT grows with its queue: truncating it would read low."""
    case = next(c for c in cases if c.id == "sglang-issue1639-h100-llama3-8b-tp2-sharegpt2000")
    point, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf, trace_dir=tmp_path)
    assert point["workload"]["num_requests"] == 2000
    assert [n for n in notes if not n.startswith("ShareGPT lengths")] == []


def test_a_sharegpt_burst_giving_only_throughput_runs_all_its_prompts(
        cases: list, tmp_path: Path) -> None:
    """ShareGPT's longest outputs end a burst at small batches for a fixed time: a 1000-prompt
    sample of SGLang 0.3's 5000-prompt burst would hold five times the source's share of it."""
    case = next(c for c in cases
                if c.id == "sglang0.3.0-readme060-a100-80gb-llama-3.1-8b-tp1-sharegpt-inf")
    point, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf, trace_dir=tmp_path)
    assert point["workload"]["num_requests"] == 5000
    assert not any(n.startswith("1000 of") for n in notes)


def test_random_outputs_from_zero_are_served_one_token(tmp_path: Path) -> None:
    """bench_serving's random dataset at range ratio 0 asks for 0..L new tokens; a 0 gets the
    prefill's token. Uniform [0, 8] over 9000 draws: about 1000 zeros, asked mean about 4.0,
    served mean about 4.0 + 1/9 = 4.11."""
    path, note = pc.random_lengths(1, 8192, 8, 9000, tmp_path)
    t = pd.read_csv(path)
    assert len(t) == 9000 and t.output_tokens.min() == 1 and t.output_tokens.max() == 8
    assert t.prompt_tokens.min() >= 1 and t.prompt_tokens.max() <= 8192
    zeros = int(note.split("draws): ")[1].split(" of ")[0])
    assert 900 < zeros < 1100  # 9000 / 9 = 1000, sd 30
    assert 1800 < (t.output_tokens == 1).sum() < 2200  # asked 0 or 1: 2 / 9 of 9000
    assert t.output_tokens.mean() == pytest.approx(4.0 + 1 / 9, abs=0.08)


def test_random_lengths_are_the_tools_own_seeded_draws(tmp_path: Path) -> None:
    """sglang.bench_serving seeds numpy's legacy generator with 1 and draws the prompt
    lengths, then the output lengths: the totals two published runs printed, exactly
    (SGLang cookbook, 10 prompts of 1000/1000: 6101 / 4210; DataCrunch H200, 300 prompts of
    1024/1024: 152612 / 160347)."""
    for n, high, out_high, p_total, o_total in [(10, 1000, 1000, 6101, 4210),
                                                (300, 1024, 1024, 152612, 160347)]:
        path, note = pc.random_lengths(1, high, out_high, n, tmp_path)
        t = pd.read_csv(path)
        assert int(t.prompt_tokens.sum()) == p_total
        assert f"totals {p_total} / {o_total} asked" in note


def test_the_pr1060_case_replays_outputs_from_zero(cases: list, tmp_path: Path) -> None:
    case = next(c for c in cases if c.id == "sglang-pr1060-h100-llama3.1-8b-random8192-8")
    point, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf, trace_dir=tmp_path)
    t = pd.read_csv(point["workload"]["trace"])
    assert len(t) == 1000 and t.output_tokens.min() == 1 and t.output_tokens.max() == 8
    assert notes[0].startswith("outputs uniform in [0, 8]")


def test_a_bad_case_is_refused_with_its_id(tmp_path: Path) -> None:
    bad = tmp_path / "cases.toml"
    bad.write_text(published_case_toml(metrics="ttft_seconds = 1.0"))
    with pytest.raises(ConfigError, match=r"\(x\).*metrics.ttft_seconds: unknown metric"):
        pc.load_cases(bad)


def test_group_table_median_and_share_within_15() -> None:
    rows = [{"group": "g", "metrics": {"output_throughput": {"error": e}}}
            for e in (0.10, -0.20, 0.05, None)]  # None: no result (requests refused)
    (g, overall) = published.group_table(rows)
    assert (g["group"], g["n"], g["no_result"]) == ("g", 4, 1)
    assert g["median_abs_error"] == pytest.approx(0.10)  # of 0.05, 0.10, 0.20
    assert g["within_15"] == pytest.approx(2 / 4)  # the missing result is a miss
    assert g["signed_median"] == pytest.approx(0.05)  # of -0.20, 0.05, 0.10
    assert overall["group"] == "all" and overall["n"] == 4


def test_sharegpt_lengths_keep_the_tools_filter_and_the_stated_means(tmp_path: Path) -> None:
    prompt = {"dist": "lognormal", "mean": 215, "sigma": 1.0}
    output = {"dist": "lognormal", "mean": 199, "sigma": 0.9}
    path, note = pc.sharegpt_lengths(prompt, output, 200, tmp_path)
    t = pd.read_csv(path)
    p, o = t["prompt_tokens"], t["output_tokens"]
    assert len(t) == 200 and (t["arrival_s"] == 0).all()
    # vLLM's and SGLang's sample_sharegpt_requests: both >= 4, prompt <= 1024, sum <= 2048
    assert (p >= 4).all() and (o >= 4).all() and (p <= 1024).all() and (p + o <= 2048).all()
    assert abs(p.mean() - 215) < 3 and abs(o.mean() - 199) < 3  # the case's (kept) means
    assert "kept means 215 / 199" in note
    again, _ = pc.sharegpt_lengths(prompt, output, 200, tmp_path / "again")
    assert pd.read_csv(again).equals(t)  # seeded


def test_an_output_cap_cuts_the_draws_and_keeps_the_stated_means(tmp_path: Path) -> None:
    """AccelMark's runner: a fixed prompt file, max_tokens 512, no tool filter."""
    prompt = {"dist": "lognormal", "mean": 255.4, "sigma": 1.0}
    output = {"dist": "lognormal", "mean": 344.1, "sigma": 0.9}
    path, note = pc.sharegpt_lengths(prompt, output, 100, tmp_path, output_cap=512)
    t = pd.read_csv(path)
    p, o = t["prompt_tokens"], t["output_tokens"]
    assert (o <= 512).all() and (p <= 1024).all() and (p >= 4).all() and (o >= 4).all()
    assert abs(p.mean() - 255.4) < 1 and abs(o.mean() - 344.1) < 1  # means of the cut draws
    at_cap = int((o == 512).sum())
    assert 20 < at_cap < 60 and f"cut at max_tokens 512: {at_cap} of 100" in note
    with pytest.raises(ConfigError, match="output_cap = 300"):
        pc.sharegpt_lengths(prompt, output, 100, tmp_path, output_cap=300)  # below the mean


def test_a_concurrency_sweep_point_is_a_closed_loop(cases: list) -> None:
    """NIM/AIPerf sweeps: C clients, each sending its next request when the last ends."""
    case = next(c for c in cases if c.id == "nim1.8.0-h100-sxm-llama-3.3-70b-fp8-tp2-5000-500-c25")
    point, _ = pc.scenario_point(case, max_prompts=1000, use_stack=True, burst_rate=math.inf)
    wl = point["workload"]
    assert (wl["arrival"], wl["concurrency"], wl["num_requests"], wl["client_start"]) == (
        "closed", 25, 250, "random")
    assert "rate" not in wl


@pytest.mark.parametrize(("case_id", "sent"), [
    ("sglang0.4.6-issue5938-a100-40gb-llama-3.1-8b-tp1-random1000-2000-rps10-flashinfer", False),
    ("vllm0.6.0-readme060-a100-80gb-llama-3.1-8b-tp1-sharegpt-rps8", True),  # client's sends
])
def test_an_open_loop_case_keeps_its_rate_and_cap(cases: list, tmp_path: Path, case_id: str,
                                                  sent: bool) -> None:
    case = next(c for c in cases if c.id == case_id)
    point, _ = pc.scenario_point(case, max_prompts=1000, use_stack=True, burst_rate=math.inf,
                                 trace_dir=tmp_path)
    wl = point["workload"]
    if sent:  # at its client's own times, whose mean rate is the case's
        times = pd.read_csv(wl["trace"])["arrival_s"]
        assert wl["arrival"] == "trace"
        assert (len(times) - 1) / times.iloc[-1] == pytest.approx(case.workload["rate"], rel=0.1)
    else:
        assert (wl["arrival"], wl["rate"]) == ("poisson", case.workload["rate"])
    assert "max_concurrency" not in wl
    capped = pc.Case(**{**{f: getattr(case, f) for f in pc.Case.__dataclass_fields__},
                        "workload": {**case.workload, "max_concurrency": 16}})
    point, _ = pc.scenario_point(capped, max_prompts=1000, use_stack=True, burst_rate=math.inf,
                                 trace_dir=tmp_path)
    assert point["workload"]["max_concurrency"] == 16


def test_a_closed_case_thinks_for_its_think_time(tmp_path: Path) -> None:
    good = tmp_path / "cases.toml"
    good.write_text('[[case]]\nid = "t"\nsource = "s"\nstack = "trtllm"\nstack_version = "1.0"\n'
                    'gpu = "h100-sxm"\nmodel = "llama-3.1-8b"\nweight_dtype = "bf16"\ntp = 1\n'
                    'workload = { prompt_tokens = 10, output_tokens = 10, num_prompts = 5, '
                    'arrival = "closed", concurrency = 2, think_time_s = 0.0002 }\n'
                    'metrics = { mean_ttft_ms = 1.0 }\n')
    (case,) = pc.load_cases(good)
    point, _ = pc.scenario_point(case, max_prompts=1000, use_stack=True, burst_rate=math.inf,
                                 trace_dir=tmp_path)
    assert point["workload"]["think_time_s"] == 0.0002
    assert point["workload"]["concurrency"] == 2
    assert point["workload"]["client_start"] == "together"
    assert "client_ramp_s" not in point["workload"]
    ramp = tmp_path / "ramp.toml"
    ramp.write_text(good.read_text().replace(
        "think_time_s = 0.0002", 'client_start = "ramp", client_ramp_s = 0.003'))
    (case,) = pc.load_cases(ramp)
    point, _ = pc.scenario_point(case, max_prompts=1000, use_stack=True, burst_rate=math.inf,
                                 trace_dir=tmp_path)
    assert (point["workload"]["client_start"], point["workload"]["client_ramp_s"]) == (
        "ramp", 0.003)


def test_iog_runs_end_after_their_seed_42_sends_not_all_after_seed_0s(cases: list) -> None:
    """IOG's run_benchmark.sh passes --seed 42: every one of its 70 runs ends (its recorded
    duration, completed / request_throughput) after its last send at seed 42's gaps, while
    seed 0's last send comes after the end of 11 of them, which cannot be."""
    sends = importlib.import_module("simulator.workload.arrivals").vllm_bench_sends
    iog = [c for c in cases if "-iog-" in c.id]
    assert len(iog) == 70 and {c.workload.get("client_seed") for c in iog} == {42}

    def ended_before_last_send(seed: int) -> int:
        return sum(sends(c.workload["rate"], c.workload["num_prompts"], seed=seed)[-1]
                   > c.workload["num_prompts"] / c.metrics["request_throughput"] for c in iog)

    assert (ended_before_last_send(42), ended_before_last_send(0)) == (0, 11)


def test_a_client_seed_sets_the_sends(tmp_path: Path) -> None:
    """client_seed = 42 sends at seed 42's gaps (at 1 req/s, five requests: by hand,
    numpy's RandomState(42).gamma(1, 1) cumulated), seed 0's without it."""
    case_toml = tmp_path / "cases.toml"
    case_toml.write_text(
        '[[case]]\nid = "s"\nsource = "s"\nstack = "vllm-v1"\nstack_version = "0.8"\n'
        'gpu = "h100-sxm"\nmodel = "llama-3.1-8b"\nweight_dtype = "bf16"\ntp = 1\n'
        'workload = { prompt_tokens = 10, output_tokens = 10, num_prompts = 5, '
        'arrival = "poisson", rate = 1.0, client = "vllm-bench", client_seed = 42 }\n'
        'metrics = { mean_ttft_ms = 1.0 }\n')
    (case,) = pc.load_cases(case_toml)
    point, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf, trace_dir=tmp_path)
    sent = pd.read_csv(point["workload"]["trace"])["arrival_s"].to_numpy()
    gaps = np.random.RandomState(42).gamma(1.0, 1.0, size=4)
    assert sent == pytest.approx([0.0, *np.cumsum(gaps)])
    assert sent[1] == pytest.approx(0.4692680899768591)  # RandomState(42)'s first gamma(1, 1)
    assert any("seed 42" in n for n in notes)
    plain = pc.Case(**{**{f: getattr(case, f) for f in pc.Case.__dataclass_fields__},
                       "id": "s0", "workload": {k: v for k, v in case.workload.items()
                                                if k != "client_seed"}})
    point, _ = pc.scenario_point(plain, max_prompts=1000, use_stack=True, burst_rate=math.inf,
                                 trace_dir=tmp_path)
    sent0 = pd.read_csv(point["workload"]["trace"])["arrival_s"].to_numpy()
    assert sent0 == pytest.approx([0.0, *np.cumsum(np.random.RandomState(0).gamma(1.0, 1.0, 4))])


def test_a_closed_case_needs_its_concurrency(tmp_path: Path) -> None:
    bad = tmp_path / "cases.toml"
    bad.write_text('[[case]]\nid = "y"\nsource = "s"\nstack = "trtllm"\nstack_version = "1.0"\n'
                   'gpu = "h100-sxm"\nmodel = "llama-3.1-8b"\nweight_dtype = "bf16"\ntp = 1\n'
                   'workload = { prompt_tokens = 10, output_tokens = 10, num_prompts = 5, '
                   'arrival = "closed" }\nmetrics = { mean_ttft_ms = 1.0 }\n')
    with pytest.raises(ConfigError, match=r"\(y\).*workload.concurrency = None"):
        pc.load_cases(bad)


@pytest.mark.parametrize(("extra", "message"), [
    ('client = "genai-perf"', r"\(z\).*workload.client = 'genai-perf'"),
    ('client = "perf-analyzer", arrival = "poisson", rate = 1.0',
     r"\(z\).*workload.client = 'perf-analyzer'.*arrival = 'closed'"),
    ('client = "perf-analyzer", arrival = "closed", concurrency = 2, '
     'measurement_interval_s = 0', r"\(z\).*perf_analyzer's windows: interval_s = 0"),
    ('client = "perf-analyzer", arrival = "closed", concurrency = 2, max_trials = 2',
     r"\(z\).*max_trials = 2: must be >= 3"),
    ('think_time = 0.001', r"\(z\).*workload.think_time: unknown key"),
    ('think_time_s = 0.001', r"\(z\).*workload.think_time_s = 0.001: a closed loop's"),
    ('arrival = "closed", concurrency = 2, think_time_s = -1',
     r"\(z\).*workload.think_time_s = -1: a closed loop's mean think time"),
    ('arrival = "closed", concurrency = 2, client_ramp_s = 0.1',
     r"\(z\).*workload.client_ramp_s = 0.1: a 'ramp' start's length.*client_start = 'ramp'"),
    ('arrival = "closed", concurrency = 2, client_start = "ramp", client_ramp_s = 0',
     r"\(z\).*workload.client_ramp_s = 0: a 'ramp' start's length, a number > 0"),
    ('client_seed = 42', r"\(z\).*workload.client_seed = 42: .*with client = 'vllm-bench' "
                         r"or 'sglang-bench'"),
    ('arrival = "poisson", rate = 1.0, client = "sglang-bench"',
     r"\(z\).*client = 'sglang-bench': its send times follow its dataset's draws"),
    ('dataset = "sharegpt", prompt_tokens_mean = 9, output_tokens_mean = 9, '
     'output_sigma = 0.9, shape_run = "published_runs/x.json"',
     r"\(z\).*workload.shape_run: .*no output_cap or sigmas"),
    ('arrival = "poisson", rate = 1.0, client = "vllm-bench", client_seed = -1',
     r"\(z\).*workload.client_seed = -1: the benchmark client's --seed"),
    ('arrival = "poisson", rate = 1.0, client = "vllm-bench", client_seed = 4.2',
     r"\(z\).*workload.client_seed = 4.2"),
])
def test_a_bad_client_is_refused_with_its_id(tmp_path: Path, extra: str, message: str) -> None:
    bad = tmp_path / "cases.toml"
    arrival = "" if "arrival" in extra else 'arrival = "burst", '
    bad.write_text('[[case]]\nid = "z"\nsource = "s"\nstack = "trtllm"\nstack_version = "1.0"\n'
                   'gpu = "h100-sxm"\nmodel = "llama-3.1-8b"\nweight_dtype = "bf16"\ntp = 1\n'
                   'workload = { prompt_tokens = 10, output_tokens = 10, num_prompts = 5, '
                   f'{arrival}{extra} }}\nmetrics = {{ mean_ttft_ms = 1.0 }}\n')
    with pytest.raises(ConfigError, match=message):
        pc.load_cases(bad)


def test_headline_reads_each_case_in_the_first_form_it_gives() -> None:
    def row(cid: str, group: str, fitted: str = "", **errs: float) -> dict:
        return {"id": cid, "group": group, "fitted": fitted,
                "metrics": {k: {"error": e} for k, e in errs.items()}}
    rows = [row("a", "vllm-v0-0.6/h100-sxm", mean_ttft_ms=0.1, median_ttft_ms=0.9),
            row("b", "vllm-v0-0.6/a100-80gb", median_ttft_ms=-0.3),
            row("c", "sglang-0.3/h100-sxm", median_ttft_ms=0.05),
            row("d", "sglang-0.3/h100-sxm", "host costs", median_ttft_ms=5.0)]
    table = {(h["figure"], h["stack"]): h for h in published.headline_table(rows)}
    vllm = table[("TTFT (mean, else median)", "vllm")]  # a: its mean (0.1), b: its median
    assert (vllm["n"], vllm["median_abs_error"], vllm["within_15"]) == (2, 0.2, 0.5)
    assert vllm["signed_median"] == pytest.approx(-0.1)
    everything = table[("TTFT (mean, else median)", "all")]  # d is in sample: left out
    assert (everything["n"], everything["median_abs_error"]) == (3, 0.1)
    assert not any(f == "TPOT (median, else mean)" for f, _ in table)
    # and per version, across its GPUs: vllm-v0-0.6 is a and b again
    assert table[("TTFT (mean, else median)", "vllm-v0-0.6")]["n"] == 2


@pytest.mark.parametrize(("extra", "message"), [
    ('arrival = "closed", concurrency = 2, measured_windows = 4',
     r"\(w\).*workload.measured_windows: perf_analyzer's setting"),
    ('arrival = "closed", concurrency = 2, client = "perf-analyzer", measured_windows = 11',
     r"\(w\).*measured_windows = 11: must be 1 to max_trials"),
])
def test_a_measured_window_count_is_perf_analyzers_and_within_its_trials(
        tmp_path: Path, extra: str, message: str) -> None:
    bad = tmp_path / "cases.toml"
    bad.write_text('[[case]]\nid = "w"\nsource = "s"\nstack = "trtllm"\nstack_version = "1.0"\n'
                   'gpu = "h100-sxm"\nmodel = "llama-3.1-8b"\nweight_dtype = "bf16"\ntp = 1\n'
                   'workload = { prompt_tokens = 10, output_tokens = 10, num_prompts = 5, '
                   f'{extra} }}\nmetrics = {{ mean_ttft_ms = 1.0 }}\n')
    with pytest.raises(ConfigError, match=message):
        pc.load_cases(bad)


def test_a_p95_is_compared_only_over_perf_analyzers_windows(tmp_path: Path) -> None:
    # published.py takes p95s only of a perf_analyzer case: elsewhere it would read none
    def case(client: str) -> Path:
        path = tmp_path / f"cases{len(client)}.toml"
        path.write_text(
            '[[case]]\nid = "p"\nsource = "s"\nstack = "trtllm"\nstack_version = "1.0"\n'
            'gpu = "h100-sxm"\nmodel = "llama-3.1-8b"\nweight_dtype = "bf16"\ntp = 1\n'
            'workload = { prompt_tokens = 10, output_tokens = 10, num_prompts = 5, '
            f'arrival = "closed", concurrency = 2{client} }}\n'
            'metrics = { mean_ttft_ms = 1.0, p95_itl_ms = 2.0 }\n')
        return path
    with pytest.raises(ConfigError, match=r"\(p\).*metrics.p95_itl_ms: a p95 is compared only"):
        pc.load_cases(case(""))
    (ok,) = pc.load_cases(case(', client = "perf-analyzer"'))
    assert ok.metrics["p95_itl_ms"] == 2.0


def test_group_table_reads_a_json_whose_metric_was_since_renamed() -> None:
    # a --json of an older case file (p95_tpot_ms, before stop 38's p95_itl_ms) still groups
    rows = [{"group": "g", "metrics": {"p95_tpot_ms": {"error": -0.2},
                                       "mean_ttft_ms": {"error": 0.1}}}]
    table = published.group_table(rows)
    assert [(g["group"], g["metric"]) for g in table] == [
        ("g", "mean_ttft_ms"), ("g", "p95_tpot_ms"), ("all", "mean_ttft_ms"),
        ("all", "p95_tpot_ms")]
    assert table[1]["signed_median"] == pytest.approx(-0.2)


def test_dep_cases_replay_attention_data_parallel_at_tp_1(cases: list, tmp_path: Path) -> None:
    # TensorRT-LLM's attention-data-parallel + expert-parallel rows (23: Qwen3-235B, GPT-OSS
    # 120B, Llama-4-Maverick, DeepSeek-R1) are marked; a catalogue model's replays its GPU
    # count as hardware.attention_dp at tp 1, and the limits trtllm-bench sized per rank
    dep = [c for c in cases if c.parallelism == "dep"]
    assert len(dep) == 23 and all("-dep" in c.id for c in dep)
    assert not [c for c in cases if "-dep" in c.id and c.parallelism != "dep"]
    qwen = next(c for c in dep if c.model == "qwen3-235b-a22b" and c.gpu == "h200")
    assert catalogue_name(qwen.model) == "qwen3-235b-a22b"
    assert pc.catalogue_status(qwen) is None
    point, _ = pc.scenario_point(qwen, max_prompts=50, use_stack=True, burst_rate=math.inf,
                                 trace_dir=tmp_path)
    assert point["hardware"] == {"gpu": "h200", "tp": 1, "attention_dp": 4}
    # every DEP row's model is in the catalogue since stop 61 (Llama 4 Maverick,
    # DeepSeek-R1): the eight-GPU rows run eight ranks
    assert all(pc.catalogue_status(c) is None for c in dep)
    deepseek = next(c for c in dep if c.model.startswith("deepseek"))
    point, _ = pc.scenario_point(deepseek, max_prompts=50, use_stack=True,
                                 burst_rate=math.inf, trace_dir=tmp_path)
    assert point["model"]["name"] == "deepseek-r1"
    assert point["hardware"] == {"gpu": "h200", "tp": 1, "attention_dp": 8}
    text = ('[[case]]\nid = "z"\nsource = "s"\nstack = "trtllm"\nstack_version = "1.x"\n'
            'gpu = "h200"\nmodel = "qwen3-235b-a22b"\nweight_dtype = "fp8"\ntp = 4\n'
            'parallelism = "PARALLEL"\nworkload = { prompt_tokens = 10, output_tokens = 10, '
            'num_prompts = 5, arrival = "burst" }\nmetrics = { output_throughput = 1.0 }\n')
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("PARALLEL", "ep"))
    with pytest.raises(ConfigError, match=r"\(z\).*parallelism = 'ep'"):
        pc.load_cases(bad)


def test_a_pages_later_run_finds_its_first_prompts_cached(cases: list, tmp_path: Path) -> None:
    """The SGLang cookbook's 320-prompt run (64 clients) after the page's 80-prompt run:
    bench_serving's seeded draws make prompt i the same in both, so prompts 0-79 are
    replayed first (1 output token each, at 0), then the run 600 s later, scored from
    request 80. On SGLang's page-size-1 radix cache each of the 80 finds all but its last
    prompt token cached; the 240 after them find nothing."""
    case = next(c for c in cases if c.id == "sglang0.5.6-cookbook-a100-80gb-llama-3.1-70b-"
                "tp8-random8000-1000-n320-mc64")
    point, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf, trace_dir=tmp_path)
    wl = point["workload"]
    assert (wl["arrival"], wl["num_requests"], wl["max_concurrency"]) == ("trace", 400, 64)
    assert point[pc.MEASURE_FROM] == (80, 600.0)
    assert any("first 80 prompt(s) cached before it" in n for n in notes)
    prompts, _, served = importlib.import_module("benchmarks.published_lengths").random_draws(
        1, 8000, 1000, 320)
    lines = pd.read_json(wl["trace"], lines=True)
    assert (lines.input_length.to_numpy() == [*prompts[:80], *prompts]).all()
    assert (lines.output_length[:80] == 1).all()
    assert (lines.output_length[80:].to_numpy() == served).all()
    assert (lines.timestamp[:80] == 0).all() and (lines.timestamp[80:] == 600_000).all()
    assert all(lines.hash_ids[80 + i] == lines.hash_ids[i] for i in range(80))
    res = published.run_point({}, point)
    req = res.result.requests.set_index("request_id")
    assert (req.loc[80:159, "cached_tokens"].to_numpy() == prompts[:80] - 1).all()
    assert (req.loc[160:, "cached_tokens"] == 0).all()


def test_warm_prompts_needs_a_random_run_and_at_most_its_prompts() -> None:
    base = {"id": "x", "source": "s", "stack": "sglang", "metrics": {"mean_ttft_ms": 1.0},
            "workload": {"prompt_low": 1, "prompt_high": 100, "output_low": 0,
                         "output_high": 10, "num_prompts": 10, "arrival": "burst"}}
    for warm, extra in [(11, {}), (0, {}), (True, {}), (2, {"output_low": 1})]:
        c = {**base, "workload": {**base["workload"], **extra, "warm_prompts": warm}}
        with pytest.raises(ConfigError, match="warm_prompts"):
            pc._check(c, "case x")
    pc._check({**base, "workload": {**base["workload"], "warm_prompts": 10}}, "case x")


def test_a_cases_engine_cost_is_replayed_as_its_cost_keys(tmp_path: Path) -> None:
    good = tmp_path / "cases.toml"
    good.write_text(published_case_toml("cost = { decode_scale = 1.1 }\n"))
    (case,) = pc.load_cases(good)
    assert case.cost == {"decode_scale": 1.1}
    point, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf, trace_dir=tmp_path)
    assert point["cost"]["decode_scale"] == 1.1
    assert "engine cost: decode_scale = 1.1" in notes
    kv = tmp_path / "kv.toml"
    kv.write_text(published_case_toml("kv = { gpu_memory_utilization = 0.8 }\n"))
    (case,) = pc.load_cases(kv)
    point, notes = pc.scenario_point(case, max_prompts=1000, use_stack=True,
                                     burst_rate=math.inf, trace_dir=tmp_path)
    assert point["kv"] == {"gpu_memory_utilization": 0.8} and "cost" not in point
    assert "engine KV cache: gpu_memory_utilization = 0.8" in notes


@pytest.mark.parametrize(("extra", "message"), [
    ("cost = { time_scale = 1.1 }", r"\(x\).*cost.time_scale: not a case's cost setting"),
    ("cost = { decode_scale = 9 }", r"\(x\).*cost.decode_scale = 9: a number in \[0.25, 4.0\]"),
    ("cost = 1.1", r"\(x\).*cost = 1.1: a table of cost settings"),
    ("kv = { num_blocks = 10 }", r"\(x\).*kv.num_blocks: not a case's kv setting"),
    ("kv = { gpu_memory_utilization = 1.5 }",
     r"\(x\).*kv.gpu_memory_utilization = 1.5: a number in \[0.05, 1.0\]"),
])
def test_a_bad_engine_cost_is_refused_with_its_id(tmp_path: Path, extra: str,
                                                  message: str) -> None:
    bad = tmp_path / "cases.toml"
    bad.write_text(published_case_toml(extra + "\n"))
    with pytest.raises(ConfigError, match=message):
        pc.load_cases(bad)


def test_a_length_table_is_replaced_whole_or_not_at_all(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Two published.py runs share the tables' folder: a run must never read a table the
    # other is half-way through writing (it did: "unreadable CSV header" on an empty file).
    # A write that dies part-way leaves the table as it was, and nothing else behind.
    path, _ = pc.random_lengths(1, 16, 8, 5, tmp_path)
    before = path.read_text()

    def dies_part_way(self: pd.DataFrame, target: Path, **kw: object) -> None:
        Path(target).write_text("request_id,arr")
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", dies_part_way)
    with pytest.raises(OSError, match="disk full"):
        pc.random_lengths(1, 16, 8, 5, tmp_path)
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
