"""CDF overlay of measured and simulated per-request latencies, one row per (policy, load).

matplotlib is optional (the ``calibrate`` extra) and imported only when a plot is drawn,
with the Agg backend so it works without a display.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.metrics import request_metrics

PANELS = (("ttft_ms", "TTFT (ms)"), ("tpot_ms", "TPOT (ms)"), ("e2el_ms", "end-to-end (ms)"))


def cdf_overlay(pairs: list[tuple[str, Any, pd.DataFrame, pd.DataFrame]],
                path: str | Path) -> Path:
    """Write a PNG: for each (policy, load, measured records, simulated records) a row of
    CDFs (TTFT, TPOT, end-to-end), measured solid and simulated dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(1, len(pairs))
    fig, axes = plt.subplots(n, len(PANELS), figsize=(4 * len(PANELS), 2.6 * n), squeeze=False)
    for row, (policy, load, measured, simulated) in enumerate(pairs):
        for col, (column, label) in enumerate(PANELS):
            ax = axes[row][col]
            for records, style, name in ((measured, "-", "measured"),
                                         (simulated, "--", "simulated")):
                done = records[records["status"] == "finished"]
                values = np.sort(request_metrics(done)[column].dropna().to_numpy())
                if len(values):
                    ax.plot(values, np.arange(1, len(values) + 1) / len(values), style,
                            label=name)
            ax.set_xlabel(label)
            ax.set_ylabel("fraction of requests")
            ax.set_title(f"{policy}, load {load}", fontsize=9)
            ax.grid(alpha=0.3)
            if row == 0 and col == 0:
                ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out
