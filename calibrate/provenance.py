"""The provenance block of a cost profile fitted from a profile table (contract 3).

One builder for every path that fits an engine's table: ``servesim calibrate TABLE`` and
``servesim calibrate --here``. The table's machine fingerprint is copied into the profile,
so the profile says where it holds.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from simulator.profile_table import ProfileTable

SOFTWARE_KEYS = ("engine_version", "torch_version", "transformers_version", "threads")


def table_provenance(table: ProfileTable, table_path: str | Path, command: str,
                     source: str | None = None) -> dict[str, Any]:
    """source, measured_by, date, software, notes and (when the table has one) fingerprint."""
    meta = table.metadata
    origin = f" ({meta['source']})" if "source" in meta else ""
    provenance: dict[str, Any] = {
        "source": source or f"profile table {Path(table_path).name}{origin}",
        "measured_by": meta.get("engine_version", "not stated in the table"),
        "date": dt.date.today().isoformat(),
        "software": ", ".join(f"{k} {meta[k]}" for k in SOFTWARE_KEYS if k in meta)
                    or "not stated in the table",
        "notes": f"fitted by: {command}"
                 + (f"; load average (1/5/15 min) {meta['load']}" if "load" in meta else ""),
    }
    if isinstance(meta.get("fingerprint"), dict):
        provenance["fingerprint"] = meta["fingerprint"]
    return provenance
