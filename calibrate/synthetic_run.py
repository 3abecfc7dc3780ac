"""A run folder written from a simulation, as the engine writes one: a known answer to fit.

``servesim calibrate --from-run`` is checked by fitting runs whose host costs we chose: a
scenario point simulated with ``[cost] overhead`` (and a ``time_scale``, and step jitter)
is written as ``summary.json``, ``requests.parquet`` and ``tokens.parquet`` exactly like
``servesim run --backend engine``. Per-token times come from the step log: a request's
first token at its ``first_token_s``, then one at the end of every later step with decode
rows up to its ``finish_s``. That holds on one replica when every running request decodes
in every such step (continuous batching without preemption, static and dynamic batches);
:func:`token_times` checks the count against ``output_tokens`` and refuses otherwise.

    python -m calibrate.synthetic_run   # prints the recovery figures of docs/calibration.md
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.atomic import atomic_write
from simulator.records import token_table
from simulator.results_manifest import ENGINE
from simulator.runner import PointResult, run_point, write_results


def token_times(requests: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """request_id, token_index, time_s for every finished request (module docstring)."""
    if steps["replica"].nunique() > 1:
        raise ValueError("per-token times from a step log need a single replica")
    ends = np.sort(steps.loc[steps["num_decode_seqs"] > 0, "end_s"].to_numpy(np.float64))
    times: dict[int, list[float]] = {}
    for r in requests[requests["status"] == "finished"].itertuples():
        lo, hi = np.searchsorted(ends, [r.first_token_s, r.finish_s], side="right")
        later = ends[lo:hi].tolist()
        if len(later) != r.output_tokens - 1 or r.preemptions:
            raise ValueError(f"request {r.request_id}: {len(later) + 1} decode ends for "
                             f"{r.output_tokens} tokens; per-token times are not recoverable")
        times[int(r.request_id)] = [float(r.first_token_s), *later]
    return token_table(times)


def write_run(points: list[tuple[dict[str, Any], dict[str, Any]]], out: str | Path
              ) -> list[PointResult]:
    """Simulate each point and write it as an engine run folder (three files; its manifest
    says engine, as it stands in for one, and names no machine)."""
    results = [run_point(labels, point) for labels, point in points]
    write_results(results, out, kind=ENGINE)
    tokens = pd.concat([token_times(r.result.requests, r.result.steps).assign(point=i)
                        for i, r in enumerate(results)], ignore_index=True)
    atomic_write(Path(out) / "tokens.parquet", lambda p: tokens.to_parquet(p))
    return results


def main() -> None:
    """Fit synthetic runs (continuous at 3 and 6 req/s) for four workload seeds; print what
    was recovered and how it predicts continuous at 9 req/s and dynamic at 6 req/s."""
    import tempfile

    from calibrate.from_run import errors, fit, leave_one_out, replay
    from calibrate.from_run_setup import match_points, targets
    from calibrate.run_records import read_runs
    from simulator.scenario import apply_overrides, expand_sweep, load_scenario

    injected = ["cost.profile='cpu__tiny__fp32__tp1.json'", "cost.time_scale=1.1",
                "cost.jitter_cv=0.05",
                "cost.overhead={request_s=0.005, token_s=0.0004, step_s=0.001}"]
    print("injected: time_scale 1.1, step 1 ms, admit 0, token 0.4 ms, request 5 ms")
    for seed in (11, 1, 2, 3):
        base = {**load_scenario("scenarios/validate-cpu.toml"), "seed": seed}

        def points(*sets: str, base: dict[str, Any] = base) -> list[tuple[dict[str, Any],
                                                                           dict[str, Any]]]:
            return expand_sweep(apply_overrides(base, list(sets)))

        with tempfile.TemporaryDirectory() as tmp:
            folders = {}
            for name, sets in (("fit", ("policy.name='continuous'", "workload.rate=[3.0, 6.0]")),
                               ("c9", ("policy.name='continuous'", "workload.rate=9.0")),
                               ("d6", ("policy.name='dynamic'", "workload.rate=6.0"))):
                write_run(points(*sets, *injected), Path(tmp) / name)
                folders[name] = (read_runs(Path(tmp) / name), points(*sets))
            runs, pts = folders["fit"]
            tg, start, _, _ = targets(match_points([runs], pts, ["fit"]), None)
            result = fit(tg, start=start)
            loo = leave_one_out(tg, start=start)
            c, h = result.calibration, result.calibration.overhead
            print(f"seed {seed}: time_scale {c.time_scale:.3f}, step {h.step_s * 1e3:.2f} ms, "
                  f"admit {h.admit_s * 1e3:.2f} ms, token {h.token_s * 1e3:.3f} ms, request "
                  f"{h.request_s * 1e3:.2f} ms; fit {result.wall_s:.1f} s "
                  f"({result.evaluations} replays)")
            rows = {f"held out {k[-7:]}": v for k, v in loo.items()}
            for name in ("c9", "d6"):
                runs, pts = folders[name]
                [t] = targets(match_points([runs], pts, [name]), None)[0]
                rows[{"c9": "continuous 9/s", "d6": "dynamic 6/s"}[name]] = errors(
                    t.run, replay(t, c))
            for label, e in rows.items():
                print(f"  {label:<16} " + "  ".join(
                    f"{m} {e[m]:+.1%}" for m in ("ttft_mean", "ttft_p90", "tpot_mean",
                                                 "e2e_mean")))


if __name__ == "__main__":
    main()
