"""Does a cost profile hold on this machine? Its fingerprint against this machine's.

Every run's cost source ends with the answer (``servesim run`` prints it as ``step
costs:``), so nobody reads a CPU profile measured on another box as a prediction for
theirs. A GPU profile predicts the GPU it names; it is compared only on a machine that has
a GPU and a fingerprint to compare with.
"""

from __future__ import annotations

import functools
from typing import Any

from simulator.costs.profile import CostProfile
from simulator.fingerprint import (
    HOW_TO_FIX,
    describe_differences,
    differences,
    gpu_fields,
    this_machine,
)


def profile_fingerprint(profile: CostProfile) -> dict[str, Any]:
    """The fingerprint in the profile's provenance ({} when it has none)."""
    fp = profile.provenance.get("fingerprint", {})
    return fp if isinstance(fp, dict) else {}


@functools.lru_cache(maxsize=8)
def _here(kind: str, threads: int) -> tuple[tuple[str, Any], ...]:
    return tuple(this_machine(kind, threads).items())


def here(kind: str = "cpu", threads: int = 1) -> dict[str, Any]:
    """This machine's fingerprint (read once per process and kind/threads)."""
    return dict(_here(kind, threads))


def machine_differences(profile: CostProfile) -> list[tuple[str, Any, Any]] | None:
    """Fields where the profile's machine differs from this one; None if not comparable.

    This machine is taken at the profile's own thread count: a simulation-only run asks
    "same machine?", not "same engine flags?" (validate compares threads too).
    """
    fp = profile_fingerprint(profile)
    kind = "cpu" if profile.hardware == "cpu" else "cuda"
    if not fp or (kind == "cuda" and _gpu_here() is None):
        return None
    return differences(fp, here(kind, int(fp.get("threads", 1))))


@functools.lru_cache(maxsize=1)
def _gpu_here() -> tuple[tuple[str, Any], ...] | None:
    found = gpu_fields()
    return tuple(found.items()) if found else None


def machine_note(profile: CostProfile) -> str:
    """``fingerprint matches this machine [id]``, or which fields differ and the fix."""
    fp = profile_fingerprint(profile)
    if profile.form == "roofline":
        return ""
    if not fp:
        return "no machine fingerprint: cannot tell whether it holds here" \
            if profile.hardware == "cpu" else ""
    diffs = machine_differences(profile)
    if diffs is None:
        return ""
    if not diffs:
        return f"fingerprint matches this machine [{fp.get('id', '?')}]"
    fix = HOW_TO_FIX.format(model=profile.model, threads=fp.get("threads", 1))
    return (f"measured on ANOTHER machine ({describe_differences(diffs)}): it predicts that "
            f"machine, not this one; `{fix}` measures this one")
