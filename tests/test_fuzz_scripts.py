"""The fuzz scripts (benchmarks/cli_fuzz.py, benchmarks/file_fuzz.py) on a few seeded runs:
each run ends in a result or one error line, never a crash (exit 0), and every run is
counted. The scripts' long runs are in the stop notes; these keep them from rotting and
put a sample of damaged files and overrides through every CI run."""

from __future__ import annotations

import re

import pytest

from benchmarks import cli_fuzz, file_fuzz


def _counted(out: str) -> int:
    """The runs the closing line counts (``N runs (seed S): outcome n, ...``)."""
    line = out.strip().splitlines()[-1]
    return sum(int(n) for n in re.findall(r" (\d+)(?:,|$)", line.split(": ", 1)[1]))


@pytest.mark.parametrize("kind", file_fuzz.KINDS)
def test_damaged_files_of_each_kind_end_cleanly(capsys, kind: str) -> None:  # type: ignore[no-untyped-def]
    assert file_fuzz.main(["--seed", "1", "--runs", "3", "--kind", kind]) == 0
    assert _counted(capsys.readouterr().out) == 3


def test_random_overrides_end_cleanly(capsys) -> None:  # type: ignore[no-untyped-def]
    assert cli_fuzz.main(["--seed", "1", "--runs", "4"]) == 0
    assert _counted(capsys.readouterr().out) == 4
