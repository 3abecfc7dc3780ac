"""Under overload, priority scheduling keeps the urgent class within its SLO while the
batch class absorbs the queueing; FCFS makes both queue alike."""

from __future__ import annotations

import numpy as np
import pandas as pd
from helpers import TokenCost

from simulator.cluster import ClusterSpec, simulate
from simulator.metrics_classes import class_summary
from simulator.policies import ContinuousPolicy
from simulator.slo import SLO
from simulator.workload.classes import WorkloadClasses

# 0.1 s a step whatever it holds; every request is 8 prompt + 8 output tokens, so it
# takes 8 steps (a prefill emitting token 1, then 7 decodes): with 2 running at a time the
# replica finishes at most 2 / 0.8 s = 2.5 req/s. Requests arrive at 5 req/s (2x that),
# every 5th (1 req/s) interactive (class 0), the rest batch (class 1).
COST = TokenCost(step_s=0.1)
N = 200
CLASSES = WorkloadClasses.from_value({"interactive": {"ttft_ms": 1000}, "batch": {}})


def _table() -> pd.DataFrame:
    ids = np.arange(N)
    return pd.DataFrame({"request_id": ids, "arrival_s": ids * 0.2,
                         "prompt_tokens": 8, "output_tokens": 8,
                         "priority_class": (ids % 5 != 0).astype(np.int64)})


def _classes(scheduling: str) -> dict[str, dict]:  # type: ignore[type-arg]
    policy = ContinuousPolicy(max_num_seqs=2, chunked_prefill=True,
                              scheduling=scheduling)  # type: ignore[arg-type]
    spec = ClusterSpec(policy, COST, kv_blocks=1000, block_size=16, check_invariants=True)
    requests = _table()
    res = simulate(requests, spec)
    records = res.requests.assign(priority_class=requests["priority_class"].to_numpy())
    return class_summary(records, CLASSES, SLO(e2el_ms=600_000))


def test_the_urgent_class_keeps_its_slo_and_the_batch_class_queues() -> None:
    prio, fcfs = _classes("priority"), _classes("fcfs")
    hi, lo = prio["interactive"], prio["batch"]
    assert hi["requests"] == 40 and lo["requests"] == 160
    assert hi["completed"] + lo["completed"] == N  # nothing lost
    # An interactive request waits at most for one running request's slot to be taken
    # (it evicts a batch one: 1 step) and its own prefill (1 step): TTFT <= 0.2 s, well
    # within its 1 s target; every one of them is good.
    assert hi["p99_ttft_ms"] <= 200 + 1e-6
    assert hi["goodput_fraction"] == 1.0 and hi["slo_met"] is True
    # The batch class holds the backlog: 2x overload for 40 s leaves about 20 s of it.
    assert lo["p99_ttft_ms"] > 10_000
    assert lo["preemptions"] > 0 and hi["preemptions"] == 0
    # FCFS: the interactive requests queue behind the backlog like everyone else.
    assert fcfs["interactive"]["p99_ttft_ms"] > 10_000
    assert fcfs["interactive"]["slo_met"] is False
    assert fcfs["batch"]["preemptions"] == 0
    # the batch class has no targets of its own: it is judged on the run's [slo]
    assert lo["slo"] == {"e2el_ms": 600_000.0, "percentile": 99.0}
