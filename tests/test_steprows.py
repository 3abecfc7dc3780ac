"""The C row expander of the full step log (simulator/_steprows.c) gives numpy's rows.

The suite runs the simulator as Python (tests/conftest.py), so the expander is loaded here
straight from the compiled build and put in the step log's place; without a build these
tests skip (tests/test_accel.py also compares whole runs, compiled against Python).
"""

from __future__ import annotations

import importlib.util
from types import ModuleType

import numpy as np
import pytest

import simulator.steplog as steplog
from simulator.accel import build_dir, read_manifest
from simulator.shapes import StepShape, StepShapes
from simulator.steplog import _COLUMNS, StepLog


def _native() -> ModuleType | None:
    """The built ``simulator._steprows``, or None without a build of these sources."""
    manifest = read_manifest(build_dir())
    files = manifest.get("files") if manifest else None
    if not isinstance(files, dict) or "simulator._steprows" not in files:
        return None
    spec = importlib.util.spec_from_file_location(
        "simulator._steprows", build_dir() / str(files["simulator._steprows"]))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NATIVE = _native()
pytestmark = pytest.mark.skipif(
    NATIVE is None, reason="no compiled build for these sources: `make accel` (python -m "
                           "simulator.build_accel) builds the C expander these tests check")


@pytest.fixture()
def native(monkeypatch: pytest.MonkeyPatch) -> None:
    """The step log expands its spans with the C expander."""
    assert NATIVE is not None
    monkeypatch.setattr(steplog, "_expand_native", NATIVE.expand)


def _columns(log: StepLog) -> dict[str, list]:
    return {name: col.tolist() for name, col in zip(_COLUMNS, log._expand(), strict=True)}


def test_a_decode_run_by_hand(native: None) -> None:
    """Five steps from t = 1 of 2 rows each, the first with 3 sequences at 10 tokens of
    context, 100 KV blocks, openings 1, 0, 1, ... (a cycle of two), the last row logging
    (6 running, 0 waiting, 104 blocks)."""
    log = StepLog(0)
    log.add_decode_rows(1.0, [2.0, 3.0, 4.0, 5.0, 6.0],
                        StepShape(num_decode_seqs=3, decode_context_tokens=10), 2, 7, 1,
                        100, [1, 0], (6, 0, 104))
    got = _columns(log)
    assert got["start_s"] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert got["end_s"] == [2.0, 3.0, 4.0, 5.0, 6.0]
    assert got["num_decode_seqs"] == [3, 2, 2, 2, 2]
    assert got["decode_context_tokens"] == [10, 12, 14, 16, 18]
    assert got["num_decode_tokens"] == [2] * 5
    assert got["num_running"] == [7, 7, 7, 7, 6]
    assert got["queue_len"] == [1, 1, 1, 1, 0]
    assert got["kv_blocks_used"] == [100, 101, 101, 102, 104]
    assert got["num_prefill_tokens"] == [0] * 5


def test_random_spans_expand_as_numpy_does_bit_for_bit(native: None) -> None:
    rng = np.random.default_rng(11)
    log, t = StepLog(1), 0.1
    for _ in range(300):  # fewer rows than a pack: everything stays in spans
        kind = rng.integers(3)
        if kind == 0:  # one step, a prefill chunk beside decode rows
            end = t + float(rng.random())
            log.add(t, end, StepShape(num_prefill_tokens=int(rng.integers(1, 2048)),
                                      prefill_attn_work=float(rng.random()) * 1e6,
                                      num_decode_seqs=int(rng.integers(0, 64)),
                                      decode_context_tokens=int(rng.integers(0, 1 << 40))),
                    int(rng.integers(0, 64)), int(rng.integers(64)), int(rng.integers(9)),
                    int(rng.integers(1 << 20)))
            t = end
        elif kind == 1:  # a decode run, its openings shorter or longer than the run
            n = int(rng.integers(1, 40))
            ends = (t + np.cumsum(rng.random(n))).tolist()
            openings = rng.integers(0, 3, int(rng.integers(0, 20))).tolist()
            log.add_decode_rows(t, ends, StepShape(num_decode_seqs=int(rng.integers(1, 9)),
                                                   decode_context_tokens=int(rng.integers(99))),
                                int(rng.integers(1, 9)), int(rng.integers(99)),
                                int(rng.integers(9)), int(rng.integers(1000)), openings,
                                (int(rng.integers(99)), 0, int(rng.integers(1000))))
            t = ends[-1]
        else:  # a short run of arrays (logged as rows)
            k = int(rng.integers(1, 17))
            starts = t + np.arange(k) * 0.25
            d = rng.integers(0, 50, k)
            shapes = StepShapes(num_prefill_tokens=d * 2, prefill_attn_work=d * 0.5,
                                num_decode_seqs=d, decode_context_tokens=d * 7,
                                num_admitted=d * 0, num_finished=d * 0)
            log.extend(starts, starts + 0.25, shapes, d, d + 1, d + 2, d + 3)
            t = float(starts[-1]) + 0.25
    assert not log._pieces and len(log._ends) > 1000
    got, want = log._expand(), log._expand_numpy()
    for name, a, b in zip(_COLUMNS, got, want, strict=True):
        assert a.dtype == b.dtype, name
        assert a.tobytes() == b.tobytes(), name  # the same bits, not only close


def test_inconsistent_parts_are_refused() -> None:
    assert NATIVE is not None
    log = StepLog(0)
    log.add(0.0, 1.0, StepShape(num_decode_seqs=1), 1, 1, 0, 1)
    with pytest.raises(ValueError, match="1 rows and 0 openings; given 2 ends"):
        NATIVE.expand(b"".join(log._spans), [1.0, 2.0], [])
    with pytest.raises(ValueError, match="whole number of records"):
        NATIVE.expand(b"".join(log._spans)[:-8], [1.0], [])
