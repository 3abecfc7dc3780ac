"""NVIDIA's "Sizing LLM Inference Systems" course data: its client ran in lockstep, its case
file is the table's rows, and TensorRT-LLM 0.10's token budget takes every waiting prompt.

The timeline: a step costs 10 ms plus 10 us a prompt token (``TokenCost``); five prompts of
4,000 tokens arrive at 0 wanting 2 output tokens each. Under ``trtllm 0.10`` (budget
max_batch_size x max_seq_len) one step prefills all 20,000 tokens: every first token at
0.01 + 0.2 = 0.21 s. Under ``trtllm 1.0`` (8,192 tokens a step, no chunking) two prompts
fit a step: first tokens at 0.09, 0.18 (plus the first pair's decode) and so on.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import TokenCost, table, timeline

from simulator.cluster import ClusterSpec, simulate
from simulator.deployment import resolve
from simulator.scenario import apply_overrides
from simulator.shapes import StepShape
from simulator.stack_presets import TRTLLM_011_KV16_REREAD

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import nim_dli_budget_fit  # noqa: E402
import nim_dli_cases  # noqa: E402
import nim_dli_check  # noqa: E402
import nim_dli_decode_fit  # noqa: E402
import nim_dli_kv_fit  # noqa: E402
import nim_dli_ramp_fit  # noqa: E402
import nim_dli_reads_fit  # noqa: E402
import nim_dli_windows  # noqa: E402
from published_cases import load_cases, scenario_point, stack_accepted  # noqa: E402


def first_tokens(version: str) -> list[float]:
    dep = resolve({"stack": {"name": "trtllm", "version": version},
                   "model": {"name": "llama-3-8b"}, "hardware": {"gpu": "a100-80gb"},
                   "kv": {"num_blocks": 10_000, "block_size": 64}})
    spec = ClusterSpec(dep.policy, TokenCost(step_s=0.01, prefill_token_s=1e-5),
                       kv_blocks=10_000, block_size=64, check_invariants=True)
    res = simulate(table([(0, 4000, 2)] * 5), spec)
    return [row[2] for row in timeline(res.requests)]


def test_trtllm_0_10_budget_is_max_batch_size_times_max_seq_len() -> None:
    dep = resolve({"stack": {"name": "trtllm", "version": "0.10"},
                   "model": {"name": "llama-3-8b"}, "hardware": {"gpu": "a100-80gb"}})
    assert dep.policy.max_num_batched_tokens == 2048 * 8192
    assert resolve({"stack": {"name": "trtllm", "version": "1.0"},
                    "model": {"name": "llama-3-8b"}}).policy.max_num_batched_tokens == 8192


def test_trtllm_0_10_prefills_every_waiting_prompt_in_one_step() -> None:
    assert first_tokens("0.10") == [pytest.approx(0.21)] * 5
    late = first_tokens("1.0")
    assert late[:2] == [pytest.approx(0.09)] * 2  # 0.01 + 8,000 x 10 us
    assert len(set(late)) == 3 and max(late) > 0.21


@pytest.mark.parametrize("clients,rounds,answered", [(1, 53, 53), (2, 52, 52), (5, 47, 45)])
def test_genai_perf_clients_stay_in_lockstep(clients: int, rounds: int, answered: int) -> None:
    # every round's C requests leave within 1 ms; all but two rounds at 5 clients get their
    # C first responses within 2 ms of each other (the fixed output length ends them together)
    s = nim_dli_check.lockstep(clients)
    assert (s["rounds"], s["sent_together"], s["answered_together"]) == (
        rounds, rounds, answered)


def test_five_lockstep_prompts_take_the_time_of_their_joint_prefill() -> None:
    # 24.5 ms alone, 78.4 ms for five 200-token prompts in one step (A100, NIM 1.0.3)
    one, five = nim_dli_check.lockstep(1), nim_dli_check.lockstep(5)
    assert one["later_ttft_ms"] == pytest.approx(24.5, abs=0.05)
    assert five["later_ttft_ms"] == pytest.approx(78.4, abs=0.05)


def test_case_file_is_the_table() -> None:
    assert nim_dli_cases.main(["--check"]) == 0
    cases = {c.id: c for c in load_cases(nim_dli_cases.OUT)}
    assert len(cases) == 787
    c = cases["nim1.0-dli-a100-80gb-llama-3-8b-fp16-tp1-200-200-c250"]
    # the table's row: TTFT 2,319,457,... ns, ITL 45,613,... ns, 4,380.2 tok/s
    assert c.metrics["mean_ttft_ms"] == pytest.approx(2319.5, abs=0.1)
    assert c.metrics["mean_tpot_ms"] == pytest.approx(45.61, abs=0.01)
    assert c.metrics["output_throughput"] == pytest.approx(4380.2, abs=0.1)
    # and its p95s: TTFT 3,056,9..,... ns, ITL 51,4..,... ns
    assert c.metrics["p95_ttft_ms"] == pytest.approx(3056.9, abs=0.1)
    assert c.metrics["p95_itl_ms"] == pytest.approx(51.4, abs=0.05)
    # its 250 clients' first requests reach the engine 1.5 ms apart: a 0.375 s ramp
    assert (c.stack, c.preset, c.workload["client_start"]) == ("trtllm", "0.10", "ramp")
    assert c.workload["client_ramp_s"] == 0.375
    assert "first round's spread" in c.fitted
    held = cases["nim1.0-dli-h100-sxm-llama-3-8b-fp8-tp1-200-200-c100"]
    assert (held.workload["client_ramp_s"], held.fitted) == (0.15, "")
    assert (c.workload["client"], c.workload["measurement_interval_s"]) == ("perf-analyzer", 60)
    # its count says its run scored 4 windows: 4 + 1 windows of 72 s at 11.4 s a request,
    # ceil(31.6) + 1 = 33 rounds of 250
    assert c.workload["measured_windows"] == 4
    assert c.workload["num_prompts"] == 33 * 250
    assert sum(1 for i in cases if i.endswith("-run2")) == 72
    # the 16-bit engines' decode steps at the fitted factor; the FP8 engines' as priced
    assert c.cost == {"decode_scale": nim_dli_cases.DECODE_SCALE_16BIT} == {"decode_scale": 1.14}
    assert "decode factor" in c.fitted
    assert held.cost == {} and held.weight_dtype == "fp8"
    sixteen = [x for x in cases.values() if x.weight_dtype in ("fp16", "bf16")]
    eight_b = [x for x in sixteen if x.model == "llama-3-8b"]
    assert len(eight_b) > 250 and all(x.cost == c.cost for x in eight_b)
    # the 70B's (G = 8 query heads per KV head at TP 4 and 8: 0.10's XQA kernel) read the
    # cache once a step, as fitted; the 8B's (G = 4: the masked kernel) keep the preset's
    seventy = [x for x in sixteen if x.model == "llama-3-70b"]
    assert len(seventy) == 264 and nim_dli_cases.XQA_REREAD_16BIT == 0.0
    assert all(x.cost == {"decode_scale": 1.14, "decode_kv_reads": 1.0} for x in seventy)
    assert "XQA decode reads" in c.fitted
    assert all(not x.cost for x in cases.values() if x.weight_dtype == "fp8")
    # every engine's KV cache: what the weights leave of the fitted 0.8625 of each GPU
    assert nim_dli_cases.KV_MEMORY_FRACTION == 0.8625 and "KV memory fraction" in c.fitted
    assert all(x.kv == {"gpu_memory_utilization": 0.8625} for x in cases.values())


def test_least_count_makes_the_mean_length_whole() -> None:
    # 199.6577142857143 = 349,401 / 1,750; 1999.6448598130842 = 213,962 / 107
    assert nim_dli_windows.least_count(199.6577142857143) == 1750
    assert nim_dli_windows.least_count(1999.6448598130842) == 107
    assert nim_dli_windows.least_count(200.0) == 1


def test_the_table_was_scored_over_three_72_s_windows() -> None:
    # one client scores floor(216 s / latency) requests; the table's means allow that
    # count on 68 of 72 one-client rows, and no other interval comes near
    rows = nim_dli_windows.one_client_rows()
    fits = {i: nim_dli_windows.fits(rows, 3 * 1.2 * i) for i in nim_dli_windows.INTERVALS_S}
    assert len(rows) == 72
    assert fits[60.0] == 68
    assert max(v for i, v in fits.items() if i != 60.0) <= 34


def test_replay_scores_what_ended_in_perf_analyzers_windows() -> None:
    import dataclasses

    from published import run_case
    cases = {c.id: c for c in load_cases(nim_dli_cases.OUT)}
    case = cases["nim1.0-dli-h100-sxm-llama-3-8b-fp8-tp1-200-200-c1"]
    # a run far too short for three 72 s windows: the replay doubles it until the load
    # outlasts the windows, then scores one client's requests that ended within 216 s
    short = dataclasses.replace(case, workload={**case.workload, "num_prompts": 2})
    row = run_case(short, max_prompts=1000, burst_rate=float("inf"))
    assert row["status"] == "ok"
    note = next(n for n in row["notes"] if n.startswith("perf_analyzer scored"))
    scored = int(note.split()[2])
    assert "first 3 windows of 72 s" in note
    # one client, back to back: 200 tokens a request at the simulated rate, for 216 s
    tok_s = row["metrics"]["output_throughput"]["simulated"]
    assert abs(scored - 216.0 * tok_s / 200) <= 2


def test_client_turnaround_is_the_exports_mean() -> None:
    # the one-client export's first two requests: the first's last response at
    # 0 + 670,205.2 us, the second sent at 670,298.6 us: 93.4 us later
    assert nim_dli_check.turnarounds(1)[0] == pytest.approx(93.4, abs=0.05)
    assert [len(nim_dli_check.turnarounds(c)) for c in (1, 2, 5)] == [52, 102, 230]
    assert nim_dli_check.mean_turnaround_s() == pytest.approx(
        nim_dli_cases.CLIENT_TURNAROUND_S, abs=1e-6)


def test_every_case_thinks_for_the_clients_turnaround() -> None:
    cases = load_cases(nim_dli_cases.OUT)
    assert {c.workload["think_time_s"] for c in cases} == {nim_dli_cases.CLIENT_TURNAROUND_S}


def test_one_client_rows_leave_a_fraction_of_a_millisecond_a_request() -> None:
    gaps = nim_dli_check.table_turnarounds(nim_dli_check.table())
    assert {osl: len(g) for osl, g in gaps.items()} == {200: 24, 1000: 24, 2000: 24}
    assert 170 < min(gaps[200]) and max(gaps[200]) < 300  # us: 177-288


def test_a_row_whose_count_three_windows_cannot_give_scored_the_fewest_its_count_allows():
    rows = {(r["task_inputs-GPU"], r["task_inputs-n_gpus"], r["task_inputs-precision"],
             r["input_config-synthetic_input_tokens_mean"],
             r["input_config-concurrency"], r["task_inputs-model"]): r
            for r in nim_dli_check.table()}
    # H100 FP16 Llama-3-8B on one GPU, 7000/1000 at 100 clients: its mean input length
    # makes the count a multiple of 689; 689 requests at 1.083 a second span 636 s, in
    # window 9 of 72 s (576-648 s), and three windows (216 s) cannot hold them
    row = rows[("H100_80GB_HBM3", "1", "fp16", "7000", "100", "meta-llama3-8b-instruct")]
    assert nim_dli_windows.least_count(float(row["num_input_token-avg"])) == 689
    assert nim_dli_windows.scored_windows(row) == 9
    # the same setting at one client: three windows hold its count (None: the stop rule's)
    one = rows[("H100_80GB_HBM3", "1", "fp16", "7000", "1", "meta-llama3-8b-instruct")]
    assert nim_dli_windows.scored_windows(one) is None
    found = nim_dli_windows.table_windows()
    assert sum(w is not None for w in found) == 183
    # FP16 Llama-3-70B at TP 4, 7000/1000 at 250 clients on the H100: its count (a multiple
    # of 120 at 0.763 a second) fits three windows, its mean request latency, 254 s, does
    # not (216 s): every scored request ended by the last window's end, so five
    row = rows[("H100_80GB_HBM3", "4", "fp16", "7000", "250", "meta-llama3-70b-instruct")]
    assert float(row["request_latency-avg"]) / 1e9 == pytest.approx(254.4, abs=0.1)
    assert nim_dli_windows.least_count(float(row["num_input_token-avg"])) == 120
    assert nim_dli_windows.scored_windows(row) == 5
    cases = {c.id: c for c in load_cases(nim_dli_cases.OUT)}
    case = cases["nim1.0-dli-h100-sxm-llama-3-8b-fp16-tp1-7000-1000-c100"]
    assert case.workload["measured_windows"] == 9
    # FP16 Llama-3-70B at TP 4, 7000/1000 at 200 clients on the H100: three windows hold its
    # count (a multiple of 48 at 0.763 a second) and its mean latency (216.7 s against 216 s
    # and 2% slack), not its p95 request latency, 280.3 s; four windows (288 s) would
    row = rows[("H100_80GB_HBM3", "4", "fp16", "7000", "200", "meta-llama3-70b-instruct")]
    assert float(row["request_latency-p95"]) / 1e9 == pytest.approx(280.3, abs=0.1)
    assert nim_dli_windows.scored_windows(row) is None
    assert nim_dli_windows.p95_outlasts(row, None) and not nim_dli_windows.p95_outlasts(row, 4)


def test_a_course_case_compares_its_p95s_over_the_windows_requests() -> None:
    import math

    import published
    case = {c.id: c for c in load_cases(nim_dli_cases.OUT)}[
        "nim1.0-dli-a100-80gb-llama-3-8b-fp16-tp1-200-200-c1"]
    row = published.run_case(case, max_prompts=1000, burst_rate=math.inf)
    m = row["metrics"]
    assert row["status"] == "ok" and 95 in published.PA_PERCENTILES
    # one client: every request's first token is one 200-token prefill step, so the p95
    # TTFT is the mean; every gap between two tokens is one decode step, so the p95 ITL
    # is the mean TPOT
    assert m["p95_ttft_ms"]["simulated"] == pytest.approx(m["mean_ttft_ms"]["simulated"],
                                                          rel=0.01)
    assert m["p95_itl_ms"]["simulated"] == pytest.approx(m["mean_tpot_ms"]["simulated"],
                                                         rel=0.01)
    assert m["p95_ttft_ms"]["published"] == pytest.approx(24.9, abs=0.05)


def test_the_table_pools_its_itl_percentiles_over_gaps() -> None:
    # part 5 of nim_dli_check: no one-client row has a p95 ITL below its mean (every gap
    # is one decode step), 200 rows with more clients do (a few gaps hold a prefill)
    found = nim_dli_check.itl_p95_below_mean(nim_dli_check.table())
    assert found[1] == (72, 0) and found[2] == (72, 8) and found[50] == (72, 36)
    assert sum(below for _, below in found.values()) == 200


def test_a_course_case_pools_its_p95_itl_over_the_steps_gaps() -> None:
    import math

    import published
    case = {c.id: c for c in load_cases(nim_dli_cases.OUT)}[
        "nim1.0-dli-a100-80gb-llama-3-8b-fp16-tp1-2000-200-c50"]
    m = published.run_case(case, max_prompts=1000, burst_rate=math.inf)["metrics"]
    # published: p95 29.04 ms, mean 44.27 ms; a request's 199 gaps are decode steps but
    # for the steps that prefill other clients' 2,000-token prompts, long and rare: the
    # pooled p95 is a decode step, below the mean, in the run and in the replay
    assert m["p95_itl_ms"]["published"] == pytest.approx(29.04, abs=0.01)
    assert m["p95_itl_ms"]["published"] < 0.7 * m["mean_tpot_ms"]["published"]
    assert m["p95_itl_ms"]["simulated"] < 0.7 * m["mean_tpot_ms"]["simulated"]


def test_groups_part5_keeps_the_in_sample_rows_apart() -> None:
    import nim_dli_groups

    def row(cid: str, err: float, fitted: str = "") -> dict:
        return {"id": f"nim1.0-dli-{cid}", "group": "trtllm-nim-1.0/x", "fitted": fitted,
                "metrics": {"mean_ttft_ms": {"error": err}}}
    rows = [row("a100-80gb-llama-3-8b-fp16-tp1-200-200-c1", 0.30, "budget"),
            row("h100-sxm-llama-3-8b-fp16-tp1-200-200-c1", -0.10),
            row("h100-sxm-llama-3-8b-fp8-tp1-200-200-c1", 0.20)]
    table = {g["group"]: g for g in nim_dli_groups.gpu_table(rows)}
    a100, h100 = table["a100-80gb (in sample)"], table["h100-sxm (held out)"]
    assert (a100["n"], a100["within_15"], a100["signed_median"]) == (1, 0.0, 0.30)
    assert (h100["n"], h100["within_15"]) == (2, 0.5)
    assert h100["signed_median"] == pytest.approx(0.05)


def test_groups_part6_sets_the_mean_beside_the_tail() -> None:
    import nim_dli_groups

    def row(cid: str, mean: float, p95: float) -> dict:
        return {"id": f"nim1.0-dli-{cid}", "metrics": {"mean_ttft_ms": {"error": mean},
                                                       "p95_ttft_ms": {"error": p95}}}
    rows = [row("h100-sxm-llama-3-8b-fp8-tp1-200-200-c100", 0.60, -0.05),
            row("h100-sxm-llama-3-8b-fp8-tp1-200-2000-c50", 0.10, -0.20),
            row("h100-sxm-llama-3-8b-fp8-tp1-2000-200-c100", -0.30, -0.10)]
    table = nim_dli_groups.mean_and_tail(rows)
    assert list(table) == [("h100-sxm", "long", "100-250"), ("h100-sxm", "short", "10-50"),
                           ("h100-sxm", "short", "100-250")]
    short = table[("h100-sxm", "short", "100-250")]
    assert short["n"] == 1 and short["mean_ttft_ms"] == (0.0, 0.60)
    assert short["p95_ttft_ms"] == (1.0, -0.05)
    assert table[("h100-sxm", "long", "100-250")]["mean_ttft_ms"] == (0.0, -0.30)


def test_the_ramp_fit_spreads_or_gathers_a_cases_first_round() -> None:
    cases = {c.id: c for c in load_cases(nim_dli_cases.OUT)}
    c = cases["nim1.0-dli-a100-80gb-llama-3-8b-fp16-tp1-200-200-c250"]
    wide = nim_dli_ramp_fit.spread(c, 2e-3)  # 250 clients x 2 ms
    assert (wide.workload["client_start"], wide.workload["client_ramp_s"]) == ("ramp", 0.5)
    flat = nim_dli_ramp_fit.spread(c, 0.0)  # all at once: no ramp left behind
    assert flat.workload["client_start"] == "together" and "client_ramp_s" not in flat.workload
    assert {k: v for k, v in flat.workload.items() if k not in ("client_start",)} == {
        k: v for k, v in c.workload.items() if k not in ("client_start", "client_ramp_s")}
    assert nim_dli_cases.FIRST_ROUND_SPREAD_S * 1e3 in nim_dli_ramp_fit.CANDIDATES_MS


def test_the_decode_fit_scales_only_the_16_bit_rows() -> None:
    cases = {c.id: c for c in load_cases(nim_dli_cases.OUT)}
    fp16 = cases["nim1.0-dli-a100-80gb-llama-3-8b-fp16-tp1-200-200-c250"]
    fp8 = cases["nim1.0-dli-h100-sxm-llama-3-8b-fp8-tp1-200-200-c100"]
    assert nim_dli_decode_fit.overrides(fp16, 1.04) == ["cost.decode_scale=1.04"]
    assert nim_dli_decode_fit.overrides(fp8, 1.04) == []
    # --sync k: the handshake at k NCCL latencies on a multi-GPU case, none on one GPU
    tp2 = cases["nim1.0-dli-a100-80gb-llama-3-8b-fp16-tp2-200-200-c5"]
    curve = nim_dli_decode_fit.allreduce_curve("a100-80gb", 2)
    assert curve is not None
    assert nim_dli_decode_fit.overrides(tp2, 1.1, 1.7) == [
        "cost.decode_scale=1.1", f"cost.allreduce_sync_s={1.7 * curve.latency_s!r}"]
    assert nim_dli_decode_fit.overrides(fp16, 1.1, 1.7) == ["cost.decode_scale=1.1"]
    assert 1.0 in nim_dli_decode_fit.CANDIDATES  # the factor off is a candidate
    assert nim_dli_cases.DECODE_SCALE_16BIT in nim_dli_decode_fit.CANDIDATES
    # the KV fit spans TensorRT-LLM's own 0.9 and the fitted fraction
    assert {0.9, nim_dli_cases.KV_MEMORY_FRACTION} <= set(nim_dli_kv_fit.CANDIDATES)


def test_the_kv_fit_reads_free_as_a_share_of_the_free_memory(monkeypatch) -> None:  # noqa: ANN001
    seen = {}

    def fake_fit_main(argv, doc, candidates, run, label) -> int:  # noqa: ANN001
        seen.update(argv=argv, candidates=candidates, run=run)
        return 0

    monkeypatch.setattr(nim_dli_kv_fit, "fit_main", fake_fit_main)
    monkeypatch.setattr(nim_dli_kv_fit, "run_case",
                        lambda case, **kw: {"case": case, **kw})
    assert nim_dli_kv_fit.main(["--held-out", "--free"]) == 0
    assert seen["argv"] == ["--held-out"]
    assert seen["candidates"] == nim_dli_kv_fit.FREE_CANDIDATES
    assert min(nim_dli_kv_fit.FREE_CANDIDATES) == 0.7
    (row,) = seen["run"](["case"], 0.8)
    assert row["overrides"] == ["kv.gpu_memory_utilization=0.8", "kv.memory_share='free'"]
    nim_dli_kv_fit.main([])
    assert seen["candidates"] == nim_dli_kv_fit.CANDIDATES
    (row,) = seen["run"](["case"], 0.85)
    assert row["overrides"][1] == "kv.memory_share='total'"
    # the override is one the replay takes: 0.10's preset under TensorRT-LLM's own rule
    case = {c.id: c for c in load_cases(nim_dli_cases.OUT)}[
        "nim1.0-dli-a100-80gb-llama-3-8b-fp16-tp1-200-200-c250"]
    point, _ = scenario_point(case, max_prompts=1000, use_stack=True, burst_rate=float("inf"))
    point, _ = stack_accepted(point, case)
    free = resolve(apply_overrides(point, row["overrides"][:1] + ["kv.memory_share='free'"]))
    total = resolve(apply_overrides(point, row["overrides"]))
    assert free.kv_blocks > total.kv_blocks


@pytest.mark.parametrize(("model", "tp", "kv", "reads"), [
    # G = 8 (16 / 2 and 8 / 1 query / KV heads a GPU): 0.10's XQA kernel, 1 + beta x 7
    ("llama-3-70b", 4, "fp16", 1.875), ("llama-3-70b", 8, "bf16", 1.875),
    ("llama-3-8b", 1, "fp16", None), ("llama-3-8b", 2, "fp16", None),  # G = 4: masked kernel
    ("llama-3-70b", 4, "fp8", None),  # an FP8 cache: read once where XQA runs, beta or not
])
def test_xqa_reads_follow_the_presets_rule_where_0_10_has_an_xqa_kernel(
        model: str, tp: int, kv: str, reads: float | None) -> None:
    assert nim_dli_cases.xqa_reads(model, tp, kv, 0.125) == reads


def test_the_reads_fit_sets_only_the_16_bit_xqa_rows() -> None:
    cases = {c.id: c for c in load_cases(nim_dli_cases.OUT)}
    seventy = cases["nim1.0-dli-a100-80gb-llama-3-70b-fp16-tp4-200-200-c100"]
    eight = cases["nim1.0-dli-a100-80gb-llama-3-8b-fp16-tp1-200-200-c250"]
    fp8 = cases["nim1.0-dli-h100-sxm-llama-3-70b-fp8-tp4-200-200-c100"]
    # 1 + beta (G - 1) at G = 8: beta 0.125 -> 1.875 reads; beta 0 -> the tables' one read
    assert nim_dli_reads_fit.overrides(seventy, 0.125) == ["cost.decode_kv_reads=1.875"]
    assert nim_dli_reads_fit.overrides(seventy, 0.0) == ["cost.decode_kv_reads=1.0"]
    # at the preset's own beta too: the case file's one read must not stand in for it
    assert nim_dli_reads_fit.overrides(seventy, TRTLLM_011_KV16_REREAD) == [
        f"cost.decode_kv_reads={round(1 + 7 * TRTLLM_011_KV16_REREAD, 9)!r}"]
    assert nim_dli_reads_fit.overrides(eight, 0.1) == []
    assert nim_dli_reads_fit.overrides(fp8, 0.1) == []
    # the candidates span the tables' one read and 0.11's law the preset carries
    assert {0.0, nim_dli_reads_fit.TRTLLM_011_KV16_REREAD} <= set(nim_dli_reads_fit.CANDIDATES)
    assert nim_dli_cases.XQA_REREAD_16BIT in nim_dli_reads_fit.CANDIDATES


def test_a_case_s_own_kv_reads_reach_its_replay() -> None:
    # 1.0 against the preset's 1 + 0.108 x 7 = 1.756: the case's own value prices the step
    case = next(c for c in load_cases(nim_dli_cases.OUT)
                if c.id == "nim1.0-dli-h100-sxm-llama-3-70b-fp16-tp4-7000-1000-c100")
    point, _ = stack_accepted(scenario_point(case, max_prompts=10, use_stack=True,
                                             burst_rate=1e9)[0], case)
    own = resolve(point)
    point["cost"] = {k: v for k, v in point["cost"].items() if k != "decode_kv_reads"}
    preset = resolve(point)
    step = StepShape(num_prefill_tokens=0, num_decode_seqs=40, decode_context_tokens=300_000)
    assert own.cost.step_time(step) < 0.9 * preset.cost.step_time(step)


def test_a_fit_picks_the_most_ttfts_and_tpots_within_15_percent(
        capsys: pytest.CaptureFixture[str]) -> None:
    def row(ttft: float, tpot: float) -> dict:
        errors = {"mean_ttft_ms": ttft, "mean_tpot_ms": tpot, "output_throughput": 0.5}
        return {"metrics": {m: {"error": e} for m, e in errors.items()}}

    # candidate 1: TTFT +10%, +20% (1 within 15%), TPOT 0, 0 (2): 3 of 4
    # candidate 2: TTFT +5%, -14% (2), TPOT +30%, +30% (0): 2 of 4 -- TTFT alone would
    # take it; the H100 row is only printed, never chosen on
    errors = {1: [(0.10, 0.0), (0.20, 0.0)], 2: [(0.05, 0.3), (-0.14, 0.3)]}
    cases = [SimpleNamespace(gpu="a100-80gb"), SimpleNamespace(gpu="a100-80gb"),
             SimpleNamespace(gpu="h100-sxm")]

    def run(chosen: list, cand: int) -> list[dict]:
        if chosen[0].gpu == "h100-sxm":
            return [row(0.9, 0.9)]
        return [row(*e) for e in errors[cand]]

    assert nim_dli_budget_fit.choose([1, 2], cases, run, lambda c: f"{c} x", True) == 1
    out = capsys.readouterr().out
    assert "fit set: 2 a100-80gb rows" in out and "held out: 1 rows" in out
    assert "fitted: 1 x (3 mean TTFT and TPOT errors of 4 within 15%; median |TTFT error| " \
        "15.0%)" in out


def test_the_five_client_exports_first_round_reached_the_engine_in_two_steps() -> None:
    # sent within 0.11 ms, yet two requests answered at 37.7-37.8 ms and three at 88.1 ms:
    # the first round's spread the course's cases replay (nim_dli_cases.FIRST_ROUND_SPREAD_S)
    first = nim_dli_check.lockstep(5)["first_round"]
    assert max(sent for sent, _ in first) == pytest.approx(0.11, abs=0.005)
    assert sorted(round(ttft, 1) for _, ttft in first) == [37.7, 37.8, 88.1, 88.1, 88.1]


def test_a_fits_option_reaches_every_run(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[tuple[float, float | None]] = []

    def run(cases: list, cand: float, value: float | None) -> list[dict]:
        seen.append((cand, value))
        return [{"metrics": {m: {"error": 0.0} for m in nim_dli_budget_fit.METRICS}}
                for _ in cases]
    assert nim_dli_budget_fit.fit_main(["--sync", "1.7"], "doc", (1.0, 1.1), run, str,
                                       option="sync") == 0
    assert seen == [(1.0, 1.7), (1.1, 1.7)]  # the fit set only, the option on each
    seen.clear()
    nim_dli_budget_fit.fit_main([], "doc", (1.0,), run, str, option="sync")
    assert seen == [(1.0, None)]
    assert "fitted: 1.0" in capsys.readouterr().out


def test_one_clients_ttft_rises_with_the_output_asked_for() -> None:
    """Part 6 of nim_dli_check.py: Llama-3-8B FP16 on one A100, 200-token prompts, one
    client: 24.47, 25.81 and 26.84 ms at 200, 1,000 and 2,000 output tokens. By hand: the
    mean output 3,200 / 3 = 1,066.7, the mean TTFT 25.707 ms; slope = sum (x - mx)(y - my)
    / sum (x - mx)^2 = (866.7 x 1.237 - 66.7 x 0.103 + 933.3 x 1.133) / 1,626,667
    = 2,122.7 / 1,626,667 ms = 1.30 us per output token."""
    found = {(key, isl): (pts, slope)
             for key, isl, pts, slope in nim_dli_check.ttft_by_output(nim_dli_check.table())}
    pts, slope = found[(("meta-llama3-8b-instruct", "A100-SXM4-80GB", "1", "fp16"), 200)]
    assert [osl for osl, _ in pts] == [200, 1000, 2000]
    assert [round(t, 2) for _, t in pts] == [24.47, 25.81, 26.84]
    assert slope == pytest.approx(1.305, abs=0.005)
    assert len(found) == 24  # 12 settings x 2 prompt lengths
    assert all(b[1] > a[1] for pts, _ in found.values()
               for a, b in zip(pts, pts[1:], strict=False))
