"""Benchmark harnesses that load the engine they measure: the host cost a case's runner adds.

A published run measures the engine through some program. Most are clients in another
process (vLLM's ``benchmark_serving``, GenAI-Perf, perf_analyzer) and cost the engine
nothing; a case says how they send (``workload.client``). A few run the engine in their
own Python process and stream every token through it, so their own per-token work sits on
the engine's critical path. ``Case.harness`` names such a runner; :func:`harness_host`
gives the ``[cost] overhead`` terms the replay adds for it (term by term over the stack
preset's, simulator/stacks.py ``apply_stack``).

``accelmark``: FreedomIntelligence/AccelMark's reference vLLM runner (``vllm.LLM`` offline,
``AsyncLLMEngine`` with streaming online, one process, no HTTP server). With vLLM 0.7.3's
V0 engine the engine loop and its output processing (and, online, the runner's streaming
consumers) share one process and one GIL; with V1 (0.20) the engine core runs in its own
process (``VLLM_ENABLE_V1_MULTIPROCESSING``), so nothing is added there. ``token_s`` is one
number fitted on one of its runs (``ACCELMARK_FIT``) and scored on the other 115 of its
V0 cases, offline and online (docs/gpu-profiles.md, "AccelMark's runner: a per-token host
cost", which says why it is carried by the harness and not by a vLLM 0.7 preset).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# s per output token, blocking (flat: the same for every model), on the engines the runner
# shares a process with
ACCELMARK_TOKEN_S = 76.7e-6
ACCELMARK_FIT = (
    "python benchmarks/published_fit.py --case "
    "vllm-v0-0.7-accelmark-h100-sxm-llama-3-8b-tp1-A-online300-qps25-831c95a7 "
    "--terms token_s --flat --heldout vllm-v0-0.7-accelmark")
# harness -> (the stacks whose engine runs in the harness's process, its host terms, the
# command that fitted them)
HARNESSES: Mapping[str, tuple[tuple[str, ...], Mapping[str, float], str]] = MappingProxyType({
    "accelmark": (("vllm-v0",), MappingProxyType({"token_s": ACCELMARK_TOKEN_S}),
                  ACCELMARK_FIT),
})


def harness_host(harness: str, stack: str) -> dict[str, float]:
    """The ``[cost] overhead`` terms ``harness`` adds to a ``stack`` engine ({} for none,
    or where the engine runs in a process of its own)."""
    if not harness:
        return {}
    stacks, host, _ = HARNESSES[harness]
    return dict(host) if stack in stacks else {}


def harness_note(harness: str, stack: str) -> str:
    """What the replay added for the case's harness ("" where nothing)."""
    host = harness_host(harness, stack)
    if not host:
        return ""
    terms = ", ".join(f"{k} {v * 1e6:g} us" for k, v in host.items())
    return (f"harness {harness}: the runner shares the engine's process, host {terms} "
            f"(fitted: {HARNESSES[harness][2]})")
