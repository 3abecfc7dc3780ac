"""Small shared helpers for the tests: hand-checkable cost models and request tables."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import strategies as st

from simulator.shapes import StepShape, StepShapes


@dataclass(frozen=True)
class TokenCost:
    """t = step_s + prefill_token_s * P + decode_seq_s * D: easy to check by hand."""

    step_s: float = 0.0
    prefill_token_s: float = 0.0
    decode_seq_s: float = 0.0

    def step_time(self, shape: StepShape) -> float:
        return (self.step_s + self.prefill_token_s * shape.num_prefill_tokens
                + self.decode_seq_s * shape.num_decode_seqs)

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        return (self.step_s + self.prefill_token_s * shapes.num_prefill_tokens
                + self.decode_seq_s * shapes.num_decode_seqs)


def table(rows: list[tuple[float, int, int]]) -> pd.DataFrame:
    """A request table from (arrival_s, prompt_tokens, output_tokens) rows."""
    return pd.DataFrame({
        "request_id": np.arange(len(rows), dtype=np.int64),
        "arrival_s": [r[0] for r in rows],
        "prompt_tokens": [r[1] for r in rows],
        "output_tokens": [r[2] for r in rows],
    })


def timeline(records: pd.DataFrame) -> list[tuple[int, float, float, float]]:
    """(request_id, scheduled_s, first_token_s, finish_s) rows rounded to 1e-9."""
    return [
        (int(r.request_id), round(r.scheduled_s, 9), round(r.first_token_s, 9),
         round(r.finish_s, 9))
        for r in records.sort_values("request_id").itertuples()
    ]


def tiny_cpu_scenario(name: str, seed: int, workload: str) -> str:
    """A scenario TOML: the tiny model on the CPU, continuous batching, ``workload`` (the
    lines of its [workload] section)."""
    return (f'name = "{name}"\nseed = {seed}\n[model]\nname = "tiny"\nweight_dtype = "fp32"\n'
            f'[hardware]\ngpu = "cpu"\n[policy]\nname = "continuous"\n[workload]\n{workload}')


def mark_measured(folder: Path, kind: str = "endpoint-measured") -> None:
    """Relabel a simulated results folder as a measurement (its manifest.json's kind):
    tests of validate's arithmetic put the simulator on both sides, which ``--measured``
    refuses for real folders (issue 11)."""
    path = Path(folder) / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "kind": kind}))


def tiny_plan_scenario(name: str, seed: int) -> str:
    """A small plan scenario (two GPUs x two policies, a linear cost) as TOML text, for
    planner tests that compare whole plans run two ways."""
    return f"""name = "{name}"
seed = {seed}
[hardware]
gpu = ["h100-sxm", "a100-80gb"]
[policy]
name = ["continuous", "chunked"]
max_num_seqs = 32
[workload]
arrival = "poisson"
rate = 100.0
prompt = {{ dist = "uniform", low = 16, high = 64 }}
output = {{ dist = "uniform", low = 4, high = 32 }}
[cluster]
router = "least_outstanding"
[cost]
form = "linear"
step_s = 0.004
decode_seq_s = 0.0002
prefill_token_s = 0.00002
"""


def assert_accounted(res: Any, num_requests: int, kv_blocks: int) -> None:
    """The invariants every property test of a run checks (``res``: a SimResult): each
    request finished or refused with a reason, none left in flight; a finished one's
    times in order; KV never above capacity and all of it returned at the end."""
    recs, steps = res.requests, res.steps
    assert len(recs) == num_requests
    assert set(recs["status"]) <= {"finished", "rejected"}
    rejected = recs[recs["status"] == "rejected"]
    assert (rejected["reason"].str.len() > 0).all()
    done = recs[recs["status"] == "finished"]
    assert (done["arrival_s"] <= done["scheduled_s"] + 1e-12).all()
    assert (done["scheduled_s"] < done["first_token_s"]).all()
    assert (done["first_token_s"] <= done["finish_s"]).all()
    assert (steps["kv_blocks_used"] <= kv_blocks).all()
    assert (steps.groupby("replica")["kv_blocks_used"].last() == 0).all()


def request_rows(max_prompt: int = 40, max_output: int = 30, max_size: int = 25
                 ) -> st.SearchStrategy[list[tuple[float, int, int]]]:
    """(arrival_s in [0, 2], prompt tokens, output tokens) rows for :func:`table`."""
    return st.lists(st.tuples(st.floats(0, 2), st.integers(1, max_prompt),
                              st.integers(1, max_output)), min_size=1, max_size=max_size)


def grid_rows(max_prompt: int = 40, max_output: int = 30
              ) -> st.SearchStrategy[list[tuple[float, int, int]]]:
    """Rows whose arrivals sit on a 0.125 s grid, where 0.25 s steps end: ties galore."""
    return st.lists(st.tuples(st.integers(0, 40).map(lambda i: i * 0.125),
                              st.integers(1, max_prompt), st.integers(1, max_output)),
                    min_size=1, max_size=25)


def published_case_toml(extra: str = "", metrics: str = "output_throughput = 1.0",
                        stack: str = "vllm-v1", version: str = "0.8") -> str:
    """One ``[[case]]`` of benchmarks/published_cases.toml's schema, id "x", a 10/10-token
    burst of Llama-3.1-8B on an H100: ``extra`` lines added, ``metrics`` its table."""
    return (f'[[case]]\nid = "x"\nsource = "s"\nstack = "{stack}"\n'
            f'stack_version = "{version}"\ngpu = "h100-sxm"\nmodel = "llama-3.1-8b"\n'
            f'weight_dtype = "bf16"\ntp = 1\n{extra}'
            'workload = { prompt_tokens = 10, output_tokens = 10, num_prompts = 5, '
            f'arrival = "burst" }}\nmetrics = {{ {metrics} }}\n')


def step_shapes(prefill: list[int], decode: list[int], context: list[int]) -> StepShapes:
    """Steps of ``prefill`` prompt tokens (no attention work) and ``decode`` rows over
    ``context`` tokens, nothing admitted or finished: a cost model's array path's input."""
    n = len(prefill)
    return StepShapes(num_prefill_tokens=np.array(prefill), prefill_attn_work=np.zeros(n),
                      num_decode_seqs=np.array(decode), decode_context_tokens=np.array(context),
                      num_admitted=np.zeros(n, dtype=np.int64),
                      num_finished=np.zeros(n, dtype=np.int64))
