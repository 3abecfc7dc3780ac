"""Decode steps past a stack's CUDA-graph limit: a pure-decode step of more rows than
``graph_max_rows`` pays ``eager_s`` (simulator/costs/host.py), by hand on a 10 ms step; and
SGLang 0.4's limit by GPU memory (simulator/stack_presets.py)."""

from __future__ import annotations

import pytest
from helpers import TokenCost

from simulator.costs.host import HostCost, Overhead
from simulator.deployment import resolve
from simulator.shapes import StepShape, StepShapes
from simulator.specs.hardware import get_hardware
from simulator.stacks import STACKS


class PricedCost(TokenCost):
    """TokenCost with an exact pure-decode pricer (as the shipped cost models have)."""

    def decode_pricer(self):  # noqa: ANN201
        return lambda d, c, f: self.step_s + self.decode_seq_s * d


COST = HostCost(PricedCost(step_s=0.01), Overhead(eager_s=0.04, graph_max_rows=160))


def _decode(rows: int, prefill: int = 0) -> StepShape:
    return StepShape(num_prefill_tokens=prefill, num_decode_seqs=rows,
                     decode_context_tokens=rows * 100)


def test_only_a_pure_decode_step_past_the_limit_pays_the_eager_cost() -> None:
    assert COST.step_time(_decode(160)) == pytest.approx(0.01)  # the largest graph
    assert COST.step_time(_decode(161)) == pytest.approx(0.05)  # eager: 10 + 40 ms
    assert COST.step_time(_decode(500, prefill=512)) == pytest.approx(0.01)  # mixed: not a graph
    off = HostCost(TokenCost(step_s=0.01), Overhead(eager_s=0.04))  # no limit: never eager
    assert off.step_time(_decode(5000)) == pytest.approx(0.01)


def test_arrays_and_the_decode_pricer_agree_with_one_step() -> None:
    shapes = [_decode(1), _decode(160), _decode(161), _decode(300, prefill=64)]
    arrays = StepShapes.from_shapes(shapes)
    assert COST.step_times(arrays) == pytest.approx([COST.step_time(s) for s in shapes])
    pricer = COST.decode_pricer()
    assert pricer is not None
    assert (pricer(160, 16_000, 0), pricer(161, 16_100, 0)) == pytest.approx((0.01, 0.05))


def test_sglang_04_replays_graphs_up_to_160_rows_or_8_on_small_gpus() -> None:
    preset = next(p for p in STACKS["sglang"] if p.version == "0.4")
    assert preset.host_costs(80, 4, get_hardware("h200"))["graph_max_rows"] == 160
    assert preset.host_costs(32, 1, get_hardware("rtx4090"))["graph_max_rows"] == 8  # 24 GB
    assert "graph_max_rows" not in preset.host_costs(80, 4)  # no GPU named: no limit
    dep = resolve({"model": {"name": "llama-3.1-70b"}, "hardware": {"gpu": "h200", "tp": 4},
                   "stack": {"name": "sglang", "version": "0.4"}})
    assert "graph rows 160" in dep.cost_source
    five = resolve({"model": {"name": "llama-3.1-70b"}, "hardware": {"gpu": "h200", "tp": 4},
                    "stack": {"name": "sglang", "version": "0.5"}})
    assert "graph rows" not in five.cost_source  # 0.5's eager steps are not priced


def test_sglang_02_and_03_capture_160_rows_on_every_gpu_with_04s_eager_cost() -> None:
    by_version = {p.version: p for p in STACKS["sglang"]}
    for version in ("0.2", "0.3"):
        costs = by_version[version].host_costs(32, 1, get_hardware("rtx4090"))
        assert costs["graph_max_rows"] == 160  # no 8-row rule before 0.4
        four = by_version["0.4"].host_costs(32, 1, get_hardware("rtx4090"))
        assert costs["eager_s"] == pytest.approx(four["eager_s"])  # 0.4's fit, x 32 layers
        assert costs["eager_s"] == pytest.approx(32 * 0.9547e-3)


def test_a_burst_pays_the_eager_cost_only_while_more_than_160_rows_decode() -> None:
    """SGLang 0.4 on an H100: 200 requests at once, outputs of 2-40 tokens. The batch
    drains from 200 rows to none; only the pure-decode steps of more than 160 rows take
    eager_s (4 layers x 0.9547 ms) longer than the same run priced without it. A burst's
    schedule does not depend on the step times, so the two step logs align row by row."""
    from simulator.runner import run_point

    point = {"model": {"name": "tiny"}, "hardware": {"gpu": "h100-sxm", "tp": 1},
             "stack": {"name": "sglang", "version": "0.4"},
             "workload": {"arrival": "poisson", "rate": float("inf"), "num_requests": 200,
                          "prompt": {"dist": "fixed", "tokens": 8},
                          "output": {"dist": "uniform", "low": 2, "high": 40}}}
    eager = run_point({}, point).result.steps
    graphs = run_point({}, {**point, "cost": {"overhead": {"eager_s": 0.0}}}).result.steps
    assert len(eager) == len(graphs)
    assert (eager["num_decode_seqs"].to_numpy() == graphs["num_decode_seqs"].to_numpy()).all()
    extra = (eager["end_s"] - eager["start_s"]) - (graphs["end_s"] - graphs["start_s"])
    past = ((eager["num_prefill_tokens"] == 0) & (eager["num_decode_seqs"] > 160)).to_numpy()
    assert 0 < past.sum() < len(eager)  # some steps on each side of the limit
    assert extra[past].to_numpy() == pytest.approx(4 * 0.9547e-3)
    assert extra[~past].to_numpy() == pytest.approx(0.0, abs=1e-12)
