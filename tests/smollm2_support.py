"""A stand-in for ``servesim calibrate --here --model smollm2-135m`` in tests: a linear cost
profile with one fixed cost per step, stamped with a machine's fingerprint.

The real calibration of SmolLM2 takes minutes on a 2-vCPU machine, too long for a test, so
the tests that need "this machine's profile" write this one into their profile cache. Every
step costs exactly ``step_s`` (no per-token or per-row terms, no host costs, no jitter),
which makes simulated figures checkable by hand: each output token after the first costs
one step, so every simulated TPOT and ITL is ``step_s``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulator.costs.profile import LINEAR_COEFFICIENTS, CostProfile, save_profile


def write_linear_profile(path: Path, fingerprint: dict[str, Any], step_s: float) -> Path:
    """Write the profile to ``path`` (a per-user cache file) and return ``path``."""
    profile = CostProfile(
        hardware="cpu",
        model="smollm2-135m",
        weight_dtype="fp32",
        kv_dtype="bf16",
        tp=1,
        form="linear",
        coefficients={**dict.fromkeys(LINEAR_COEFFICIENTS, 0.0), "step_s": step_s},
        fit={"mape": 0.0, "n_points": 0, "note": "hand-written for a test, not fitted"},
        provenance={
            "source": "tests/smollm2_support.py (a test's stand-in for calibrate --here)",
            "fingerprint": fingerprint,
        },
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    save_profile(profile, path)
    return path
