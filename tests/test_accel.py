"""The compiled core (simulator/accel.py): used only for the sources it was built from, and
giving the Python core's answers bit for bit on every shipped scenario."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.accel import (
    C_MODULES,
    COMPILED,
    MANIFEST,
    _publish,
    _remove_others,
    build_dir,
    package_dir,
    read_manifest,
    source_key,
)

ROOT = Path(__file__).resolve().parents[1]
BUILT = read_manifest(build_dir()) is not None
needs_build = pytest.mark.skipif(
    not BUILT, reason="no compiled build for these sources: `make accel` (python -m "
                      "simulator.build_accel) builds one, then this test compares it")


def _python(code: str, **env: str) -> str:
    """``code``'s stdout in a fresh interpreter at the repository root with ``env`` added."""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True, env={**os.environ, **env})
    return proc.stdout.strip()


PROBE = ("import simulator.replica as r, simulator.accel as a; "
         "print(a.active(), r.__file__.endswith('.py'))")


def test_source_key_follows_every_source_file(tmp_path: Path) -> None:
    copy = tmp_path / "simulator"
    shutil.copytree(package_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    key = source_key(copy)
    assert key == source_key(package_dir())  # the path is not part of it, the bytes are
    report = copy / "report.py"  # not a compiled module: its types still reach them
    text = report.read_text()
    report.write_text(text + "# an edit\n")
    assert source_key(copy) != key
    report.write_text(text)
    assert source_key(copy) == key
    expander = copy / "_steprows.c"  # a C module is compiled too
    text = expander.read_text()
    expander.write_text(text + "/* an edit */\n")
    assert source_key(copy) != key
    expander.write_text(text)
    (copy / "profiles" / "extra.json").write_text("{}")  # data is not compiled
    assert source_key(copy) == key


def test_without_a_build_the_simulator_is_python(tmp_path: Path) -> None:
    assert _python(PROBE, SERVESIM_ACCEL="1", SERVESIM_ACCEL_DIR=str(tmp_path)) == "False True"


def test_a_build_cut_short_is_not_used(tmp_path: Path) -> None:
    """A build directory for these sources without its manifest (written last) is ignored."""
    unfinished = tmp_path / source_key()
    unfinished.mkdir()
    (unfinished / "simulator.replica.so").write_bytes(b"not a library")
    assert _python(PROBE, SERVESIM_ACCEL="1", SERVESIM_ACCEL_DIR=str(tmp_path)) == "False True"


@needs_build
def test_the_build_is_used_and_can_be_switched_off() -> None:
    manifest = read_manifest(build_dir())
    assert manifest is not None
    assert {*COMPILED, *C_MODULES} <= set(manifest["files"])  # type: ignore[operator]
    assert _python(PROBE, SERVESIM_ACCEL="1") == "True False"
    assert _python(PROBE, SERVESIM_ACCEL="0") == "False True"


@needs_build
def test_compiled_core_gives_the_python_answers_on_every_shipped_scenario() -> None:
    """Every point of every shipped scenario: the same summary (less wall time) and the same
    request records and step log (hashed), compiled and as Python."""
    scenarios = sorted(str(p) for p in (ROOT / "scenarios").glob("*.toml"))
    runs = {}
    for flag in ("1", "0"):
        out = _python(f"import runpy, sys; sys.argv = ['accel_runs', *{scenarios!r}]; "
                      "runpy.run_path('tests/accel_runs.py', run_name='__main__')",
                      SERVESIM_ACCEL=flag)
        runs[flag] = json.loads(out.splitlines()[-1])
    assert runs["1"]["compiled"] is True and runs["0"]["compiled"] is False
    assert len(runs["0"]["runs"]) == len(scenarios) >= 19
    for name, points in runs["0"]["runs"].items():
        assert runs["1"]["runs"][name] == points, f"{name}: compiled and Python differ"


def test_a_build_finished_first_elsewhere_is_kept(tmp_path: Path) -> None:
    """Two builds of the same sources at once: the second to finish finds the first's in
    place, keeps it and leaves no scratch; a directory there without a manifest (no
    build) is replaced."""
    target = tmp_path / "key"
    target.mkdir()
    (target / MANIFEST).write_text('{"key": "key", "files": {}}')
    staging = tmp_path / ".key-1"
    staging.mkdir()
    (staging / "mine.so").write_bytes(b"x")
    _publish(staging, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key"]
    assert sorted(p.name for p in target.iterdir()) == [MANIFEST]
    (target / MANIFEST).unlink()  # now a directory by that name, not a build
    (target / "junk.so").write_bytes(b"x")
    staging.mkdir()
    (staging / "mine.so").write_bytes(b"x")
    (staging / MANIFEST).write_text('{"key": "key", "files": {}}')
    _publish(staging, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key"]
    assert sorted(p.name for p in target.iterdir()) == [MANIFEST, "mine.so"]


def test_a_build_keeps_the_three_newest_of_other_sources(tmp_path: Path) -> None:
    """Another checkout's running process may still import from its build: the three most
    recent stay, older ones and a build cut short (its scratch, ``.``-named) go."""
    for age, name in enumerate(["a", "b", "c", "d", "e", ".scratch", "mine"]):
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (1000 - age, 1000 - age))  # "a" is the newest
    _remove_others(tmp_path, keep="mine")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c", "mine"]
