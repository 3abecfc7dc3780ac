"""Cost profiles (data contract 3): a cost model's form, coefficients, fit and provenance.

One JSON object per (hardware, model, weight dtype, tp)::

    {"version": 1, "hardware": "h100-sxm", "model": "llama-3.1-8b",
     "weight_dtype": "bf16", "kv_dtype": "bf16", "tp": 1,
     "form": "linear" | "piecewise" | "roofline",
     "coefficients": {...},   # LinearCost fields (all six), PiecewiseCost fields (all
                              # fourteen), or RooflineCost knobs
     "fit": {"mape": ..., "r2": ..., "n_points": ..., "ranges": {...}},  # {} for priors
     "provenance": {"source": ..., "measured_by": ..., "date": ..., "software": ...,
                    "notes": ...},
     "time_scale": 1.1,       # optional: a fitted correction multiplying the form's times
     "overhead": {"step_s": ..., "request_s": ...}}  # optional: host costs (costs/host.py)

``time_scale`` and ``overhead`` come from black-box calibration on a measured serving run
(``servesim calibrate --from-run``); files without them read as before (1 and none), and
``to_dict`` leaves them out when they are 1 and empty.

"linear" and "piecewise" are fitted forms (calibrate/fit.py), "roofline" the prior. The
"piecewise" form was added without a version bump: a version-1 reader that knows it reads
every older file unchanged.

Shipped profiles live in ``simulator/profiles`` named
``<hardware>__<model>__<weight_dtype>__tp<tp>.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from simulator.atomic import atomic_write
from simulator.costs.base import CostModel, RowsFactorCost, check_number
from simulator.costs.host import Overhead, calibrated_cost
from simulator.costs.linear import LinearCost
from simulator.costs.piecewise import PiecewiseCost
from simulator.costs.roofline import KNOBS, RooflineCost, check_knob
from simulator.errors import ConfigError
from simulator.specs.dtypes import kv_dtype_bytes, same_cost_dtype, weight_dtype_bytes
from simulator.specs.hardware import HardwareSpec
from simulator.specs.models import ModelSpec

PROFILE_VERSION = 1
FORMS = ("linear", "piecewise", "roofline")
LINEAR_COEFFICIENTS: tuple[str, ...] = tuple(f.name for f in fields(LinearCost))
PIECEWISE_COEFFICIENTS: tuple[str, ...] = tuple(f.name for f in fields(PiecewiseCost))
FITTED: dict[str, tuple[type[LinearCost] | type[PiecewiseCost], tuple[str, ...]]] = {
    "linear": (LinearCost, LINEAR_COEFFICIENTS),  # fitted forms: class, coefficient names
    "piecewise": (PiecewiseCost, PIECEWISE_COEFFICIENTS),
}
PROFILES_DIR = Path(__file__).resolve().parent.parent / "profiles"


@dataclass(frozen=True, slots=True, kw_only=True)
class CostProfile:
    """A cost model as data: what it prices, its coefficients, how good and whose it is."""

    version: int = PROFILE_VERSION  # schema version of this contract
    hardware: str  # device name (catalogue key, e.g. "h100-sxm")
    model: str  # model name (catalogue key or a custom config's name)
    weight_dtype: str  # weight storage dtype the profile was measured or derived with
    kv_dtype: str  # KV-cache dtype
    tp: int  # tensor-parallel degree (GPUs per replica)
    form: str  # "linear" or "piecewise" (fitted), or "roofline" (prior)
    coefficients: dict[str, float]  # the form's fields, or RooflineCost knobs (seconds, ratios)
    fit: dict[str, Any] = field(default_factory=dict)  # mape, r2, n_points, ranges; {} = prior
    provenance: dict[str, Any] = field(default_factory=dict)  # source, measured_by, date, ...
    # Optional: decode row count -> measured factor on the form's time (RowsFactorCost).
    decode_rows_factor: dict[str, float] = field(default_factory=dict)
    # Optional, from a measured serving run: the form's times x time_scale, plus host costs.
    time_scale: float = 1.0  # dimensionless, > 0
    overhead: dict[str, float] = field(default_factory=dict)  # Overhead fields, seconds

    def __post_init__(self) -> None:
        if self.version != PROFILE_VERSION or isinstance(self.version, bool):
            raise ConfigError(f"version={self.version!r} must be {PROFILE_VERSION}")
        for name in ("hardware", "model"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be a non-empty string")
        weight_dtype_bytes(self.weight_dtype, "weight_dtype")
        kv_dtype_bytes(self.kv_dtype, "kv_dtype")
        if isinstance(self.tp, bool) or not isinstance(self.tp, int) or self.tp < 1:
            raise ConfigError(f"tp={self.tp!r} must be an int >= 1")
        if self.form not in FORMS:
            raise ConfigError(f"form={self.form!r} must be one of {FORMS}")
        for name in ("coefficients", "fit", "provenance", "decode_rows_factor", "overhead"):
            if not isinstance(getattr(self, name), dict):
                raise ConfigError(f"{name} must be a JSON object, got {getattr(self, name)!r}")
        self._check_coefficients()
        check_number("time_scale", self.time_scale, low_open=True)
        Overhead.from_mapping(self.overhead, "overhead")
        if self.decode_rows_factor:
            if self.form not in FITTED:
                raise ConfigError("decode_rows_factor applies to a fitted form only")
            self.build_fitted()  # validates the factors with the coefficients

    def _check_coefficients(self) -> None:
        coef = self.coefficients
        if self.form in FITTED:
            cls, names = FITTED[self.form]
            missing = [k for k in names if k not in coef]
            unknown = [k for k in coef if k not in names]
            if missing or unknown:
                raise ConfigError(
                    f"coefficients: {self.form} form needs exactly {', '.join(names)}"
                    f" (missing: {missing}, unknown: {unknown})"
                )
            cls(**{k: check_number(f"coefficients.{k}", v) for k, v in coef.items()})
        else:
            for k, v in coef.items():
                check_knob(k, v, where="coefficients.")

    def build(self, model: ModelSpec, hw: HardwareSpec, moe_kind: str | None = None,
              attention_efficiency: float = 1.0) -> CostModel:
        """The cost model this profile describes, for ``model`` on ``tp`` x ``hw``
        (``moe_kind``: whose measured MoE kernels a roofline prior's experts read,
        simulator/costs/moe_tables.py; None: the default's; ``attention_efficiency``: a
        stack's attention kernel, for a roofline prior whose file does not set one)."""
        if self.form in FITTED:
            return self.build_fitted()
        knobs: dict[str, Any] = {k: float(v) for k, v in self.coefficients.items()}
        if moe_kind is not None:
            knobs["moe_kind"] = moe_kind
        knobs.setdefault("attention_efficiency", attention_efficiency)
        return self.calibrated(
            RooflineCost(model, hw, self.tp, self.weight_dtype, self.kv_dtype, **knobs))

    def build_fitted(self) -> CostModel:
        """A fitted form's cost model (with its decode-row factors, if measured)."""
        cls, _ = FITTED[self.form]
        cost: CostModel = cls(**self.coefficients)
        if self.decode_rows_factor:
            cost = RowsFactorCost.from_mapping(cost, self.decode_rows_factor)
        return self.calibrated(cost)

    def calibrated(self, cost: CostModel) -> CostModel:
        """``cost`` (this profile's form) with its ``time_scale`` and host ``overhead``."""
        return calibrated_cost(cost, float(self.time_scale),
                               Overhead.from_mapping(self.overhead, "overhead"))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of data contract 3, keys in schema order."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if not self.decode_rows_factor:
            del out["decode_rows_factor"]  # optional: absent unless measured
        if self.time_scale == 1.0:
            del out["time_scale"]  # optional: absent unless calibrated on a serving run
        if not self.overhead:
            del out["overhead"]
        return out


def load_profile(path: str | Path) -> CostProfile:
    """Read and validate a cost-profile JSON file; errors name the file and the field."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))  # -sig: a BOM is no error
    except OSError as e:
        raise ConfigError(f"{path}: cannot read cost profile ({e.strerror})") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a cost profile must be a JSON object")
    names = [f.name for f in fields(CostProfile)]
    unknown = [k for k in data if k not in names]
    if unknown:
        raise ConfigError(f"{path}: unknown field(s) {unknown}; known: {', '.join(names)}")
    optional = ("fit", "provenance", "decode_rows_factor", "time_scale", "overhead")
    missing = [n for n in names if n not in data and n not in optional]
    if missing:
        raise ConfigError(f"{path}: missing field(s) {missing}")
    try:
        return CostProfile(**data)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from e


def save_profile(profile: CostProfile, path: str | Path) -> None:
    """Write ``profile`` as JSON atomically (temporary file in the same folder, then rename)."""
    text = json.dumps(profile.to_dict(), indent=2) + "\n"
    atomic_write(path, lambda p: p.write_text(text))


def profile_file_name(hardware: str, model: str, weight_dtype: str, tp: int) -> str:
    """Shipped-profile file name, e.g. ``h100-sxm__llama-3.1-8b__bf16__tp1.json``."""
    return f"{hardware.lower()}__{model.lower()}__{weight_dtype.lower()}__tp{tp}.json"


def shipped_profiles() -> list[Path]:
    """Every cost profile shipped with the package, sorted by file name."""
    return sorted(PROFILES_DIR.glob("*.json"))


def find_shipped_profile(
    model: str | ModelSpec, hardware: str | HardwareSpec, weight_dtype: str, tp: int
) -> Path | None:
    """The shipped profile for this deployment, or None if there is none.

    A measured (fitted: form "linear" or "piecewise") profile wins over a roofline prior,
    and one measured in a same-cost dtype (fp16 for bf16) counts: splitwise-sim measured
    in fp16.
    """
    model_name = model.name if isinstance(model, ModelSpec) else model
    hw_name = hardware.name if isinstance(hardware, HardwareSpec) else hardware
    dtypes = [weight_dtype] + [d for d in ("fp16", "bf16")
                               if d != weight_dtype.lower() and same_cost_dtype(d, weight_dtype)]
    paths = [PROFILES_DIR / profile_file_name(hw_name, model_name, d, tp) for d in dtypes]
    found = [p for p in paths if p.is_file()]
    measured = [p for p in found if json.loads(p.read_text()).get("form") != "roofline"]
    return (measured or found)[0] if found else None


# The scenario hook, cost_model_from_config, lives in its own module to keep files short.
from simulator.costs.from_config import cost_model_from_config  # noqa: E402

__all__ = [
    "FITTED",
    "FORMS",
    "KNOBS",
    "LINEAR_COEFFICIENTS",
    "PIECEWISE_COEFFICIENTS",
    "PROFILES_DIR",
    "PROFILE_VERSION",
    "CostProfile",
    "cost_model_from_config",
    "find_shipped_profile",
    "load_profile",
    "profile_file_name",
    "save_profile",
    "shipped_profiles",
]
