"""Every scenario field, fed wrong-typed and out-of-range values through the CLI (issue 11).

The fields come from the typed schema itself (``schema_rules``), so a field added there is
fuzzed here without a change. Each bad value must end ``servesim run`` with exit status 2
and a ``servesim: error:`` line naming the field: never a traceback, never taken as given.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from servesim.cli import main
from simulator.scenario_fields import FieldRule
from simulator.scenario_types import schema_rules

TINY = """
name = "tiny"
seed = 1
[model]
name = "llama-3.1-8b"
[hardware]
gpu = "h100-sxm"
[policy]
name = "continuous"
[workload]
arrival = "poisson"
rate = 5.0
num_requests = 20
prompt = { dist = "fixed", tokens = 64 }
output = { dist = "fixed", tokens = 8 }
[cost]
form = "roofline"
"""
RULES = schema_rules()
TOP_LEVEL = [name for name in RULES if "." not in name]


def literal(value: Any) -> str:
    """``value`` as a TOML literal (what a user would type after ``--set key=``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)  # repr: inf, -inf as TOML
    if isinstance(value, int):
        return str(value)
    return "{" + ", ".join(f"{k} = {literal(v)}" for k, v in value.items()) + "}"


def wrong_values(rule: FieldRule, rng: random.Random) -> list[Any]:
    """Values of another type than the field's, out of its range, and two random ones."""
    word = "".join(rng.choice("abcxyz0123456789") for _ in range(rng.randint(1, 8)))
    table = {"a": 1}
    if rule.kind == "bool":
        return ["false", "no", 0, 1, 1.0, table, word, rng.randint(2, 999)]
    if rule.kind == "str":
        out = [5, 5.5, True, table, rng.randint(-999, 999), rng.random()]
        return out + (["no-such-choice"] if rule.choices else [])
    numeric = [f"{rng.randint(1, 99)}", True, False, table, word]
    if rule.kind == "int":
        out = numeric + [8.7, 8.0, rng.randint(1, 999) + rng.choice([0.25, 0.5, 0.0]), 1e6]
        low = 1 if rule.low is None else rule.low  # unstated: every count here is >= 1
        return out + [int(low) - 1, int(low) - rng.randint(2, 999)]
    out = numeric + [math.nan, -math.inf] + ([] if rule.allow_inf else [math.inf])
    if rule.low is None or not rule.low_open:
        low = 0 if rule.low is None else rule.low  # unstated: every number here is >= 0
        out += [low - 1, low - rng.uniform(1, 1e6)]
    else:
        out += [rule.low, rule.low - rng.uniform(1, 1e6)]
    return out + ([rule.high + 1, rule.high * 10 + 1] if rule.high is not None else [])


def _cases() -> list[tuple[str, Any]]:
    rng = random.Random(11)
    return [(name, value) for name, rule in RULES.items() for value in wrong_values(rule, rng)]


CASES = _cases()


def _run(tmp_path: Path, field: str, value: Any, capsys: pytest.CaptureFixture[str]
         ) -> tuple[int, str]:
    text = TINY
    args = []
    if field in TOP_LEVEL:
        lines = [line for line in TINY.splitlines() if not line.startswith(f"{field} =")]
        text = f"{field} = {literal(value)}\n" + "\n".join(lines)
    else:
        args = ["--set", f"{field}={literal(value)}"]
    path = tmp_path / "s.toml"
    path.write_text(text)
    code = main(["run", str(path), "--out", str(tmp_path / "out"), "--workers", "1", *args])
    return code, capsys.readouterr().err


def test_the_schema_covers_every_section() -> None:
    sections = {name.split(".")[0] for name in RULES if "." in name}
    assert sections == {"model", "hardware", "stack", "kv", "policy", "workload", "slo",
                        "cluster", "run", "admission", "autoscale", "speculative",
                        "disaggregated"}
    assert {"seed", "name", "description"} <= set(TOP_LEVEL)
    assert len(CASES) > 400


@pytest.mark.parametrize(("field", "value"), CASES, ids=[f"{f}={v!r}" for f, v in CASES])
def test_a_wrong_value_exits_2_naming_the_field(tmp_path: Path, capsys, field: str,  # type: ignore[no-untyped-def]
                                                value: Any) -> None:
    code, err = _run(tmp_path, field, value, capsys)
    assert code == 2, f"{field} = {value!r} was taken (exit {code}): {err}"
    assert err.startswith("servesim: error:"), err
    assert field in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.parametrize(("field", "value"), [
    ("cost.time_scale", "0.8"), ("cost.time_scale", True), ("cost.time_scale", 0),
    ("cost.jitter_cv", "0.1"), ("cost.jitter_cv", 1.5), ("cost.jitter_cv", False),
    ("cost.force", "true"), ("cost.form", 5), ("cost.form", "linearish"),
    ("cost.memory_efficiency", "0.7"), ("cost.memory_efficiency", True),
])
def test_a_wrong_cost_value_exits_2_naming_it(tmp_path: Path, capsys, field: str,  # type: ignore[no-untyped-def]
                                              value: Any) -> None:
    code, err = _run(tmp_path, field, value, capsys)
    assert code == 2 and field in err and "Traceback" not in err, err


def test_the_tiny_scenario_itself_runs(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "s.toml").write_text(TINY)
    assert main(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)[0]
    assert summary["completed"] == 20
