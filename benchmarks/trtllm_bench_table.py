"""The engine limits ``trtllm-bench build`` took from its per-model table in TensorRT-LLM
0.12 to 0.14, for replaying those releases' performance-overview rows.

Before the sizing heuristic (benchmarks/trtllm_bench_settings.py, read from 0.15 on),
``trtllm-bench build --dataset`` looked its engine's ``max_batch_size`` and
``max_num_tokens`` up in ``tensorrt_llm/bench/build/benchmark_config.yml``: per Hugging
Face model and ``tp<n>_pp<m>``, an entry keyed by the dataset's longest sequence
(ISL + OSL) if there is one, else ``general`` (``get_benchmark_engine_settings`` in
``tensorrt_llm/bench/build/build.py``, search-index file id 3452992086). ``trtllm-bench
throughput`` then ran the engine with those limits, chunked context on
(``ExecutorSettingsConfig.chunking = True``) and guaranteed-no-evict scheduling
(``tensorrt_llm/bench/run/run.py`` and ``run/dataclasses.py``, file ids 2923257844 and
3127467211).

The table below is github:NVIDIA/TensorRT-LLM ``benchmark_config.yml`` at commit 8fcf9fc2
(search-index file id 3302406396), the models servesim's catalogue has. No release tag is
known for that commit. It is taken as 0.12's because its models and TP degrees are exactly
those of 0.12's performance-overview tables (Llama-3-70B at TP 2, Mixtral-8x7B at TP 2
and 4 only). The earlier revision stored (commit 32ed92e4) has no Llama-3-70B TP 2.

0.13 and 0.14 (changed here): the yaml revision they read is not stored, but they still
read one. Their perf-overview pages (file ids 5856956924, 5710131192) document the table
era's build command (``--max_seq_length``, an option only the table-reading build.py has;
the heuristic build.py, file id 6212504592, renamed it ``--max_seq_len``), and 0.15's
page (file id 5939417815) is the first to say the build uses "tuning heuristics". The two
stored yaml revisions differ only by added entries, and the published figures of a
configuration that 0.12, 0.13 and 0.14 all measured agree to 1-3% (median ratio 0.13/0.12
1.00-1.03, 0.14/0.13 1.00-1.03 per model size and TP; 0.15/0.14, the heuristic's first
release, reads 1.02-1.74; ``python benchmarks/published_splits.py releases``), so the
0.12 entries are carried forward for the models and TP degrees they name. Llama-3.1
checkpoints, which 0.13 added, take their Llama-3 twin's entries: the same layer shapes,
and in 0.13 and 0.14 the same published throughput (median ratio 0.998-1.002 at every
TP). Rows
the table does not reach (Llama-2-70B TP 1, Mixtral-8x7B TP 8) keep the older rule
(trtllm_bench_settings.bench_limits).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benchmarks.published_cases import Case

# model -> tp -> {max sequence length or "general": (max_batch_size, max_num_tokens)}
TABLE_012: Mapping[str, Mapping[int, Mapping[int | str, tuple[int, int]]]] = {
    "llama-2-7b": {1: {"general": (4096, 8192)}},
    "llama-2-70b": {2: {"general": (2048, 2048)},
                    4: {"general": (4096, 8192), 4224: (256, 8192)},
                    8: {"general": (8192, 16384), 2176: (1024, 16384)}},
    "llama-3-8b": {1: {"general": (2048, 8192)}},
    "llama-3-70b": {1: {"general": (2048, 2048)},
                    2: {"general": (256, 1024), 4096: (2048, 1024)},
                    4: {"general": (2048, 1024)},
                    8: {"general": (8192, 16384)}},
    "mixtral-8x7b": {2: {"general": (2048, 3072)}, 4: {"general": (8192, 8192)}},
    "mistral-7b": {1: {"general": (4098, 8192)}},
}
# The releases whose trtllm-bench read the table (0.13 and 0.14 carried forward, above)
VERSIONS = ("0.12", "0.13", "0.14")
# Checkpoints the table does not name -> the one of the same architecture whose entries
# they take (0.13 and 0.14 publish the same throughput for both)
SAME_ENGINE: Mapping[str, str] = {"llama-3.1-8b": "llama-3-8b", "llama-3.1-70b": "llama-3-70b"}


def table_limits(case: Case, prompt: Mapping[str, Any], output: Mapping[str, Any],
                 policy: dict[str, Any]) -> list[str]:
    """Set in ``policy`` the limits trtllm-bench 0.12-0.14 built ``case``'s engine with,
    where the case states none; return a note saying so (none when the table has no
    entry)."""
    if (case.stack != "trtllm" or case.stack_version not in VERSIONS
            or "trtllm-bench" not in case.notes or prompt.get("dist") != "fixed"
            or output.get("dist") != "fixed"
            or {"max_num_seqs", "max_num_batched_tokens"} & set(policy)):
        return []
    model = SAME_ENGINE.get(case.model, case.model)
    entries = TABLE_012.get(model, {}).get(case.tp)
    if entries is None:
        return []
    seq = int(prompt["tokens"]) + int(output["tokens"])
    batch, tokens = entries.get(seq, entries["general"])
    policy.update(max_num_seqs=batch, max_num_batched_tokens=tokens, chunked_prefill=True)
    key = f"its {seq}-token entry" if seq in entries else "its general entry"
    if model != case.model:
        key += f" for {model}"
    carried = "" if case.stack_version == "0.12" else \
        f" (carried forward to {case.stack_version})"
    return [f"max_num_seqs {batch}, max_num_batched_tokens {tokens}, chunked context: "
            f"0.12 trtllm-bench's benchmark_config.yml{carried}, {key} "
            "(benchmarks/trtllm_bench_table.py)"]
