"""Random `--set` overrides on the shipped scenarios: every run must end in a result or in
one clear error line (exit 2), never a traceback or a hang.

    python benchmarks/cli_fuzz.py --seed 1 --runs 300
    python benchmarks/cli_fuzz.py --seed 2 --runs 300 --valid 0.3 --show-errors

Each run takes a shipped scenario (not the ones that serve on the engine), sets one to
three of its fields (or of any section's fields) to a plausible value (most of the time:
a number scaled by 1/4-4, a flipped boolean, another of the field's choices) or to an
edge (0, -1, 1e9, "inf", "nan", a string where a number goes, an empty list), caps the
traffic at 120 requests, and runs ``servesim run --json`` in this process. It prints one
line per run that crashed (an exception escaped ``servesim``) or timed out, then the
counts. ``--show-errors`` also prints each distinct error message kind, for reading them
as a user would.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.fuzz_run import TIMEOUT_S, error_kind, report, run_cli  # noqa: E402
from simulator.scenario import SECTIONS  # noqa: E402
from simulator.scenario_types import schema_rules  # noqa: E402
from simulator.specs.dtypes import KV_DTYPE_BYTES, WEIGHT_DTYPE_BYTES  # noqa: E402
from simulator.specs.hardware import HARDWARE  # noqa: E402

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
ENGINE_SCENARIOS = {"validate-cpu.toml", "validate-h200.toml", "speculative-cpu.toml"}
EDGES = ["0", "-1", "1", "0.5", "1e9", "1e-9", "3", "64", '"inf"', '"nan"', '"x"', "true",
         "[]", "2.5", '""']


def choices() -> dict[str, tuple[str, ...]]:
    """The strings each field takes, by ``section.field``: the schema's own choices, and
    the catalogues' GPUs and dtypes (checked against them, not by the schema)."""
    out = {key: rule.choices for key, rule in schema_rules().items() if rule.choices}
    out["hardware.gpu"] = tuple(HARDWARE)
    out["model.weight_dtype"] = tuple(WEIGHT_DTYPE_BYTES)
    out["model.kv_dtype"] = tuple(KV_DTYPE_BYTES)
    return out


def _fields(raw: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(section, key, value) of the scenario's scalar fields, then every section's known
    fields with no value."""
    out = [(sec, key, value) for sec, table in raw.items() if isinstance(table, dict)
           for key, value in table.items() if not isinstance(value, dict | list)]
    return out + [(sec, name, None) for sec, names in SECTIONS.items() for name in names]


def _value(rng: random.Random, key: str, value: Any, allowed: dict[str, tuple[str, ...]],
           valid: float) -> str | None:
    """A TOML value for the field ``key`` (``section.field``): plausible with probability
    ``valid`` (another of its ``allowed`` strings, a number scaled by 1/4-4, a flipped
    boolean), else an edge; None to leave a field the scenario does not set alone."""
    plausible = rng.random() < valid
    if key in allowed and plausible:
        return f'"{rng.choice(allowed[key])}"'
    if isinstance(value, bool):
        return rng.choice(["true", "false"])
    if isinstance(value, int) and plausible:
        return str(max(1, int(value * rng.choice([0.25, 0.5, 2, 4]))))
    if isinstance(value, float) and plausible:
        return repr(value * rng.choice([0.25, 0.5, 2, 4]))
    if value is None and plausible:
        return None
    return rng.choice(EDGES)


def fuzz(seed: int, runs: int, valid: float, out: Path) -> tuple[Counter[str], list[str],
                                                                  Counter[str]]:
    """Run ``runs`` fuzzed scenarios; (outcome counts, crash and timeout lines, error kinds)."""
    rng = random.Random(seed)
    scenarios = [p for p in sorted(SCENARIOS.glob("*.toml")) if p.name not in ENGINE_SCENARIOS]
    outcomes: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    bad: list[str] = []
    allowed = choices()
    for i in range(runs):
        path = rng.choice(scenarios)
        fields = _fields(tomllib.loads(path.read_text()))
        sets = []
        for _ in range(rng.randint(1, 3)):
            sec, key, value = rng.choice(fields)
            text = _value(rng, f"{sec}.{key}", value, allowed, valid)
            if text is not None:
                sets.append(f"{sec}.{key}={text}")
        argv = ["run", str(path), "--json", "--out", str(out), "--overwrite", "--workers", "1",
                "--no-cache", "--set", "workload.num_requests=120"]
        for s in sets:  # after the cap: a fuzzed num_requests wins
            argv += ["--set", s]
        outcome, said = run_cli(argv, TIMEOUT_S)
        outcomes[outcome] += 1
        if outcome in ("crash", "timeout"):
            bad.append(f"run {i}: {outcome}: {path.name} {sets}"
                       + (f"\n{said}" if outcome == "crash" else f" after {TIMEOUT_S} s"))
        elif outcome != "exit 0":
            errors[error_kind(said)] += 1
    return outcomes, bad, errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--valid", type=float, default=0.85,
                    help="share of overrides drawn plausible (the rest are edges)")
    ap.add_argument("--show-errors", action="store_true",
                    help="print each distinct error message kind and its count")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="servesim-fuzz-") as tmp:
        outcomes, bad, errors = fuzz(args.seed, args.runs, args.valid, Path(tmp) / "out")
    return report(args.runs, args.seed, outcomes, bad, errors, args.show_errors)


if __name__ == "__main__":
    sys.exit(main())
