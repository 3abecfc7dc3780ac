"""Write benchmarks/published_cases_nim_dli.toml from the NIM concurrency sweeps of NVIDIA's
"Sizing LLM Inference Systems" course (benchmarks/published_runs/nim_dli/nim_sweeps.csv).

Each row of the table is one GenAI-Perf run against NIM (TensorRT-LLM engines): a model,
GPU, GPU count, precision, fixed input / output lengths and a concurrency, with the client's
mean TTFT, mean inter-token latency and output throughput. Every row becomes one case; the
table measured concurrency 5 twice per setting, and the second run is its own case
(``-run2``). The H100 rows are held out; the A100 rows are in sample (``fitted``: the
engines' token budget and KV memory, which NIM does not state, the first round's spread and
the 16-bit engines' decode factor were fitted on them, and the trtllm 0.10 preset's decode walk and
all-reduce handshake on their one-client rows). The replay is a closed loop of C clients
whose first requests reach the engine 1.5 ms apart (FIRST_ROUND_SPREAD_S) and whose later
rounds keep in step with the groups that first round formed, as the course's per-request
exports show GenAI-Perf's clients do (``python benchmarks/nim_dli_check.py``), scored as
perf_analyzer scored it (its measurement windows:
simulator/measured/perf_analyzer.py).

    python benchmarks/nim_dli_cases.py            # (re)write the case file
    python benchmarks/nim_dli_cases.py --check    # exit 1 when the file is stale
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import statistics
import sys
from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path

from simulator.measured.perf_analyzer import STABILITY_WINDOW, TimeWindows
from simulator.specs.models import get_model
from simulator.stacks import StackSection

HERE = Path(__file__).parent
TABLE = HERE / "published_runs" / "nim_dli" / "nim_sweeps.csv"
OUT = HERE / "published_cases_nim_dli.toml"
SOURCE = ("github:wbing520/ai-performance-engineering code/ch10_inference/"
          "inference_gpu_cluster_sizing/dataset/nim.csv @ "
          "0e25b2e236211ad01ed2221bd2c1cfa5b3f47b55 (NVIDIA DLI course 'Sizing LLM Inference "
          "Systems' data, Apache-2.0 repository; trimmed copy: "
          "benchmarks/published_runs/nim_dli/nim_sweeps.csv)")
GPUS = {"A100-SXM4-80GB": ("a100-80gb", "A100-SXM4-80GB"),
        "H100_80GB_HBM3": ("h100-sxm", "H100 80GB HBM3 (the SXM part)")}
MODELS = {"meta-llama3-8b-instruct": ("llama-3-8b", "meta/llama3-8b-instruct"),
          "meta-llama3-70b-instruct": ("llama-3-70b", "meta/llama3-70b-instruct")}
# perf_analyzer's windows in the table's runs: --measurement-interval 60 s (72 s windows:
# every one-client row scored the requests that end in three of them, 216 s;
# benchmarks/nim_dli_windows.py), --stability-percentage 999 (the table's column), and
# perf_analyzer's default --max-trials 10 (simulator/measured/perf_analyzer.py). The
# course's own per-request exports used GenAI-Perf's default 10 s (12 s windows).
INTERVAL_S = 60.0
STABILITY_PERCENTAGE = 999.0
# Requests simulated first: C x the rounds that fill four windows at the published mean
# latency, plus one; the replay doubles them while the load would stop before the windows
# do (benchmarks/published.py)
FIRST_WINDOWS = 4
# Reading a row's windows from its count (scored_windows): the most windows a run has
# (perf_analyzer's default --max-trials), and how far a scored span may overrun its
# windows (the 1.2 x sleep's wake-up)
MAX_TRIALS = TimeWindows().max_trials
SPAN_SLACK = 0.02
# The engines' token budget a step (max_num_tokens), which NIM 1.0 does not state: fitted
# on the A100 rows (FIT_GPU; benchmarks/nim_dli_budget_fit.py: the most mean-TTFT and
# mean-TPOT errors within 15% over 8,192-65,536, the first round spread as below); the H100
# rows hold it out. Every case carries it as the
# knob max_num_batched_tokens.
FIT_GPU = "a100-80gb"
ENGINE_BUDGET = 32768
BUDGET_FITTED = ("the NIM 1.0 engines' token budget (benchmarks/nim_dli_budget_fit.py; "
                 "benchmarks/nim_dli_cases.py ENGINE_BUDGET): the A100 rows")
# The client's turnaround, from a request's last response to its next send: 155 us, the mean
# over the course's per-request exports (A100, 1, 2 and 5 clients; part 4 of
# benchmarks/nim_dli_check.py). A measurement of GenAI-Perf's client, not a fit of the
# simulator. Replayed as the cases' think time (exponential with that mean), which is what
# scatters a lockstep round's sends by a fraction of a millisecond, as in the exports.
CLIENT_TURNAROUND_S = 155e-6
# The first round reaches the engine spread out: client k's first request at k x 1.5 ms
# (client_start = "ramp", client_ramp_s = C x FIRST_ROUND_SPREAD_S). perf_analyzer opens its
# C connections as the run starts and the server takes their first requests one after
# another; in the course's export at five clients the first round went to the engine in two
# steps (2 + 3 prompts) though it was sent within 0.11 ms, and every later round in one
# (benchmarks/nim_dli_check.py part 1). With fixed lengths the groups the first round forms
# keep apart, a step or more from each other, for the rest of the run; sent together, a
# round stays one group, and its TTFT is the whole round's prefill. How far apart the first
# sends land is not measured anywhere read here: fitted on the A100 rows (FIT_GPU: the most
# mean-TTFT and mean-TPOT errors within 15% over 0-2 ms a client;
# benchmarks/nim_dli_ramp_fit.py); the H100 rows hold it out.
FIRST_ROUND_SPREAD_S = 1.5e-3
RAMP_FITTED = ("the first round's spread, 1.5 ms a client (benchmarks/nim_dli_ramp_fit.py; "
               "benchmarks/nim_dli_cases.py FIRST_ROUND_SPREAD_S): the A100 rows")
# NIM 1.0's 16-bit engines' steps with decode rows run this much longer than the 1.x
# tables price them (cost.decode_scale on the FP16 / BF16 rows; simulator/costs/
# prefill_pass.py): without it their ITL read 4-7% (A100) and 9% (H100) fast at 1-5
# clients and 9-12% at 10-50 (nim_dli_groups.py part 7), where the FP8 engines' reads
# right, and 0.10's own max-throughput FP16 rows want no factor, so it is these engines',
# not the preset's
# (docs/stacks.md, "NIM 1.0's 16-bit decode steps").
# Fitted on the A100 rows (FIT_GPU, all 16-bit: the most mean-TTFT and mean-TPOT errors
# within 15% over 1-1.16; benchmarks/nim_dli_decode_fit.py); the H100 rows hold it out.
# 1.12 until stop 52, fitted while the 70B rows read their cache 1.76 times a step; 1.14
# refitted with the one read below (docs/stacks.md, "NIM 1.0's 70B engines read a 16-bit
# cache once a step").
DECODE_SCALE_16BIT = 1.14
SIXTEEN_BIT = ("fp16", "bf16")
# How often the 16-bit engines' decode reads the KV cache a step where TensorRT-LLM 0.10 has
# an XQA kernel for the model's query heads per KV head (G = 8 here: Llama-3-70B at TP 4 and
# 8), as 1 + XQA_REREAD_16BIT x (G - 1) of the kernel tables' one read. XQA takes a KV head's
# G query heads in one block, one read; the trtllm 0.10 preset carries 0.11's fitted law
# instead (beta 0.108: 1.76 reads at G = 8), which 0.10's own max-throughput FP16 70B rows
# prefer. Fitted on the A100 rows (FIT_GPU: the most mean-TTFT and mean-TPOT errors within
# 15% over beta 0-0.108; benchmarks/nim_dli_reads_fit.py); the H100 rows hold it out.
XQA_REREAD_16BIT = 0.0
READS_FITTED = ("NIM 1.0's 16-bit XQA decode reads (benchmarks/nim_dli_reads_fit.py; "
                "benchmarks/nim_dli_cases.py XQA_REREAD_16BIT): the A100 rows")
# The share of each GPU's memory the engines' weights and KV cache take ([kv]
# gpu_memory_utilization, the KV cache what the weights leave of it), which NIM 1.0 does
# not state: TensorRT-LLM's 0.9 of the memory free after the engine's activations and
# buffers, which depend on its build. Fitted on the A100 rows (FIT_GPU: the most mean-TTFT
# and mean-TPOT errors within 15% over 0.75-0.9 in steps down to 0.0125, the decode factor
# in place, of the memory CUDA reports (HardwareSpec.cuda_total_gib);
# benchmarks/nim_dli_kv_fit.py); the H100 rows hold it out.
KV_MEMORY_FRACTION = 0.8625
KV_FITTED = ("NIM 1.0's KV memory fraction (benchmarks/nim_dli_kv_fit.py; "
             "benchmarks/nim_dli_cases.py KV_MEMORY_FRACTION): the A100 rows")
DECODE_FITTED = ("NIM 1.0's 16-bit decode factor (benchmarks/nim_dli_decode_fit.py; "
                 "benchmarks/nim_dli_cases.py DECODE_SCALE_16BIT): the A100 rows")
ID_PREFIX = "nim1.0-dli-"  # then setting (GPU-model-precision-tpN), lengths, clients
REPEAT = "-run2"  # the second run of a point the table measured twice
# The rows the trtllm 0.10 preset's fitted terms were fitted on: one client on FIT_GPU
# (their ITL slopes: the decode walk; their ITL gaps: the all-reduce handshake; their
# short prompts' TTFT: the prefill pass). In sample.
FITTED_CLIENTS = 1
FITTED = ("TensorRT-LLM 0.10-0.11 decode walk cycles and all-reduce handshake, and 0.10's "
          "prefill weight passes (benchmarks/decode_walk_fit.py, benchmarks/"
          "allreduce_sync_fit.py, benchmarks/prefill_pass_fit.py; simulator/stack_presets.py "
          "TRTLLM_WALK_CYCLES, TRTLLM_ALLREDUCE_SYNC, TRTLLM_010_PREFILL_PASSES): this "
          "setting's one-client rows")
NOTES = (
    "GenAI-Perf 2.48-era concurrency run against NIM's OpenAI chat endpoint (streaming, "
    "max_tokens = min_tokens = the output length, ignore_eos), synthetic prompts of a fixed "
    "length (stddev 0). Scored as perf_analyzer scored them: the requests that ended in its "
    "72 s measurement windows (--measurement-interval 60 s, inferred from the table's request "
    "counts: benchmarks/nim_dli_windows.py), from the start until three in a row are stable "
    "(--stability-percentage 999) or ten have run (simulator/measured/perf_analyzer.py), so "
    "the first round is in; where the row's own count says its run scored more windows than "
    "three can give (workload.measured_windows: the fewest its count allows, "
    "benchmarks/nim_dli_windows.py), that many. TTFT and ITL are per-request means at the client; "
    "GenAI-Perf's ITL = (E2E - TTFT) / (output - 1), servesim's mean TPOT; its p95 ITL is "
    "over every gap between two responses, pooled over the scored requests (GenAI-Perf "
    "before 2024-06-06; 200 rows have a p95 below their mean: benchmarks/nim_dli_check.py "
    "part 5), servesim's p95 ITL (the step log's gaps up to the windows' end); "
    "output throughput in tokens a second. Replayed as C clients whose first requests reach "
    "the engine 1.5 ms apart (client_start = 'ramp', client_ramp_s = C x 1.5 ms: perf_analyzer "
    "sends all C at once, but the course's export at C 5 shows its first round reaching the "
    "engine in two steps; the spread fitted on the A100 rows: benchmarks/nim_dli_ramp_fit.py) "
    "and then stay in step with the groups that round formed (the course's per-request "
    "exports at C 1, 2 and 5 show every later round sent and answered together: "
    "benchmarks/nim_dli_check.py), each client sending its next request a think time after "
    "its last response: exponential with the exports' mean turnaround, 155 us (their sends "
    "of a round spread over 0-0.5 ms; benchmarks/nim_dli_check.py part 4). Requests: C x "
    "the rounds that fill four windows at the published mean request latency, plus one, "
    "doubled while the load would stop before the windows do. Not stated, assumed: the "
    "TensorRT-LLM "
    "release (NIM 1.0's engines, 2024: the trtllm 0.10 preset), the engine's scheduler "
    "settings (the 0.10 preset's: max_num_tokens unset, so every waiting prompt fits a "
    "step; overridden here by the budget fitted on the A100 rows, knobs.max_num_batched_tokens "
    "= 32768: benchmarks/nim_dli_budget_fit.py), the KV cache dtype (fp16 with fp16 "
    "weights, fp8 with fp8: NIM's FP8 profiles), "
    "'fp16' as written (fp16 and bf16 cost the same). The 16-bit engines' steps with decode "
    f"rows are priced {DECODE_SCALE_16BIT:g} x the tables (cost.decode_scale: fitted on the "
    "A100 rows, benchmarks/nim_dli_decode_fit.py), and the 70B's decode attention, where "
    "TensorRT-LLM 0.10 has an XQA kernel for its 8 query heads per KV head, reads the 16-bit "
    f"cache {1 + 7 * XQA_REREAD_16BIT:g} x a step (cost.decode_kv_reads: fitted on the A100 "
    "rows, benchmarks/nim_dli_reads_fit.py); the FP8 engines' as the tables price them. The "
    f"engines' KV cache: what the weights leave of {KV_MEMORY_FRACTION:g} of each GPU's "
    "memory as CUDA reports it (kv.gpu_memory_utilization, not stated by NIM: fitted on "
    "the A100 rows, benchmarks/nim_dli_kv_fit.py).")


def cases(table: Path = TABLE) -> list[dict[str, object]]:
    """One case per row of ``table``, in the table's order."""
    out: list[dict[str, object]] = []
    seen: set[str] = set()
    with open(table, newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            gpu, published_gpu = GPUS[row["task_inputs-GPU"]]
            model, published_model = MODELS[row["task_inputs-model"]]
            tp = int(row["task_inputs-n_gpus"])
            precision = row["task_inputs-precision"]
            isl = int(row["input_config-synthetic_input_tokens_mean"])
            osl = int(row["input_config-output_tokens_mean"])
            clients = int(row["input_config-concurrency"])
            cid = f"{ID_PREFIX}{setting_id(gpu, model, precision, tp)}-{isl}-{osl}-c{clients}"
            if cid in seen:
                cid += REPEAT
            seen.add(cid)
            e2e_s = float(row["request_latency-avg"]) / 1e9
            measured = scored_windows(row, INTERVAL_S)
            rounds = math.ceil(max(FIRST_WINDOWS, (measured or 0) + 1)
                               * TimeWindows(INTERVAL_S).window_s / e2e_s) + 1
            kv = "fp8" if precision == "fp8" else precision
            metrics = {
                "mean_ttft_ms": round(float(row["time_to_first_token-avg"]) / 1e6, 3),
                "mean_tpot_ms": round(float(row["inter_token_latency-avg"]) / 1e6, 4),
                "output_throughput": round(float(row["output_token_throughput-avg"]), 3),
                "p95_ttft_ms": round(float(row["time_to_first_token-p95"]) / 1e6, 3),
                "p95_itl_ms": round(float(row["inter_token_latency-p95"]) / 1e6, 4)}
            read = ", ".join(f"{k} = {v}" for k, v in metrics.items())
            out.append({
                "id": cid,
                "source": f"{SOURCE}, line {line}",
                "source_version": "NIM (execution type NIM_TRT-LLM), 2024; the course's NIM "
                                  "is nvcr.io/nim/meta/llama3-8b-instruct:1.0.3",
                "source_date": "2024",
                "quote": ", ".join(f"{k}={v}" for k, v in row.items())
                         + f" (read as: {read}; the table's times are ns)",
                "stack": "trtllm", "stack_version": "nim-1.0", "preset": "0.10",
                "gpu": gpu, "published_gpu": published_gpu,
                "model": model, "published_model": published_model,
                "weight_dtype": precision, "kv_dtype": kv, "tp": tp,
                "notes": NOTES,
                "workload": {"prompt_tokens": isl, "output_tokens": osl,
                             "num_prompts": clients * rounds, "arrival": "closed",
                             "concurrency": clients, "client_start": "ramp",
                             "client_ramp_s": round(clients * FIRST_ROUND_SPREAD_S, 9),
                             "think_time_s": CLIENT_TURNAROUND_S,
                             "client": "perf-analyzer", "measurement_interval_s": INTERVAL_S,
                             "stability_percentage": STABILITY_PERCENTAGE,
                             **({"measured_windows": measured} if measured else {})},
                "metrics": metrics,
                "knobs": {"max_num_batched_tokens": ENGINE_BUDGET},
                **({"cost": engine_cost(model, tp, kv)} if precision in SIXTEEN_BIT else {}),
                "kv": {"gpu_memory_utilization": KV_MEMORY_FRACTION},
                **({"fitted": fitted(gpu, clients)} if gpu == FIT_GPU else {}),
            })
    return out


def xqa_reads(model: str, tp: int, kv_dtype: str, beta: float) -> float | None:
    """The KV reads a decode step takes on ``tp`` GPUs of NIM 1.0's engine (the trtllm 0.10
    preset) with ``beta`` as its 16-bit re-read term where 0.10 decodes with XQA (the
    preset's own rule, ``StackPreset.decode_kv_reads``); None where the term does not
    apply (the masked kernel's groups, an FP8 cache)."""
    preset = StackSection(name="trtllm", version="0.10").preset()
    assert preset is not None
    spec = get_model(model)

    def reads(b: float) -> float:
        return dataclasses.replace(preset, kv16_reread=b).decode_kv_reads(spec, tp, kv_dtype)

    return None if reads(beta) == reads(beta + 1.0) else round(reads(beta), 9)


def engine_cost(model: str, tp: int, kv_dtype: str) -> dict[str, float]:
    """The ``[cost]`` of a 16-bit engine of the course: its decode factor, and where 0.10
    decodes with XQA its KV reads a step (``1 + XQA_REREAD_16BIT x (G - 1)``)."""
    reads = xqa_reads(model, tp, kv_dtype, XQA_REREAD_16BIT)
    return {"decode_scale": DECODE_SCALE_16BIT,
            **({} if reads is None else {"decode_kv_reads": reads})}


def table_rows(table: Path = TABLE) -> list[dict[str, str]]:
    """The sweep table's rows, as the CSV gives them."""
    with open(table, newline="") as f:
        return list(csv.DictReader(f))


def least_count(mean: float, most: int = 10_000) -> int:
    """The smallest number of requests whose integer lengths average to ``mean``: the
    denominator of the closest fraction with one of at most ``most``."""
    ratio = Fraction(mean).limit_denominator(most)
    if abs(float(ratio) - mean) * ratio.denominator >= 1e-6:  # the float is exact to ~1e-9
        raise ValueError(f"no count up to {most} gives the mean {mean!r}")
    return ratio.denominator


def longest_scored_s(windows: int, interval_s: float = INTERVAL_S) -> float:
    """The longest a request scored in ``windows`` windows can have taken: every one was
    sent after the load started and ended by the last window's end (SPAN_SLACK over, the
    1.2 x sleep's wake-up)."""
    return windows * TimeWindows(interval_s).window_s * (1 + SPAN_SLACK)


def scored_windows(row: dict[str, str], interval_s: float = INTERVAL_S) -> int | None:
    """The windows a table row's count says its run scored, when three cannot give it
    (None: three can, or the mean fixes no count). A count n = k x the least count spans
    n / throughput seconds, from the first round's send to a response inside the last
    window W: within W windows, and no earlier than W windows less one window or one
    request latency, whichever is shorter (less SPAN_SLACK). And every scored request was
    sent after the load started and ended by the last window's end, so the row's mean
    request latency fits within W windows (SPAN_SLACK over): a KV-bound row whose
    requests waited minutes for a slot scored later windows than its count alone says."""
    try:
        least = least_count(float(row["num_input_token-avg"]))
    except ValueError:
        return None
    per_request_s = least / float(row["request_throughput-avg"])
    latency_s = float(row["request_latency-avg"]) / 1e9
    width = TimeWindows(interval_s).window_s

    def holds(windows: int) -> bool:
        end = windows * width
        low, high = end - min(latency_s, width) - SPAN_SLACK * end, end * (1 + SPAN_SLACK)
        k = max(1, math.ceil(low / per_request_s))
        return k * per_request_s <= high and latency_s <= longest_scored_s(windows, interval_s)

    if holds(STABILITY_WINDOW):
        return None
    return next((w for w in range(STABILITY_WINDOW + 1, MAX_TRIALS + 1) if holds(w)), None)


def fitted(gpu: str, clients: int) -> str:
    """What was fitted on a row of ``gpu`` at ``clients`` ("" = nothing: held out)."""
    parts = ([BUDGET_FITTED, RAMP_FITTED, DECODE_FITTED, KV_FITTED, READS_FITTED]
             if gpu == FIT_GPU else [])
    if (gpu, clients) == (FIT_GPU, FITTED_CLIENTS):
        parts.append(FITTED)
    return "; ".join(parts)


def course_rows(path: Path) -> list[dict]:
    """The simulated course rows of a ``published.py --json`` file (status ok)."""
    return [r for r in json.loads(Path(path).read_text())["rows"]
            if r["id"].startswith(ID_PREFIX) and r["status"] == "ok"]


def fitted_k(found: Iterable[tuple[str, float, float, float]]) -> float:
    """The median k of the fit set's settings (FIT_GPU) in rows of (setting, _, _, k): a
    one-client fit's figure (benchmarks/allreduce_sync_fit.py, prefill_pass_fit.py)."""
    return statistics.median(k for setting, _, _, k in found
                             if parse_setting(setting)[0] == FIT_GPU)


def print_fit(found: Iterable[tuple[str, float, float, float]], fit: float, scale: float,
              unit: str, measured: str, per: str) -> None:
    """The table of a one-client fit (benchmarks/allreduce_sync_fit.py, prefill_pass_fit.py):
    per setting, its measured figure, the unit it is counted in, k, and the fit's k x unit,
    in ``unit`` (``scale`` of a second), with whether the setting was held out."""
    print(f"setting                            {measured:>10} {per:>8}      k   fit's  (held out?)")
    for setting, value, one, k in found:
        print(f"   {setting:34s} {value * scale:6.2f} {unit} {one * scale:6.2f} {unit} {k:6.2f} "
              f"{fit * one * scale:6.2f} {unit}  {held_out(setting)}")


def held_out(setting: str) -> str:
    """"held out" for a setting outside the fit set, else ""."""
    return "" if parse_setting(setting)[0] == FIT_GPU else "held out"


def setting_id(gpu: str, model: str, precision: str, tp: int) -> str:
    """A setting's part of a case id: ``a100-80gb-llama-3-70b-bf16-tp8``."""
    return f"{gpu}-{model}-{precision}-tp{tp}"


def parse_setting(setting: str) -> tuple[str, str, str, int]:
    """(GPU, model, precision, GPU count) of a :func:`setting_id`."""
    head, tp = setting.rsplit("-tp", 1)
    head, precision = head.rsplit("-", 1)
    gpu = next(g for g, _ in GPUS.values() if head.startswith(f"{g}-"))
    return gpu, head.removeprefix(f"{gpu}-"), precision, int(tp)


def parse_id(case_id: str) -> tuple[str, str, int]:
    """(setting, "input/output", clients) of a case id :func:`cases` wrote."""
    fields = case_id.removesuffix(REPEAT).removeprefix(ID_PREFIX).split("-")
    return "-".join(fields[:-3]), f"{fields[-3]}/{fields[-2]}", int(fields[-1][1:])


def _value(v: object) -> str:
    """A TOML value (strings via JSON's escaping, which TOML basic strings share)."""
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, str):
        return json.dumps(v)
    return repr(v)


def render(rows: list[dict[str, object]]) -> str:
    """The case file's text."""
    head = [
        "# NIM concurrency sweeps from NVIDIA's 'Sizing LLM Inference Systems' course (GenAI-Perf",
        "# against NIM's TensorRT-LLM engines: Llama-3-8B and -70B on A100-SXM4-80GB and H100 SXM,",
        "# fp16 / bf16 / fp8, TP 1-8, six input/output lengths, 1-250 clients), replayed by",
        "# benchmarks/published.py. A TEST SET but for the A100 rows (`fitted`): the engines'",
        "# token budget (max_num_batched_tokens, not stated by NIM), the first round's spread,",
        "# the 16-bit engines' decode factor (cost.decode_scale) and the engines' KV memory",
        "# (kv.gpu_memory_utilization) were fitted on them, and the",
        "# trtllm 0.10 preset's decode walk and all-reduce handshake on their one-client rows.",
        "#",
        "# Written by `python benchmarks/nim_dli_cases.py` from",
        "# benchmarks/published_runs/nim_dli/nim_sweeps.csv; do not edit by hand.",
        "",
    ]
    body = []
    for row in rows:
        body.append("[[case]]")
        body += [f"{k} = {_value(v)}" for k, v in row.items()]
        body.append("")
    return "\n".join(head + body)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the case file is stale")
    args = ap.parse_args(argv)
    text = render(cases())
    if args.check:
        stale = not OUT.is_file() or OUT.read_text() != text
        print(f"{OUT.name}: {'stale' if stale else 'up to date'}")
        return 1 if stale else 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({text.count('[[case]]')} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
