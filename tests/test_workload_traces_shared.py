"""Trace loaders on the real public samples in ../shared/traces (skipped when absent).

The samples are read in place and never copied into the repository. Set
SERVESIM_SHARED_TRACES to point elsewhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator.workload import load_trace

TRACES = Path(
    os.environ.get(
        "SERVESIM_SHARED_TRACES", Path(__file__).resolve().parents[2] / "shared" / "traces"
    )
)


def sample(name: str) -> Path:
    path = TRACES / name
    if not path.is_file():
        pytest.skip(f"shared trace sample {path} is not present")
    return path


def test_burstgpt1_head400_drops_17_failures() -> None:
    t = load_trace(sample("burstgpt1.head400.csv"))
    assert t.format == "burstgpt"
    assert t.dropped == {"failed_request": 17}
    assert len(t.table) == 400 - 17
    assert t.table["arrival_s"].iloc[:3].tolist() == [0.0, 40.0, 113.0]  # 5, 45, 118 s


def test_burstgpt3_head400_drops_one_failure() -> None:
    t = load_trace(sample("burstgpt3.head400.csv"))
    assert t.dropped == {"failed_request": 1}
    assert len(t.table) == 399
    assert t.table["prompt_tokens"].iloc[:3].tolist() == [906, 36, 1779]
    assert t.table["arrival_s"].iloc[1] == 51.0  # 19440161 - 19440110


def test_azure_conv_first_rows() -> None:
    t = load_trace(sample("azure2023_conv.head2000.csv"))
    assert t.format == "azure" and len(t.table) == 2000 and t.dropped == {}
    head = t.table.iloc[:3]
    assert head["prompt_tokens"].tolist() == [374, 396, 879]
    assert head["output_tokens"].tolist() == [44, 109, 55]
    # 18:15:50.9951690 - 18:15:46.6805900, 18:15:51.2224670 - 18:15:46.6805900
    np.testing.assert_allclose(head["arrival_s"], [0.0, 4.314579, 4.541877], atol=1e-9)
    assert t.table["arrival_s"].is_monotonic_increasing


def test_mooncake_conversation_ms_to_s_and_prefix_groups() -> None:
    path = sample("mooncake_conversation.head1000.jsonl")
    t = load_trace(path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    raw_ms = np.array([r["timestamp"] for r in rows], dtype=float)
    np.testing.assert_allclose(t.table["arrival_s"], (raw_ms - raw_ms.min()) / 1000.0)
    # every request of this sample starts with hash id 0 (a shared system prompt)
    assert (t.table["prefix_group"] == 0).all()
    assert t.table["prefix_tokens"].iloc[0] == 0
    assert t.table["prefix_tokens"].iloc[1] == 512
    assert (t.table["prefix_tokens"] < t.table["prompt_tokens"]).all()


def test_mooncake_synthetic_shared_prefix() -> None:
    t = load_trace(sample("mooncake_synthetic.head1000.jsonl"))
    tab = t.table
    assert tab["prefix_group"].iloc[0] == -1  # its first hash id never recurs here
    # lines 2 and 122 share 67 leading hash ids -> 67 * 512 = 34304 tokens
    assert tab["arrival_s"].iloc[121] == 34.569
    assert tab["prefix_group"].iloc[121] == tab["prefix_group"].iloc[1]
    assert tab["prefix_tokens"].iloc[121] == 34304


@pytest.mark.parametrize(
    "name",
    ["sharegpt_8k_lengths_llama2.head2000.csv", "arxiv_summarization_lengths_llama2.head2000.csv"],
)
def test_length_only_samples(name: str) -> None:
    path = sample(name)
    t = load_trace(path)
    raw = pd.read_csv(path)
    assert t.format == "lengths_csv" and len(t.table) == len(raw)
    assert t.table["arrival_s"].isna().all()
    assert t.table["prompt_tokens"].tolist() == raw["num_prefill_tokens"].tolist()
