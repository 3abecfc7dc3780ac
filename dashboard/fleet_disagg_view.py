"""The Fleet page's section for disaggregated prefill/decode pools: the pools' and the link's
figures, the same GPUs run aggregated beside them, and TTFT split into its prefill side and
its KV transfer (dashboard/logic/fleet_disagg.py)."""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboard import figures_fleet
from dashboard.logic.fleet_disagg import aggregated, compare_table, transfer_tiles, ttft_parts
from dashboard.logic.run import RunOutput
from dashboard.ui import cached_run, guarded, plot
from simulator.scenario_types import field_rule


def disagg_section(scenario: dict[str, Any], out: RunOutput) -> None:
    """Draw the section for the ``scenario`` that ran and its run ``out``."""
    s = out.summary
    st.subheader("Disaggregated prefill/decode")
    cols = st.columns(4)
    for col, (label, value, help_text) in zip(cols, transfer_tiles(s), strict=False):
        col.metric(label, value, help=help_text)
    together = aggregated(scenario)
    if together is None:
        st.caption("The pools differ from [hardware] in GPU or tp: no aggregated fleet of "
                   "the same GPUs to compare with.")
        other = None
    else:
        with st.spinner("Simulating the same GPUs aggregated..."):
            other = guarded("Aggregated run", lambda: cached_run(together))
        router = together["cluster"].get("router", field_rule("cluster.router").default)
        st.caption(f"Aggregated: the same {s['num_gpus']} GPUs as "
                   f"{together['cluster']['replicas']} replicas behind {router}, the same "
                   "requests.")
    table = compare_table(s, other.summary if other else None)
    st.dataframe(table, hide_index=True, key="fl_disagg_compare", column_config={
        c: st.column_config.NumberColumn(format="%.1f") for c in table.columns
        if c.endswith(("ms", "req/s"))})
    slo = s.get("slo") or {}
    plot(figures_fleet.ttft_split_cdfs(ttft_parts(out.requests), slo.get("ttft_ms")),
         "fl_ttft_split")
