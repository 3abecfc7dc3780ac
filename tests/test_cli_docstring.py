"""The command line's module docstring names every command it has."""

from __future__ import annotations

import argparse

import servesim.cli as cli


def test_cli_docstring_names_every_command() -> None:
    """Issue 11: the docstring named 4 of the 9 commands (10 since `stacks`)."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    names = set(sub.choices)
    assert len(names) == 10, sorted(names)
    doc = cli.__doc__ or ""
    missing = sorted(n for n in names if f"``{n}``" not in doc)
    assert not missing, f"cli.py docstring does not name {missing}"
