"""How well the shipped composed profiles fit their compositions, per kernel-table folder.

    python benchmarks/profile_fit_quality.py              # the working tree's files
    python benchmarks/profile_fit_quality.py --rev 06fe234   # the files at a commit

Every profile composed from AIConfigurator's tables (its provenance source starts with
``calibrate.aiconfigurator.SOURCE_PREFIX``) records its fit's held-out MAPE, overall and by
phase (``fit.by_phase``). Per folder (the generic TensorRT-LLM profiles, then each stack's),
this prints the number of files, the median MAPE, the median decode-phase MAPE and the worst
file. Cost profiles only: the same on any machine. ``--rev`` reads the files a commit shipped
(``git show``), so two runs compare a regeneration before and after.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere

from calibrate.aiconfigurator import SOURCE_PREFIX  # noqa: E402

PROFILES = "simulator/profiles"


def profiles(rev: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path under PROFILES, parsed JSON) of every profile file, in the tree or at ``rev``."""
    if rev is None:
        for path in sorted((ROOT / PROFILES).rglob("*.json")):
            yield str(path.relative_to(ROOT / PROFILES)), json.loads(path.read_text())
        return
    names = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", rev,
                            PROFILES], check=True, capture_output=True, text=True).stdout
    for name in sorted(n for n in names.split() if n.endswith(".json")):
        yield name[len(PROFILES) + 1:], profile_at(name[len(PROFILES) + 1:], rev)


def profile_at(name: str, rev: str) -> dict[str, Any]:
    """The parsed JSON of the profile file ``name`` (a path under PROFILES) at ``rev``."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{PROFILES}/{name}"],
                          check=True, capture_output=True, text=True).stdout
    return dict(json.loads(text))


def quality(rev: str | None) -> dict[str, list[tuple[str, float, float]]]:
    """Folder -> (file, held-out MAPE, decode MAPE) of its composed profiles."""
    out: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    for name, p in profiles(rev):
        if not str(p.get("provenance", {}).get("source", "")).startswith(SOURCE_PREFIX):
            continue
        folder = name.rsplit("/", 1)[0] if "/" in name else "(generic)"
        fit = p["fit"]
        decode = fit.get("by_phase", {}).get("decode", {}).get("mape", float("nan"))
        out[folder].append((name.rsplit("/", 1)[-1], float(fit["mape"]), float(decode)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", default=None, help="read the files at this commit")
    args = ap.parse_args(argv)
    print(f"{'folder':<16} {'files':>5} {'median MAPE':>12} {'decode':>8}  worst")
    for folder, rows in sorted(quality(args.rev).items()):
        worst = max(rows, key=lambda r: r[1])
        print(f"{folder:<16} {len(rows):5d} {statistics.median(r[1] for r in rows):12.2%} "
              f"{statistics.median(r[2] for r in rows):8.2%}  {worst[0]} {worst[1]:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
