"""Residual plot of a fit: held-out predicted vs measured step time, and relative error.

matplotlib is optional (the ``calibrate`` extra) and imported only when a plot is drawn,
with the Agg backend so it works without a display.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

PHASE_COLOURS = {"prefill": "tab:blue", "decode": "tab:orange", "mixed": "tab:green"}


def residual_plot(steps: pd.DataFrame, predicted_s: np.ndarray, path: str | Path,
                  title: str) -> Path:
    """Write a two-panel PNG: predicted vs measured (log-log) and APE vs measured time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t_ms = steps["time_s"].to_numpy(np.float64) * 1e3
    pred_ms = np.asarray(predicted_s, dtype=np.float64) * 1e3
    err = (pred_ms / t_ms - 1.0) * 100
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    for phase, colour in PHASE_COLOURS.items():
        m = (steps["phase"] == phase).to_numpy()
        if m.any():
            ax1.scatter(t_ms[m], pred_ms[m], s=14, c=colour, label=phase)
            ax2.scatter(t_ms[m], err[m], s=14, c=colour, label=phase)
    lo, hi = float(min(t_ms.min(), pred_ms.min())), float(max(t_ms.max(), pred_ms.max()))
    ax1.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
    ax1.set(xscale="log", yscale="log", xlabel="measured step time (ms)",
            ylabel="held-out predicted step time (ms)", title="predicted vs measured")
    ax2.axhline(0, color="k", lw=1)
    for band in (-3, 3):
        ax2.axhline(band, color="grey", lw=0.8, ls=":")
    ax2.set(xscale="log", xlabel="measured step time (ms)",
            ylabel="held-out error (predicted / measured - 1, %)", title="relative error")
    ax1.legend(loc="upper left")
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
