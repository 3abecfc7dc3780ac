"""Engine replay writes the same request records as the simulator, replica column included.

Skipped without torch (the core suite runs without the engine extra).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from engine.models import build_model  # noqa: E402
from engine.serving import replay  # noqa: E402
from simulator.policies import make_policy  # noqa: E402


def test_engine_replay_sets_each_records_replica() -> None:
    """Issue 11: engine records said replica -1 (never routed) for requests it served.
    Three requests on one engine: every record, the one refused for its size included
    (the simulator names the replica that refused it too), says replica 0."""
    torch.set_num_threads(1)
    em = build_model("tiny", seed=0)
    reqs = pd.DataFrame({"request_id": [0, 1, 2], "arrival_s": [0.0, 0.0, 0.01],
                         "prompt_tokens": [5, 8, 200], "output_tokens": [3, 2, 2]})
    run = replay(reqs, em, make_policy("continuous"), kv_blocks=8)  # 128 tokens at most
    records = run.result.requests.set_index("request_id").sort_index()
    assert records["status"].tolist() == ["finished", "finished", "rejected"]
    assert records["replica"].tolist() == [0, 0, 0]


def test_serving_docstring_cites_tests_that_exist() -> None:
    """Issue 11: engine/serving.py cited tests/test_engine_fidelity.py, which never existed."""
    root = Path(__file__).resolve().parents[1]
    text = (root / "engine" / "serving.py").read_text()
    cited = re.findall(r"tests/[\w/]+\.py", text)
    assert cited
    for path in cited:
        assert (root / path).exists(), path
