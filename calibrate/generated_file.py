"""A data file a calibrate command generates: written, or with ``--check`` compared.

The fitted files the simulator ships next to its code (simulator/costs/collectives.json,
simulator/costs/prior_efficiency.json) are the output of a command on the shipped inputs;
``--check`` says whether the shipped file is what the command would write now.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_or_check(path: Path, doc: Any, check: bool, command: str, indent: int = 2) -> int:
    """Write ``doc`` as JSON to ``path`` (0), or with ``check`` only compare: 0 when the
    file already holds it, else 1 after saying which ``command`` rewrites it."""
    text = json.dumps(doc, indent=indent) + "\n"
    if check:
        stale = not path.is_file() or path.read_text() != text
        print(f"{path} is stale: run python -m {command}" if stale else "up to date")
        return 1 if stale else 0
    path.write_text(text)
    print(f"wrote {path}")
    return 0
