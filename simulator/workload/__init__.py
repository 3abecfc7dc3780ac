"""Workloads as a request table (data contract 1).

A workload is a pandas DataFrame with one row per request (``table``); it comes
from synthetic arrival processes (``arrivals``) and length distributions
(``lengths``), or from a public trace (``traces``), shaped by pure transformations
(``transforms``) and described in a scenario by ``WorkloadConfig`` (``config``).
"""

from simulator.workload.arrivals import constant_arrivals, gamma_arrivals, poisson_arrivals
from simulator.workload.build import BuiltWorkload, build_requests
from simulator.workload.config import WorkloadConfig
from simulator.workload.lengths import (
    Empirical,
    Fixed,
    LengthDist,
    LogNormal,
    Uniform,
    length_dist_from_dict,
)
from simulator.workload.table import (
    OPTIONAL_COLUMNS,
    REQUEST_TABLE_VERSION,
    REQUIRED_COLUMNS,
    read_request_table,
    validate_request_table,
    write_request_table,
)
from simulator.workload.traces import (
    TRACE_FORMATS,
    LoadedTrace,
    detect_format,
    load_azure,
    load_burstgpt,
    load_generic,
    load_lengths_csv,
    load_mooncake,
    load_trace,
    load_vllm_bench,
)
from simulator.workload.transforms import fit_context, scale_to_rate, with_arrivals

__all__ = [
    "OPTIONAL_COLUMNS",
    "REQUEST_TABLE_VERSION",
    "REQUIRED_COLUMNS",
    "TRACE_FORMATS",
    "BuiltWorkload",
    "Empirical",
    "Fixed",
    "LengthDist",
    "LoadedTrace",
    "LogNormal",
    "Uniform",
    "WorkloadConfig",
    "build_requests",
    "constant_arrivals",
    "detect_format",
    "fit_context",
    "gamma_arrivals",
    "length_dist_from_dict",
    "load_azure",
    "load_burstgpt",
    "load_generic",
    "load_lengths_csv",
    "load_mooncake",
    "load_trace",
    "load_vllm_bench",
    "poisson_arrivals",
    "read_request_table",
    "scale_to_rate",
    "validate_request_table",
    "with_arrivals",
    "write_request_table",
]
