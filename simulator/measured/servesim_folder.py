"""A servesim results folder (``servesim measure``, ``run --backend engine``, ``serve
--records-out``) as measured runs, one per point.

``requests.parquet`` gives the records (contract 4; a request that did not finish is
failed with its status and reason), ``tokens.parquet`` (when present) the time of every
output token, so the gaps between them; the point's own ``summary.json`` entry is its
summary, as written (``MeasuredRun.summary_override``); its machine fingerprint is the
summary's, else the manifest's (``servesim serve --records-out`` records it there only).

A folder that holds no measurement (simulated results, a validation report: its manifest's
kind, or for an older folder the kind inferred from its files, simulator/results_manifest.py)
is refused, naming what it holds, as ``servesim validate --measured`` refuses it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.errors import ConfigError
from simulator.measured.run import MeasuredRun
from simulator.results_manifest import SIMULATED, VALIDATION, WHAT, folder_kind, read_manifest


def is_servesim_folder(path: Path) -> bool:
    """Whether ``path`` is a folder with a summary.json and requests.parquet."""
    return path.is_dir() and (path / "summary.json").is_file() and \
        (path / "requests.parquet").is_file()


def read_servesim_folder(path: Path) -> list[MeasuredRun]:
    """Each point of the folder as a run; a ConfigError when it holds no measurement."""
    check_measured_folder(path)
    manifest = read_manifest(path) or {}
    try:
        summaries = json.loads((path / "summary.json").read_text())
        records = pd.read_parquet(path / "requests.parquet")
        tokens = pd.read_parquet(path / "tokens.parquet") if \
            (path / "tokens.parquet").is_file() else None
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: cannot read the results ({e})") from e
    if not isinstance(summaries, list) or not all(isinstance(s, dict) for s in summaries):
        raise ConfigError(f"{path / 'summary.json'}: expected a list of summary objects")
    if "point" not in records:
        records = records.assign(point=0)
    if tokens is not None and "point" not in tokens:
        tokens = tokens.assign(point=0)
    runs = []
    for i, summary in enumerate(summaries):
        name = str(path) if len(summaries) == 1 else f"{path} point {i}"
        rec = records[records["point"] == i].sort_values(["arrival_s", "request_id"])
        done = (rec["status"] == "finished").to_numpy()
        arrival = rec["arrival_s"].to_numpy(np.float64)
        table = pd.DataFrame({
            "request_id": rec["request_id"].to_numpy(), "arrival_s": arrival,
            "prompt_tokens": rec["prompt_tokens"].to_numpy(),
            "output_tokens": rec["output_tokens"].to_numpy(),
            "ttft_s": np.where(done, rec["first_token_s"].to_numpy() - arrival, np.nan),
            "e2e_s": np.where(done, rec["finish_s"].to_numpy() - arrival, np.nan),
            "status": np.where(done, "finished", "failed"),
            "reason": [r if ok else f"{s}: {r}".rstrip(": ") for ok, s, r in
                       zip(done, rec["status"], rec["reason"].fillna(""), strict=True)]})
        gaps = None
        if tokens is not None:
            t = tokens[tokens["point"] == i].sort_values(["request_id", "token_index"])
            gaps = {int(rid): np.diff(g.to_numpy(np.float64))
                    for rid, g in t.groupby("request_id")["time_s"]}
        fp = summary.get("fingerprint") or manifest.get("machine")
        runs.append(MeasuredRun(
            name, "servesim", table, gaps,
            missing=[] if gaps is not None else ["per-token times: no tokens.parquet"],
            fingerprint=fp if isinstance(fp, dict) else None,
            policy=str(summary.get("policy", "")), summary_override=summary))
    return runs


def check_measured_folder(path: Path, label: str | None = None) -> None:
    """Refuse a folder of simulated results or a validation report (module docstring);
    ``label`` names it in the error (default: the path)."""
    kind, how = folder_kind(path)
    if kind not in (SIMULATED, VALIDATION):
        return
    hint = (f"; its measured side is {path / 'measured'}" if kind == VALIDATION else
            ": fitting or validating the simulator on it would compare it with itself")
    raise ConfigError(f"{label or path} holds {WHAT[kind]}, kind {kind!r} ({how}), not a "
                      f"measurement{hint}. Pass a folder written by `servesim serve "
                      "--records-out`, `servesim measure` or `servesim run --backend engine`, "
                      "or a GuideLLM, AIPerf or vLLM bench result file")
