"""The package metadata points at files that exist."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_data_pattern_matches_a_file() -> None:
    """Issue 11: ``specs/*.json`` and ``servesim/scenarios/*.toml`` matched nothing."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = config["tool"]["setuptools"]["package-data"]
    assert data, "no package-data table"
    for package, patterns in data.items():
        for pattern in patterns:
            found = list((ROOT / package.replace(".", "/")).glob(pattern))
            assert found, f"package-data {package}: {pattern!r} matches no file"
