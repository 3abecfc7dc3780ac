"""Instructions per simulated request (valgrind callgrind): a speed figure noise cannot blur.

    python benchmarks/instructions.py [--requests 1500] [--warm 200]

CPU time on a shared 2-vCPU machine varies up to 2x between identical runs, so issue 13's
per-change figures are instruction counts: deterministic for one Python build and
workload. The workload is the peer simulator's (``benchmarks/peer_speed.py``: Vidur's
standard one on CodeLlama-34B TP2, A100). Two processes run under ``valgrind
--tool=callgrind`` with ``PYTHONHASHSEED=0``: one simulates ``--warm`` requests (imports,
first-call costs), the other the same and then ``--requests`` more; the printed figure is
(Ir(second) - Ir(first)) / requests. Needs valgrind (``apt-get install valgrind``); a
1,500-request count takes a few minutes. Compare trees by running it from each (the
figure moves with the interpreter and numpy build, so compare on one machine).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = """
import sys
sys.path.insert(0, {bench!r})
from peer_speed import DEPLOYMENT, load_peer_workload, peer_table
from pathlib import Path
from simulator.cluster import simulate
from simulator.deployment import resolve
dep = resolve(DEPLOYMENT)
workload = load_peer_workload(Path({peer!r}))
simulate(peer_table(workload, {warm}), dep.cluster())
if {n}:
    simulate(peer_table(workload, {n}), dep.cluster())
"""


def instructions(n: int, warm: int, peer: Path) -> int:
    """Instructions valgrind counts for a process that simulates ``warm`` then ``n``."""
    code = CHILD.format(bench=str(HERE), peer=str(peer), warm=warm, n=n)
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(HERE.parent)}
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--warm", type=int, default=200)
    ap.add_argument("--peer-dir", type=Path, default=HERE.parents[1] / "shared" / "peers")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("skipped: valgrind is not installed (apt-get install valgrind)")
        return
    if not (args.peer_dir / "vidur_workload.py").exists():
        print(f"skipped: {args.peer_dir / 'vidur_workload.py'} is absent (the peer's workload)")
        return
    base = instructions(0, args.warm, args.peer_dir)
    full = instructions(args.requests, args.warm, args.peer_dir)
    print(f"peer workload, {args.requests:,} requests after {args.warm} warm-up: "
          f"{(full - base) / args.requests / 1000:,.1f}k instructions per simulated request "
          f"(valgrind callgrind, PYTHONHASHSEED=0, {sys.executable})")


if __name__ == "__main__":
    main()
