"""Instructions per simulated request (valgrind callgrind): a speed figure noise cannot blur.

    python benchmarks/instructions.py [--case peer|chat|chunked|long|plan|cluster|fleet]
                                      [--requests N] [--warm 200] [--step-log MODE]
                                      [--functions N]

CPU time on a shared 2-vCPU machine varies up to 2x between identical runs, so issue 13's
per-change figures are instruction counts: deterministic for one Python build and
workload. The cases:

- ``peer`` (default, 1,500 requests): the peer simulator's workload
  (``benchmarks/peer_speed.py``: Vidur's standard one on CodeLlama-34B TP2, A100);
- ``chat`` / ``chunked`` (5,000): ``benchmarks/sim_speed.py``'s chat traffic at 14 req/s,
  continuous batching or chunked prefill;
- ``long`` (300): ``sim_speed.py --long-prompts --policy chunked --rate 1.6`` (~8k-token
  prompts, a 2,048-token chunked budget);
- ``plan`` (3,000): a chunked point of ``servesim plan scenarios/capacity.toml --rate 40``
  (:func:`plan_point`: Llama-3.1-8B on three H100s behind ``least_outstanding``, chunked
  prefill with a 2,048-token budget, 40 req/s, a summary step log);
- ``cluster`` (3,000): that plan's costliest point, the A100 continuous candidate checked as
  a 173-replica cluster (:func:`cluster_point`), nearly every replica idle;
- ``fleet`` (10,000): the shape of ``sim_memory.py --case fleet`` (:func:`fleet_point`:
  Llama-3.1-8B on 16 busy H100 replicas behind ``least_outstanding`` at the fleet-hour's
  277.8 req/s, a summary step log; ``sim_speed``'s request lengths).

Two processes run under ``valgrind --tool=callgrind`` with ``PYTHONHASHSEED=0`` and
``OPENBLAS_NUM_THREADS=1`` (idle BLAS threads spin for a time that varies): one
simulates ``--warm`` requests (imports, first-call costs), the other the same and then
``--requests`` more; the printed figure is (Ir(second) - Ir(first)) / requests. Needs
valgrind (``apt-get install valgrind``); a case takes a few minutes. Compare trees by
running it from each (the figure moves with the interpreter and numpy build, so compare
on one machine).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_REQUESTS = {"peer": 1500, "chat": 5000, "chunked": 5000, "long": 300, "plan": 3000,
                    "cluster": 3000, "fleet": 10000}
FLEET_RATE = 1_000_000 / 3600.0  # sim_memory.py's fleet: a million requests in an hour
PEER_CHILD = """
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
SIM_SPEED_CHILD = """
import sys
sys.path.insert(0, {bench!r})
from instructions import case_point
from sim_speed import request_table
from simulator.cluster import simulate
point = case_point({case!r}, {warm} + {n})
if {step_log!r}:
    point["run"] = {{**point.get("run", {{}}), "step_log": {step_log!r}}}
dep, table = request_table(point)
spec = dep.cluster()
simulate(table.head({warm}), spec, horizon_s=dep.horizon_s)
if {n}:
    simulate(table.head({n}), spec, horizon_s=dep.horizon_s)
"""


def plan_point(requests: int) -> dict[str, Any]:
    """A chunked point of the capacity plan (scenarios/capacity.toml's chunked candidate on
    H100, sized as its cluster check: three replicas at 40 req/s)."""
    return {
        "model": {"name": "llama-3.1-8b", "weight_dtype": "bf16"},
        "hardware": {"gpu": "h100-sxm", "tp": 1},
        "policy": {"name": "chunked", "max_num_seqs": 256, "max_num_batched_tokens": 2048},
        "workload": {"arrival": "poisson", "rate": 40.0, "num_requests": requests,
                     "prompt": {"dist": "lognormal", "mean": 1100, "sigma": 1.0},
                     "output": {"dist": "lognormal", "mean": 265, "sigma": 0.9}},
        "cluster": {"replicas": 3, "router": "least_outstanding"},
        "run": {"step_log": "summary"},
    }


def cluster_point(requests: int) -> dict[str, Any]:
    """The plan's costliest point: scenarios/capacity.toml's A100 continuous candidate
    checked as a cluster of 173 nearly idle replicas at 40 req/s (the sizer's answer for a
    GPU that barely meets the P99 TTFT target; ``benchmarks/plan_schedule.py``)."""
    point = plan_point(requests)
    point["hardware"]["gpu"] = "a100-80gb"
    point["policy"] = {"name": "continuous", "max_num_seqs": 256,
                       "max_num_batched_tokens": 65536}
    point["cluster"]["replicas"] = 173
    return point


def fleet_point(requests: int) -> dict[str, Any]:
    """The shape of ``sim_memory.py --case fleet --step-log summary`` at ``requests``: 16
    replicas behind ``least_outstanding`` at the fleet-hour's rate, ``sim_speed``'s point."""
    from sim_speed import point  # the benchmarks folder is on the path (the child puts it)
    return {**point(requests, FLEET_RATE, "continuous", False),
            "cluster": {"replicas": 16, "router": "least_outstanding"},
            "run": {"step_log": "summary"}}


def case_point(case: str, requests: int) -> dict[str, Any]:
    """The scenario of a ``sim_speed``-shaped case (every case but ``peer``)."""
    from sim_speed import point  # the benchmarks folder is on the path (the child puts it)
    if case == "plan":
        return plan_point(requests)
    if case == "cluster":
        return cluster_point(requests)
    if case == "fleet":
        return fleet_point(requests)
    if case == "long":
        return point(requests, 1.6, "chunked", True)
    return point(requests, 14.0, "chunked" if case == "chunked" else "continuous", False)


def instructions(case: str, n: int, warm: int, peer: Path, step_log: str = "",
                 out_file: str = "/dev/null") -> int:
    """Instructions valgrind counts for a process that simulates ``warm`` then ``n``
    (``step_log``: the case's ``[run] step_log`` instead of its own; not for ``peer``;
    ``out_file``: where callgrind writes its profile)."""
    template = PEER_CHILD if case == "peer" else SIM_SPEED_CHILD
    code = template.format(bench=str(HERE), peer=str(peer), warm=warm, n=n, case=case,
                           step_log=step_log)
    # one BLAS thread: OpenBLAS's idle workers spin for a time that depends on scheduling,
    # and valgrind counts their instructions (two runs of one build differed by up to 10%;
    # with one thread they agree to 0.1k)
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(HERE.parent),
           "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
                          sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", choices=list(DEFAULT_REQUESTS), default="peer")
    ap.add_argument("--requests", type=int, default=None,
                    help="requests measured (default: 1,500 peer, 5,000 chat/chunked, "
                         "300 long, 3,000 plan and cluster, 10,000 fleet)")
    ap.add_argument("--warm", type=int, default=200)
    ap.add_argument("--peer-dir", type=Path, default=HERE.parents[1] / "shared" / "peers")
    ap.add_argument("--functions", type=int, default=0, metavar="N",
                    help="also print the N compiled functions costing most per request "
                         "(inclusive; needs callgrind_annotate and the compiled core)")
    ap.add_argument("--step-log", choices=("full", "summary", "none"), default="",
                    help="[run] step_log for a sim_speed-shaped case (default: the case's own; "
                         "full but for plan, cluster and fleet)")
    args = ap.parse_args()
    if args.step_log and args.case == "peer":
        raise SystemExit("--step-log: not for --case peer (peer_speed.py's own scenario)")
    n = DEFAULT_REQUESTS[args.case] if args.requests is None else args.requests
    if shutil.which("valgrind") is None:
        print("skipped: valgrind is not installed (apt-get install valgrind)")
        return
    if args.case == "peer" and not (args.peer_dir / "vidur_workload.py").exists():
        print(f"skipped: {args.peer_dir / 'vidur_workload.py'} is absent (the peer's workload)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        files = [f"{tmp}/base.cg", f"{tmp}/full.cg"] if args.functions else ["/dev/null"] * 2
        base = instructions(args.case, 0, args.warm, args.peer_dir, args.step_log, files[0])
        full = instructions(args.case, n, args.warm, args.peer_dir, args.step_log, files[1])
        mode = f", step log {args.step_log}" if args.step_log else ""
        print(f"{args.case}{mode}, {n:,} requests after {args.warm} warm-up: "
              f"{(full - base) / n / 1000:,.1f}k instructions per simulated request "
              f"(valgrind callgrind, PYTHONHASHSEED=0, {sys.executable}, "
              f"SERVESIM_ACCEL={os.environ.get('SERVESIM_ACCEL', '1')})")
        if args.functions:
            print(f"the compiled core's functions, inclusive, per request (top {args.functions}):")
            for per_request, name in by_function(files[0], files[1], n)[:args.functions]:
                print(f"  {per_request / 1000:8.1f}k  {name}")


def inclusive(profile: str) -> dict[str, int]:
    """Inclusive instructions per compiled function (mypyc's ``CPyDef_module___name``) of
    one callgrind profile, by ``callgrind_annotate``."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", profile],
                         capture_output=True, text=True, check=True).stdout
    totals: dict[str, int] = {}
    for line in out.splitlines():
        found = re.match(r"\s*([\d,]+) \([^)]*\)\s+\S*:CPyDef_(\S+)", line)
        if found:
            name = found.group(2).replace("___", ".")
            totals[name] = totals.get(name, 0) + int(found.group(1).replace(",", ""))
    return totals


def by_function(base: str, full: str, n: int) -> list[tuple[float, str]]:
    """(instructions per request, function) of the compiled core, largest first: the
    second profile's inclusive counts less the first's, over the ``n`` requests between."""
    a, b = inclusive(base), inclusive(full)
    return sorted(((b[k] - a.get(k, 0)) / n, k) for k in b if b[k] > a.get(k, 0))[::-1]


if __name__ == "__main__":
    main()
