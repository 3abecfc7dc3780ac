"""``python -m simulator.build_accel [--status] [--allow-fail]``: compile the hot loop.

Builds the mypyc extension modules of :mod:`simulator.accel` for the current sources
(about a minute on two cores; needs mypy and a C compiler), or with ``--status`` says
whether this process would run them. ``--allow-fail`` exits 0 when the build fails (the
Makefile's ``accel`` target: a machine that cannot compile still runs, as pure Python).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from simulator.accel import ENV_SWITCH, active, build, build_dir, read_manifest, source_key


def main(argv: Sequence[str] | None = None) -> int:
    """Build (or report); 0 on success, 1 when the build failed without ``--allow-fail``."""
    ap = argparse.ArgumentParser(prog="python -m simulator.build_accel",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--status", action="store_true", help="report only, build nothing")
    ap.add_argument("--allow-fail", action="store_true",
                    help="exit 0 when compiling fails (pure Python still runs)")
    args = ap.parse_args(argv)
    if args.status:
        directory = build_dir()
        built = read_manifest(directory) is not None
        where = f"a build at {directory}" if built else "no build (pure Python)"
        print(f"sources {source_key()}: {where}; {ENV_SWITCH}="
              f"{os.environ.get(ENV_SWITCH, '1')}; this process: "
              f"{'compiled' if active() else 'pure Python'}")
        return 0
    try:
        target = build()
    except (RuntimeError, OSError) as exc:  # no compiler or mypy: pure Python still works
        print(f"servesim: the compiled core was not built; the simulator runs as Python "
              f"({exc})", file=sys.stderr)
        return 0 if args.allow_fail else 1
    print(f"servesim: compiled core for sources {target.name} at {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
