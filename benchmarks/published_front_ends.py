"""The API servers in front of published runs' engines whose token stream is priced: the
``[cost] overhead`` ``stream_s`` a case's replay adds (simulator/token_stream.py).

NIM serves its TensorRT-LLM engine through its own OpenAI-compatible server, which hands
out the engine's tokens one at a time. NIM 1.8.0's benchmarking page (the Llama-3.1-8B fp8
table, one H100) reports 13,348 output tokens a second at 200 clients and 12,965 at 250:
output stops growing with the clients while the engine alone would go on (the replay
without a stream: 19,322 at 250). So the server hands out a token in at most 1 / 13,348 s,
74.9 us: ``NIM_STREAM_S``, taken from that one published figure (no case is fitted on
it; the 200-client row is not among the cases). NIM 1.0's course sweeps level off the same
way on two H100s (Llama-3-8B fp8 200/200: 12,508 at 200 clients, 11,885 at 250), and get the
same server: docs/stacks.md, "NIM's token stream".

NIM 1.8.0's server also takes a request's time before the engine sees it (``request_s``:
its HTTP handling and tokenising, not blocking the engine), ``NIM_18_REQUEST_S``, fitted on
the page's eight one-client rows (python benchmarks/published_fit.py --case
nim1.8.0-h100-sxm-llama-3.1-8b-fp8-tp1-200-200-c1 --case ... (each length pair of both
models at one client) --terms request_s --flat --high 20 --heldout nim1.8: docs/stacks.md,
"NIM 1.8's request time"). NIM 1.0's course rows at one client read slow already on one
GPU, so its server gets none.
"""

from __future__ import annotations

NIM_STREAM_S = 1.0 / 13348.0  # s a token: NIM 1.8.0's highest published output rate
NIM_VERSIONS = "nim-"  # Case.stack_version of the NIM cases: nim-1.0, nim-1.8
NIM_18_REQUEST_S = 2.837e-3  # s a request: NIM 1.8.0's server before the engine sees it
NIM_18 = "nim-1.8"


def front_end_host(stack_version: str) -> dict[str, float]:
    """The ``[cost] overhead`` terms of the server in front of a case's engine ({} for
    none priced)."""
    if not stack_version.startswith(NIM_VERSIONS):
        return {}
    request = {"request_s": NIM_18_REQUEST_S} if stack_version == NIM_18 else {}
    return {"stream_s": NIM_STREAM_S, **request}


def front_end_note(stack_version: str) -> str:
    """What the replay adds for the case's server ("" where nothing)."""
    host = front_end_host(stack_version)
    if not host:
        return ""
    request = host.get("request_s")
    takes = (f"; it takes {request * 1e3:.4g} ms a request before the engine sees it "
             "(cost.overhead.request_s, fitted on NIM 1.8.0's one-client rows)"
             if request else "")
    return (f"NIM's API server streams each output token in {NIM_STREAM_S * 1e6:.1f} us, "
            "one at a time (cost.overhead.stream_s: 1 / 13,348 tok/s, NIM 1.8.0's highest "
            f"published rate){takes}; benchmarks/published_front_ends.py")
