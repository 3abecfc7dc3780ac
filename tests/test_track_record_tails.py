"""The tails in servesim's track record: which published P99 / P95 a deployment reads, and
how a margin for a percentile target takes it (simulator/track_record.py tail_records,
simulator/capacity/margin.py), worked by hand on small records; the shipped file's tails."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from simulator import track_record as tr
from simulator.capacity.margin import margin_text, margined_slo, reads_tails, record_limits
from simulator.slo import SLO
from simulator.track_record import FigureRecord

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


def group(figure: str, errors: tuple[float, ...], *, stack: str = "vllm-v1",
          gpu: str = "h100-sxm", load: str = "rate") -> tr.Group:
    return tr.Group(stack, gpu, "one", load, figure, errors, tuple(100.0 for _ in errors))


def record(figure: str, errors: tuple[float, ...]) -> FigureRecord:
    return FigureRecord(figure, (("load", "rate"),), len(errors), 0, None, None,
                        tuple(sorted(errors)))


def test_a_tail_is_read_off_runs_under_the_same_kind_of_load() -> None:
    groups = [
        group("ttft_p95", (-0.1,) * 3),  # the same stack and GPU: P95 only
        group("ttft_p99", (-0.2,) * 3, gpu="a100-80gb"),  # another GPU: P99
        group("itl_p99", (0.1,) * 3, stack="trtllm", load="closed"),  # another load only
    ]
    recs = tr.tail_records(groups, "vllm-v1", "h100-sxm", "rate", min_cases=3)
    # the narrowest scope first (its P95), then no ITL: its tails are a closed loop's
    assert [(r.figure, dict(r.scope).get("gpu")) for r in recs] == [("ttft_p95", "h100-sxm")]
    # in one scope, P99 before P95
    both = [*groups, group("ttft_p99", (-0.3,) * 3)]
    assert tr.tail_records(both, "vllm-v1", "h100-sxm", "rate", min_cases=3)[0].errors == (
        -0.3, -0.3, -0.3)
    # too few cases in the narrow scopes: the GPU's class answers, both GPUs' P99s
    wide = tr.tail_records(both, "vllm-v1", "h100-sxm", "rate", min_cases=6)[0]
    assert wide.figure == "ttft_p99" and wide.cases == 6
    assert dict(wide.scope) == {"stack": "vllm-v1", "gpu_class": "data-centre",
                                "parallel": "one", "load": "rate", "experts": "dense"}
    # a burst has none, and track_record adds them only when asked
    assert tr.tail_records(both, "vllm-v1", "h100-sxm", "burst", min_cases=1) == []
    heads = tr.track_record(both, "vllm-v1", "h100-sxm", "rate", min_cases=1)
    assert {r.figure for r in heads} == {"ttft", "tpot", "output_throughput"}
    with_tails = tr.track_record(both, "vllm-v1", "h100-sxm", "rate", min_cases=1, tails=True)
    assert [r.figure for r in with_tails][3:] == ["ttft_p99"]


def test_tail_targets_read_the_tail_records() -> None:
    slo = SLO(ttft_ms=500, tpot_ms=50, itl_ms=40, e2el_ms=10_000, percentile=99,
              mean_queue_ms=100)
    assert reads_tails(slo) and not reads_tails(SLO(ttft_ms=500, percentile=50))
    assert record_limits(slo) == {"ttft": 500, "tpot": 50, "ttft_p99": 500, "ttft_p95": 500,
                                  "ttft_p90": 500, "tpot_p99": 50, "tpot_p90": 50,
                                  "itl_p99": 40, "itl_p95": 40, "itl_p90": 40}
    records = [record("ttft", (-0.05,) * 5), record("tpot", (-0.02,) * 5),
               record("ttft_p99", (-0.3, -0.2, -0.2, -0.1, 0.0)),  # at 0.8: -20%
               record("itl_p95", (-0.1,) * 5)]
    planned, margins = margined_slo(slo, records, 0.8)
    assert planned.ttft_ms == pytest.approx(400)  # the P99 record's -20%, not the mean's -5%
    assert margins["ttft"].figure == "ttft_p99"
    assert planned.tpot_ms == pytest.approx(49)  # no P99 TPOT here: the median's -2%
    assert planned.itl_ms == pytest.approx(36)  # ITL's P95 (no P99 ITL), -10%
    assert margins["itl"].figure == "itl_p95"
    assert planned.e2el_ms == pytest.approx(8_000)  # the tighter: TTFT's tail
    assert planned.mean_queue_ms == pytest.approx(95)  # a mean target reads the mean record
    text = margin_text(margins, slo, 0.8)
    assert ("P99 ttft <= 400 ms (500 less 20.0%: P99 TTFT read -20.0% or more on 80% of 5 "
            "runs [any stack, any GPU, arrivals at a rate])") in text
    assert "TPOT (its mean or median: no run like it published a tail) read -2.0%" in text
    assert "mean queue <= 95 ms (100 less 5.0%: TTFT read" in text
    # a median target reads the means and medians, whatever tails there are
    median, m50 = margined_slo(SLO(ttft_ms=500, percentile=50), records, 0.8)
    assert median.ttft_ms == pytest.approx(475) and m50["ttft"].figure == "ttft"
    # a P90 target reads the nearest published percentile: P90 where there is one
    p90 = [*records, record("ttft_p90", (-0.04,) * 5)]
    planned90, m90 = margined_slo(SLO(ttft_ms=500, itl_ms=40, percentile=90), p90, 0.8)
    assert m90["ttft"].figure == "ttft_p90" and planned90.ttft_ms == pytest.approx(480)
    assert m90["itl"].figure == "itl_p95"  # no P90 ITL: the P95, nearer than a P99
    assert margined_slo(SLO(ttft_ms=500, percentile=99), p90, 0.8)[1]["ttft"].figure \
        == "ttft_p99"


@pytest.mark.parametrize("q, ttft, tpot", [
    (99.9, ("ttft_p99", "ttft_p95", "ttft_p90"), ("tpot_p99", "tpot_p90")),
    (99, ("ttft_p99", "ttft_p95", "ttft_p90"), ("tpot_p99", "tpot_p90")),
    (97, ("ttft_p99", "ttft_p95", "ttft_p90"), ("tpot_p99", "tpot_p90")),  # 2 and 2: higher
    (95, ("ttft_p95", "ttft_p99", "ttft_p90"), ("tpot_p99", "tpot_p90")),  # 4 against 5
    (90, ("ttft_p90", "ttft_p95", "ttft_p99"), ("tpot_p90", "tpot_p99")),
])
def test_a_target_asks_for_the_nearest_published_percentile_first(
        q: float, ttft: tuple[str, ...], tpot: tuple[str, ...]) -> None:
    assert tr.tail_order("ttft", q) == ttft and tr.tail_order("tpot", q) == tpot
    assert tr.tail_percentile("itl_p95") == 95


def test_the_shipped_record_has_tails_where_runs_published_them() -> None:
    groups = tr.read_groups()
    figures = {g.figure for g in groups}
    assert {"ttft_p99", "tpot_p99", "itl_p99", "ttft_p95", "itl_p95"} <= figures
    # vLLM at a rate on one data-centre GPU: IOG's one-GPU H100 PCIe runs' P99s
    rate = tr.tail_records(groups, "vllm-v1", "h100-sxm", "rate")
    assert [r.figure for r in rate] == ["ttft_p99", "tpot_p99", "itl_p99"]
    assert all(dict(r.scope)["gpu_class"] == "data-centre" and dict(r.scope)["load"] == "rate"
               for r in rate)
    # TensorRT-LLM in a closed loop on an H100: NIM's GenAI-Perf P95s
    closed = tr.tail_records(groups, "trtllm", "h100-sxm", "closed", gpus=2)
    assert [r.figure for r in closed] == ["ttft_p95", "itl_p95"]
    # SGLang bursts on eight B200s: the cookbook's P99s (Qwen3 MoE runs: a dense model
    # reads them for want of its own kind's, as its headline record does)
    burst = tr.tail_records(groups, "sglang", "b200", "burst", gpus=8)
    assert [r.figure for r in burst] == ["ttft_p99", "tpot_p99", "itl_p99"]
    assert all(dict(r.scope) == {"stack": "sglang", "gpu": "b200", "parallel": "several",
                                 "load": "burst"} and r.cases == 18 for r in burst)


def test_a_replay_row_gives_the_tails_its_case_published() -> None:
    from published_cases import load_cases  # type: ignore[import-not-found]
    from track_record import build_groups  # type: ignore[import-not-found]

    case = next(c for c in load_cases(None)
                if c.id == "vllm0.8.5-iog-h100-pcie-Meta-Llama-3-8B-Instruct-tp1-sharegpt200-qps8")
    metrics = {k: {"published": v, "simulated": v * 1.1, "error": 0.1}
               for k, v in case.metrics.items()}
    groups = build_groups([{"id": case.id, "metrics": metrics, "fitted": ""}],
                          {case.id: case})
    got = {g["figure"]: (g["errors"], g["published"]) for g in groups}
    assert set(got) == {"ttft", "tpot", "output_throughput", "ttft_p99", "tpot_p99",
                        "itl_p99", "ttft_p90", "tpot_p90", "itl_p90"}  # IOG's files: P90s too
    assert got["ttft_p99"] == ([0.1], [float(f"{case.metrics['p99_ttft_ms']:.4g}")])
    assert all(g["load"] == "rate" and g["gpu"] == "h100-pcie" for g in groups)


def test_iog_tails_are_the_result_files_as_quoted() -> None:
    from published_cases import load_cases  # type: ignore[import-not-found]

    iog = [c for c in load_cases(None) if "-iog-" in c.id]
    assert len(iog) == 70
    for c in iog:
        m = c.metrics
        for latency in ("ttft", "tpot", "itl"):
            p90, p99 = m[f"p90_{latency}_ms"], m[f"p99_{latency}_ms"]
            assert m[f"median_{latency}_ms"] <= p90 <= p99, c.id
            for key, value in ((f"p90_{latency}_ms", p90), (f"p99_{latency}_ms", p99)):
                quoted = re.search(rf"\| {key} ([0-9.e+-]+)", c.quote)
                assert quoted and float(quoted.group(1)) == value, (c.id, key)


def test_every_p99_a_quote_prints_is_a_metric_of_its_case() -> None:
    from published_cases import load_cases  # type: ignore[import-not-found]

    labels = {"TTFT": "p99_ttft_ms", "TPOT": "p99_tpot_ms", "ITL": "p99_itl_ms"}
    seen = 0
    for c in load_cases(None):
        for label, key in labels.items():
            printed = re.findall(rf"P99 {label} \(ms\):\s*([0-9.]+)", c.quote)
            if printed:
                seen += 1
                assert c.metrics.get(key) == float(printed[0]), (c.id, key)
    # 93 runs' summary blocks: GPUStack's 58 and the SGLang cookbook's 24 print all three,
    # eleven threads' and repositories' 11 TTFT, 4 TPOT, 2 ITL
    assert seen == 3 * (58 + 24) + 17


def test_the_headroom_note_weighs_a_tail_target_by_the_tail_record() -> None:
    from simulator.capacity.headroom import headroom_lines
    from simulator.capacity.results import CandidateResult

    best = CandidateResult("c", {}, "h100-sxm", 1, "meets_slo", at_target={"slo": {
        "p99_ttft_ms": {"target": 500.0, "value": 460.0, "met": True},  # 8% headroom
        "p99_itl_ms": {"target": 50.0, "value": 47.0, "met": True},  # 6%
        "mean_queue_ms": {"target": 100.0, "value": 99.0, "met": True}}})  # 1%
    mean = FigureRecord("ttft", (), 10, 5, 0.05, -0.05, ())  # |error| 5%: under 8%
    tail = FigureRecord("ttft_p99", (), 10, 2, 0.20, -0.20, ())  # 20%: over 8%
    itl = FigureRecord("itl_p95", (), 10, 8, 0.10, -0.10, ())
    lines = headroom_lines(best, 10.0, [mean, tail, itl])
    assert len(lines) == 3
    assert "P99 TTFT's headroom (8%) is less than servesim's median P99 TTFT error on " \
        "published runs like it (20%)" in lines[1] and "--slo ttft_p99_ms=400 " in lines[1]
    assert "P99 ITL's headroom (6%) is less than servesim's median P95 ITL error" in lines[2]
    # the mean record alone leaves P99 TTFT's 8% unflagged; a mean target reads no tail
    assert headroom_lines(best, 10.0, [mean]) == lines[:1]


def test_a_p90_plan_shows_and_weighs_the_p90_record(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from servesim.cli import main
    from simulator.track_record import point_record

    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "chat.toml"
    assert main(["plan", str(scenario), "--rate", "2", "--slo",
                 "ttft_p90_ms=500,tpot_p90_ms=50", "--gpus", "h100-sxm", "--tp", "1",
                 "--policies", "chunked", "--out", str(tmp_path / "o"), "--json",
                 "--min-tail", "10", "--max-iterations", "3"]) == 0
    data = json.loads(capsys.readouterr().out)
    figures = [r["figure"] for r in data["track_record"]]
    # vLLM-like Poisson runs on one data-centre GPU published P90s (IOG's files): a P90
    # plan's record shows those, nearest its targets, not the P99s
    assert figures[3:] == ["ttft_p90", "tpot_p90", "itl_p90"]
    want = point_record({"hardware": {"gpu": "h100-sxm"}, "workload": {"rate": 2.0}},
                        tails=True, percentile=90)
    assert [r.figure for r in want][3:] == figures[3:]


def test_a_check_key_names_its_percentile_and_latency() -> None:
    from simulator.metrics_slo import check_parts, check_target

    assert check_parts("p99_ttft_ms") == (99.0, "ttft")
    assert check_parts("p99.9_itl_ms") == (99.9, "itl")
    assert check_parts("mean_queue_ms") == (None, "mean_queue")
    assert check_parts("ttft_ms") is None and check_parts("pxx_ttft_ms") is None
    slo = SLO(ttft_ms=500, itl_ms=40, mean_queue_ms=100, percentile=99.9)
    assert (check_target(slo, "p99.9_ttft_ms"), check_target(slo, "p99.9_itl_ms"),
            check_target(slo, "mean_queue_ms"), check_target(slo, "p99_tpot_ms")) == (
        500, 40, 100, None)


def test_the_headroom_note_reads_the_record_the_margin_reads() -> None:
    """One rule for which record answers a target (margin.target_figures): an ITL target
    with no ITL tail reads TPOT's record, as the margin does; an E2E target, which two
    latencies bound, gets no single typical error."""
    from simulator.capacity.headroom import headroom_lines
    from simulator.capacity.margin import record_query, target_figures
    from simulator.capacity.results import CandidateResult

    assert target_figures("itl", 99) == [("itl_p99", "itl_p95", "itl_p90", "tpot")]
    assert target_figures("itl", 50) == [("tpot",)]
    assert target_figures("e2el", 95) == [("ttft_p95", "ttft_p99", "ttft_p90", "ttft"),
                                          ("tpot_p99", "tpot_p90", "tpot")]
    best = CandidateResult("c", {}, "h100-sxm", 1, "meets_slo", at_target={"slo": {
        "p99_itl_ms": {"target": 50.0, "value": 47.0, "met": True},  # 6% headroom
        "p99_e2el_ms": {"target": 9000.0, "value": 8900.0, "met": True}}})  # 1%
    tpot = FigureRecord("tpot", (), 10, 8, 0.10, -0.10, ())
    lines = headroom_lines(best, 10.0, [tpot])
    assert len(lines) == 2 and "P99 ITL's headroom (6%) is less than servesim's median " \
        "TPOT error on published runs like it (10%)" in lines[1]
    slo = SLO(ttft_ms=500, percentile=95)
    assert record_query(slo) == {"limits": record_limits(slo), "tails": True,
                                 "percentile": 95}
