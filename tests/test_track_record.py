"""simulator/track_record.py and benchmarks/track_record.py: the record of servesim's replays
of published runs, worked by hand; the shipped file against the case files; the reports."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import sys
from collections import Counter
from pathlib import Path

import pytest

from simulator import track_record as tr
from simulator.errors import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
pc = importlib.import_module("benchmarks.published_cases")
bt = importlib.import_module("benchmarks.track_record")


def group(stack: str, gpu: str, load: str, errors: list[float | None],
          figure: str = "ttft", parallel: str = "one") -> tr.Group:
    return tr.Group(stack, gpu, parallel, load, figure, tuple(errors))


def test_kinds_of_load() -> None:
    assert tr.load_kind("closed", None) == "closed"
    # a closed loop of MANY_CLIENTS (25) or more is a kind of its own: its rounds group
    assert [tr.load_kind("closed", None, c) for c in (1, 24, 25, 250)] \
        == ["closed", "closed", "closed_many", "closed_many"]
    assert tr.load_kind("poisson", 4.0, 100) == "rate"  # clients count only in a closed loop
    assert tr.load_kind("poisson", math.inf) == "burst"  # rate = inf: every request at 0
    assert tr.load_kind("burst", None) == "burst"  # a published case's own word
    assert [tr.load_kind(a, 4.0) for a in ("poisson", "gamma", "constant")] == ["rate"] * 3
    assert tr.load_kind("trace", None) == "rate"
    assert [tr.load_kind(k, None) for k in tr.LOADS] == list(tr.LOADS)  # a kind is itself


def test_one_figure_by_hand() -> None:
    groups = [group("vllm-v1", "h100-sxm", "rate", [0.10, -0.20, None, 0.05]),
              group("vllm-v1", "h100-sxm", "rate", [0.5], figure="tpot")]
    r = tr.figure_record(groups, "ttft", {"stack": "vllm-v1"})
    # within 15%: +10% and +5%; the case with no result is a miss
    assert (r.cases, r.within, r.share) == (4, 2, 0.5)
    assert r.median_abs == pytest.approx(0.10)  # |.| of 0.10, -0.20, 0.05
    assert r.signed_median == pytest.approx(0.05)
    assert r.scope == (("stack", "vllm-v1"),)
    none = tr.figure_record([group("a", "b", "rate", [None])], "ttft", {})
    assert (none.cases, none.within, none.median_abs, none.signed_median) == (1, 0, None, None)


GROUPS = [
    group("vllm-v1", "h100-sxm", "rate", [0.01, 0.02, 0.03]),
    group("sglang", "h100-sxm", "rate", [0.5] * 8),
    group("sglang", "a100-80gb", "closed", [0.0] * 20),
]


def test_the_narrowest_group_with_enough_cases_answers() -> None:
    # vllm-v1 on an H100 at a rate: 3 cases; vllm-v1 at a rate anywhere: 3; the H100 at a
    # rate under any stack: 11 -> that one answers
    rec = tr.track_record(GROUPS, "vllm-v1", "h100-sxm", "rate", min_cases=10)[0]
    assert dict(rec.scope) == {"gpu": "h100-sxm", "parallel": "one", "load": "rate",
                               "experts": "dense"}
    assert rec.cases == 11
    assert rec.within == 3  # vllm-v1's three, not sglang's eight at +50%
    narrow = tr.track_record(GROUPS, "vllm-v1", "h100-sxm", "rate", min_cases=3)[0]
    assert dict(narrow.scope) == {"stack": "vllm-v1", "gpu": "h100-sxm", "parallel": "one",
                                  "load": "rate", "experts": "dense"}
    # a load no group holds under that GPU: data-centre GPUs under that load (20 cases)
    closed = tr.track_record(GROUPS, "vllm-v1", "h100-sxm", "closed", min_cases=10)[0]
    assert dict(closed.scope) == {"gpu_class": "data-centre", "parallel": "one",
                                  "load": "closed", "experts": "dense"}
    assert closed.cases == 20
    # no stack: the scopes naming one are skipped even where they would hold enough
    free = tr.track_record(GROUPS, tr.NO_STACK, "a100-80gb", "closed", min_cases=3)[0]
    assert dict(free.scope) == {"gpu": "a100-80gb", "parallel": "one", "load": "closed",
                                "experts": "dense"}
    # nothing reaches the bar: every case answers
    everything = tr.track_record(GROUPS, "trtllm", "b200", "burst", min_cases=100)[0]
    assert everything.scope == () and everything.cases == 31
    # one record per figure, in FIGURES' order; a figure with no case reads 0 cases
    recs = tr.track_record(GROUPS, "sglang", "a100-80gb", "closed", min_cases=10)
    assert [r.figure for r in recs] == [f for f, _ in tr.FIGURES]
    assert [r.cases for r in recs] == [20, 0, 0]


def test_a_wider_scope_keeps_the_gpu_class() -> None:
    consumer = [*GROUPS, group("vllm-v1", "rtx4090", "rate", [-0.9] * 12)]
    # an H100 at a rate: 11 data-centre cases, not the RTX 4090's 12 misses
    h100 = tr.track_record(consumer, tr.NO_STACK, "h100-sxm", "rate", min_cases=10)[0]
    assert dict(h100.scope) == {"gpu": "h100-sxm", "parallel": "one", "load": "rate",
                                "experts": "dense"}
    assert (h100.cases, h100.within) == (11, 3)
    l40s = tr.track_record(consumer, tr.NO_STACK, "l40s", "rate", min_cases=10)[0]
    assert dict(l40s.scope) == {"gpu_class": "data-centre", "parallel": "one", "load": "rate",
                                "experts": "dense"}
    assert (l40s.cases, l40s.within) == (11, 3)
    assert tr.scope_text(l40s.scope) == \
        "any stack, any data-centre GPU, one GPU, arrivals at a rate, dense"
    # an RTX 4090 under a stack with no run of its own there: the consumer board's runs
    mine = tr.track_record(consumer, "sglang", "rtx4090", "rate", min_cases=10)[0]
    assert dict(mine.scope) == {"gpu": "rtx4090", "parallel": "one", "load": "rate",
                                "experts": "dense"}
    assert mine.within == 0
    assert tr.gpu_class("rtx4090") == "consumer" and tr.gpu_class("b200") == "data-centre"


def test_a_moe_model_reads_moe_runs_first_then_any_kind() -> None:
    moe = [*GROUPS, tr.Group("vllm-v1", "h100-sxm", "one", "burst", "ttft", (-0.4,) * 12,
                             experts="moe"),
           tr.Group("vllm-v1", "h100-sxm", "one", "burst", "ttft", (0.01,) * 3)]
    mine = tr.track_record(moe, "vllm-v1", "h100-sxm", "burst", min_cases=10,
                           experts="moe")[0]
    assert dict(mine.scope)["experts"] == "moe" and (mine.cases, mine.within) == (12, 0)
    # a dense model: its three runs are too few anywhere, so the stack's fifteen answer,
    # of either kind, and the scope says no kind
    dense = tr.track_record(moe, "vllm-v1", "h100-sxm", "burst", min_cases=10)[0]
    assert dict(dense.scope) == {"stack": "vllm-v1", "gpu": "h100-sxm", "parallel": "one",
                                 "load": "burst"}
    assert dense.cases == 15
    # a MoE model at a rate, where no MoE run is: the dense runs, not said to be MoE
    rate = tr.track_record(moe, "vllm-v1", "h100-sxm", "rate", min_cases=10,
                           experts="moe")[0]
    assert "experts" not in dict(rate.scope) and rate.cases == 11
    assert tr.model_kind("gpt-oss-120b") == "moe" and tr.model_kind("llama-3.1-8b") == "dense"
    assert tr.model_kind("openai/gpt-oss-20b") == "moe"  # a catalogue alias
    assert tr.model_kind("/some/config.json") == "dense"  # not in the catalogue


def test_report_lines() -> None:
    recs = tr.track_record(GROUPS, "sglang", "a100-80gb", "closed", min_cases=10)
    lines = tr.record_lines(recs, "the best candidate")
    assert lines[0].endswith(", for the best candidate:")
    assert "100% of 20 runs within 15%; median error +0%, |error| 0%" in lines[1]
    assert lines[1].endswith("[sglang, a100-80gb, one GPU, closed loop under 25 clients, dense]")
    assert "0 runs, none with a result" in lines[2]
    assert tr.record_lines([]) == []
    assert tr.record_json(recs[0])["scope"] == {"stack": "sglang", "gpu": "a100-80gb",
                                                "parallel": "one", "load": "closed",
                                                "experts": "dense"}


def _one_group(**fields: object) -> str:
    g = {"stack": "x", "gpu": "y", "parallel": "one", "load": "rate", "figure": "ttft",
         "errors": [], **fields}
    return json.dumps({"groups": [g]})


@pytest.mark.parametrize("body, says", [
    ("{", "not a readable track-record file"),
    ('{"groups": 3}', "expected an object with a 'groups' list"),
    (_one_group(errors=[0.1, "a"]), "groups[0]: errors must be a list of numbers or nulls"),
    (_one_group(load="offline"), "groups[0]: load = 'offline': unknown (one of ['rate'"),
    (_one_group(parallel=2), "groups[0]: parallel = 2: expected a non-empty string"),
    (_one_group(parallel="two"), "parallel = 'two': unknown (one of ['one', 'several'])"),
    (_one_group(stack=""), "groups[0]: stack = '': expected a non-empty string"),
    (_one_group(errors=[0.1], published=[1.0, 2.0]), "published must be a list of numbers > 0"),
    (_one_group(errors=[0.1], published=[0]), "groups[0]: published must be a list"),
])
def test_a_damaged_file_is_named(tmp_path: Path, body: str, says: str) -> None:
    path = tmp_path / "record.json"
    path.write_text(body)
    with pytest.raises(ConfigError, match=r"record\.json") as e:
        tr.read_groups(path)
    assert says in str(e.value)


def test_the_benchmark_groups_rows_by_hand(tmp_path: Path) -> None:
    base = pc.load_cases()[0]

    def case(cid: str, stack: str, arrival: str, harness: str = "", tp: int = 1,
             model: str = "llama-3.1-8b") -> object:
        return dataclasses.replace(base, id=cid, stack=stack, gpu="h200", harness=harness,
                                   tp=tp, workload={"arrival": arrival}, model=model,
                                   metrics={"mean_ttft_ms": 1.0, "output_throughput": 1.0})

    cases = {c.id: c for c in (case("a", "vllm-v1", "poisson"), case("b", "vllm-v1", "poisson"),
                               case("c", "sglang", "burst", tp=8, model="mixtral-8x7b"),
                               case("d", "vllm-v0", "closed", harness="accelmark"))}
    def m(error: float | None, published: float) -> dict[str, float | None]:
        return {"error": error, "published": published}

    rows = [{"id": "a", "metrics": {"mean_ttft_ms": m(0.123456, 123.4567),
                                    "output_throughput": m(-0.01, 2000.0)}},
            {"id": "b", "metrics": {"mean_ttft_ms": m(None, 50.0)}},
            {"id": "c", "metrics": {"median_ttft_ms": m(0.3, 9000.0)}},
            {"id": "d", "metrics": {"mean_ttft_ms": m(9.0, 1.0)}},  # in the engine's process
            {"id": "a", "fitted": "a preset", "metrics": {"mean_ttft_ms": m(5.0, 7.0)}}]
    groups = bt.build_groups(rows, cases)
    assert groups == [
        {"stack": "sglang", "gpu": "h200", "parallel": "several", "load": "burst",
         "experts": "moe", "figure": "ttft", "errors": [0.3], "published": [9000.0]},
        {"stack": "vllm-v1", "gpu": "h200", "parallel": "one", "load": "rate",
         "experts": "dense", "figure": "output_throughput", "errors": [-0.01],
         "published": [2000.0]},
        {"stack": "vllm-v1", "gpu": "h200", "parallel": "one", "load": "rate",
         "experts": "dense", "figure": "ttft", "errors": [0.1235, None],
         "published": [123.5, 50.0]},  # four digits
    ]
    path = tmp_path / "t.json"
    path.write_text(bt.file_text(bt.file_body(groups, "abc1234")))
    assert json.loads(path.read_text())["commit"] == "abc1234"
    read = tr.read_groups(path)
    assert [g.errors for g in read] == [(0.3,), (-0.01,), (0.1235, None)]
    assert read[2].published == (123.5, 50.0) and read[2].kept(100.0) == (None,)


def test_the_shipped_file_covers_the_held_out_cases() -> None:
    """Each group of simulator/track_record.json holds as many errors as the case files
    have held-out cases of that stack, GPU, GPUs a replica, load and figure (the headline's
    and each tail a case published; a case added
    or moved without ``benchmarks/track_record.py`` run again fails here)."""
    want: Counter[tuple[str, str, str, str, str, str]] = Counter()
    for case in pc.load_cases():
        if case.fitted or case.harness:
            continue
        where = (case.stack, case.gpu, tr.parallel_kind(case.tp), bt.case_load(case),
                 tr.model_kind(case.model))
        for (figure, _), keys in zip(tr.FIGURES, bt.HEADLINE_FORMS.values(), strict=True):
            if any(k in case.metrics for k in keys):
                want[(*where, figure)] += 1
        for metric, figure in bt.TAIL_KEYS.items():  # the tails it published
            if metric in case.metrics:
                want[(*where, figure)] += 1
    have = Counter({(g.stack, g.gpu, g.parallel, g.load, g.experts, g.figure): len(g.errors)
                    for g in tr.read_groups()})
    assert have == want
    assert all(len(g.published) == len(g.errors) for g in tr.read_groups())


def test_a_deployment_reads_its_record() -> None:
    recs = tr.deployment_record("vllm-v1 0.11", "h100-sxm", "rate")
    assert [r.figure for r in recs] == [f for f, _ in tr.FIGURES]
    assert all(r.cases >= tr.MIN_CASES for r in recs)
    assert all(dict(r.scope).get("load") == "rate" for r in recs)
    assert dict(tr.deployment_record("none", "h100-sxm", "closed")[0].scope)["load"] \
        == "closed"
    assert tr.deployment_record("none", "h100-sxm", "closed",
                                path=Path("no-such-file.json")) == []
    assert tr.deployment_record("none", "cpu", "rate") == []  # validate's business


def test_a_replay_whose_figures_moved_is_noted() -> None:
    shipped = [{"stack": g.stack, "gpu": g.gpu, "parallel": g.parallel, "load": g.load,
                "experts": g.experts, "figure": g.figure, "errors": list(g.errors),
                "published": list(g.published)} for g in tr.read_groups()]
    assert bt.same_groups(shipped)
    moved = [dict(g) for g in shipped]
    moved[0] = {**moved[0], "errors": [*moved[0]["errors"][:-1], 0.5]}
    assert not bt.same_groups(moved)
    other = [dict(g) for g in shipped]  # the same errors against other published figures
    other[0] = {**other[0], "published": [p * 2 for p in other[0]["published"]]}
    assert not bt.same_groups(other)
    assert "differs from this replay" in bt.stale_note([], {})  # no rows: nothing matches


def test_plan_headroom_against_the_record_by_hand() -> None:
    from simulator.capacity import CandidateResult
    from simulator.capacity.headroom import headroom, headroom_lines

    best = CandidateResult(name="h100-sxm x1 bf16 chunked", labels={}, gpu="h100-sxm", tp=1,
                           status="meets_slo", at_target={"slo": {
                               "p99_ttft_ms": {"target": 500.0, "value": 460.0, "met": True},
                               "p99_tpot_ms": {"target": 50.0, "value": 25.0, "met": True}}})
    assert headroom(best) == pytest.approx({"p99_ttft_ms": 0.08, "p99_tpot_ms": 0.5})
    records = [tr.FigureRecord("ttft", (), 50, 30, 0.14, -0.05),
               tr.FigureRecord("tpot", (), 50, 40, 0.07, -0.02)]
    lines = headroom_lines(best, 20.0, records)
    assert lines[0] == ("headroom of h100-sxm x1 bf16 chunked at 20 req/s: P99 TTFT 460 ms of "
                        "500 (8%), P99 TPOT 25 ms of 50 (50%)")
    # TTFT's 8% is under the record's 14%: 500 x (1 - 0.14) = 430; TPOT's 50% is not
    assert len(lines) == 2 and "P99 TTFT's headroom (8%)" in lines[1]
    assert "--slo ttft_p99_ms=430" in lines[1]
    assert headroom_lines(best, 20.0, []) == lines[:1]  # no record: the headroom alone


def test_a_scenario_point_reads_the_record_of_its_fields() -> None:
    point = {"stack": {"name": "vllm-v1", "version": "0.11"}, "hardware": {"gpu": "a100-80gb"},
             "workload": {"arrival": "poisson", "rate": float("inf")}}
    burst = tr.deployment_record("vllm-v1 0.11", "a100-80gb", "burst")
    assert tr.point_record(point) == burst and dict(burst[0].scope)["load"] == "burst"
    # a plan's candidate: its own GPU at the target rate (not the point's burst)
    at_rate = tr.point_record(point, gpu="h200", rate=5.0)
    assert at_rate == tr.deployment_record("vllm-v1", "h200", "rate")
    assert tr.point_record({"hardware": {"gpu": "h100-sxm"}, "workload": {"rate": [1, 2]}}) \
        == tr.deployment_record("none", "h100-sxm", "rate")  # a sweep's list: a rate


def test_a_closed_loop_reads_the_runs_of_as_many_clients() -> None:
    groups = [group("trtllm", "h100-sxm", "closed", [0.0] * 10),
              group("trtllm", "h100-sxm", "closed_many", [0.3] * 6 + [0.1] * 4)]
    few = tr.track_record(groups, "trtllm", "h100-sxm", "closed")[0]
    many = tr.track_record(groups, "trtllm", "h100-sxm", "closed_many")[0]
    assert (few.cases, few.within, many.cases, many.within) == (10, 10, 10, 4)
    assert tr.scope_text(many.scope) \
        == "trtllm, h100-sxm, one GPU, closed loop of 25+ clients, dense"
    # a scenario point and a published case say how many clients through ``concurrency``
    point = {"stack": {"name": "trtllm"}, "hardware": {"gpu": "h100-sxm"},
             "workload": {"arrival": "closed", "concurrency": 100}}
    assert dict(tr.point_record(point)[0].scope)["load"] == "closed_many"
    point["workload"]["concurrency"] = 10
    assert dict(tr.point_record(point)[0].scope)["load"] == "closed"
    point["workload"]["concurrency"] = [10, 40]  # a sweep: its most-loaded point's record
    assert dict(tr.point_record(point)[0].scope)["load"] == "closed_many"
    base = pc.load_cases()[0]
    for clients, load in ((5, "closed"), (100, "closed_many")):
        case = dataclasses.replace(base, workload={"arrival": "closed", "concurrency": clients})
        assert bt.case_load(case) == load


def test_the_shipped_file_keeps_many_clients_apart() -> None:
    """The shipped replay's held-out closed loops: 25+ clients read their mean TTFT within
    15% less often than fewer (the groups' counts, summed here; docs/metrics.md)."""
    groups = tr.read_groups()
    few, many = (tr.figure_record(groups, "ttft", {"load": k}) for k in ("closed", "closed_many"))
    assert (few.cases, few.within, many.cases, many.within) == (263, 229, 303, 196)
    assert many.share < 0.7 < 0.85 < few.share


def test_a_replica_of_several_gpus_reads_their_runs() -> None:
    groups = [group("trtllm", "h200", "burst", [0.0] * 10),
              group("trtllm", "h200", "burst", [-0.5] * 10, parallel="several")]
    one = tr.track_record(groups, "trtllm", "h200", "burst", gpus=1)[0]
    tp8 = tr.track_record(groups, "trtllm", "h200", "burst", gpus=8)[0]
    assert (one.within, tp8.within) == (10, 0)
    assert tr.scope_text(tp8.scope) == "trtllm, h200, several GPUs, all at once, dense"
    assert tr.parallel_kind(1) == "one" and tr.parallel_kind(2) == "several"
    # a scenario point: tp x attention_dp GPUs a replica
    point = {"stack": {"name": "trtllm"}, "hardware": {"gpu": "h200", "tp": 1, "attention_dp": 4},
             "workload": {"arrival": "poisson", "rate": float("inf")}}
    assert dict(tr.point_record(point)[0].scope)["parallel"] == "several"


def test_the_file_names_the_replays_commit(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"rows": [], "commit": "abc1234"}))
    out = tmp_path / "record.json"
    assert bt.main([str(run), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["commit"] == "abc1234" and tr.read_groups(out) == []
    assert bt.main([str(run), "--out", str(out), "--check"]) == 0  # the same: no groups
    assert bt.main([str(run), "--check"]) == 1  # the shipped file holds groups
    assert "differs from" in capsys.readouterr().out
