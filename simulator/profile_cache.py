"""The per-user profile cache: cost profiles measured on this machine, keyed by fingerprint.

``servesim calibrate --here`` measures this machine and stores what it measured here;
later runs on the same machine find it (``simulator.costs.from_config``: a profile cached
for this machine wins over a shipped one). Layout::

    $SERVESIM_PROFILE_CACHE/                 # else $XDG_CACHE_HOME/servesim/profiles,
      <fingerprint id>/                      # else ~/.cache/servesim/profiles
        cpu__tiny__fp32__tp1.json            # the cost profile (contract 3), its
        cpu__tiny__fp32__tp1.parquet         # provenance holding the full fingerprint,
                                             # and the profile table it was fitted on

The folder name is ``simulator.fingerprint.fingerprint_id``: a hash of the fields that
decide whether two machines time steps alike (CPU model and kernel flags, cores, GPU,
driver, torch/transformers/servesim versions, threads). A different machine, a torch
upgrade or another thread count looks in another folder and finds nothing, so nothing
measured elsewhere is used as if measured here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

ENV_VAR = "SERVESIM_PROFILE_CACHE"


def cache_root() -> Path:
    """The cache folder: ``$SERVESIM_PROFILE_CACHE``, else the XDG cache, else ~/.cache."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "servesim" / "profiles"


def profile_stem(hardware: str, model: str, weight_dtype: str, tp: int) -> str:
    """``cpu__tiny__fp32__tp1``: the name shared with shipped profiles."""
    return f"{hardware.lower()}__{model.lower()}__{weight_dtype.lower()}__tp{tp}"


def cached_profile_path(fingerprint: dict[str, Any], hardware: str, model: str,
                        weight_dtype: str, tp: int = 1) -> Path:
    """Where the profile for this deployment on the fingerprinted machine lives (or would)."""
    return cache_root() / str(fingerprint["id"]) / (
        profile_stem(hardware, model, weight_dtype, tp) + ".json")


def find_cached_profile(fingerprint: dict[str, Any], hardware: str, model: str,
                        weight_dtype: str, tp: int = 1) -> Path | None:
    """The cached profile for this deployment measured on that machine, or None."""
    path = cached_profile_path(fingerprint, hardware, model, weight_dtype, tp)
    return path if path.is_file() else None
