"""vLLM #17885's A100 check: Llama-3.1-70B on 2 and 4 A100-80GB, before and after V1 went
back to 256 sequences and 2,048-token steps on the A100.

    python benchmarks/vllm_a100_budget.py

vllm-project/vllm#17885 (2025-05-09) measured ``benchmark_serving`` with 400 ShareGPT
prompts at request rate inf against ``vllm serve --max-model-len 10000
--gpu-memory-utilization 0.95``, "Token throughput" 1,054 -> 1,438 tok/s at TP 2 and
3,053 -> 2,994 at TP 4. The column does not say output or total tokens, so it is not a
published case (benchmarks/published_cases*.toml); this replays both settings (the
``vllm-v1 0.8.5`` preset: 1024 sequences, 8192 tokens on the A100-80GB; ``0.9``: 256 and
2048) with the ShareGPT lengths the other replays use (means 215 / 199, the benchmark
tools' filter) and prints the relative change beside the PR's. docs/gpu-profiles.md,
"vLLM V1 runs", quotes it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.published_lengths import sharegpt_lengths  # noqa: E402
from simulator.runner import run_point  # noqa: E402

PUBLISHED = {2: (1054.01, 1438.49), 4: (3053.03, 2994.03)}  # tp -> before, after (#17885)
RELEASES = ("0.8.5", "0.9")  # before and after the PR


def point(trace: Path, tp: int, version: str) -> dict:
    """The PR's server and client on ``tp`` A100-80GB under ``vllm-v1 version``."""
    return {"name": f"pr17885-tp{tp}-{version}", "seed": 0,
            "model": {"name": "llama-3.1-70b", "weight_dtype": "bf16", "kv_dtype": "bf16"},
            "hardware": {"gpu": "a100-80gb", "tp": tp},
            "workload": {"arrival": "poisson", "rate": 1e9, "num_requests": 400,
                         "trace": str(trace)},
            "policy": {"max_model_len": 10_000}, "kv": {"gpu_memory_utilization": 0.95},
            "stack": {"name": "vllm-v1", "version": version}}


def main() -> int:
    folder = Path(tempfile.gettempdir()) / "servesim-published"
    trace, kept = sharegpt_lengths({"dist": "lognormal", "mean": 215, "sigma": 1.0},
                                   {"dist": "lognormal", "mean": 199, "sigma": 0.9}, 400, folder)
    print(f"400 ShareGPT-shaped requests at once: {kept}")
    for tp, (before, after) in PUBLISHED.items():
        sims = []
        for version in RELEASES:
            res = run_point({}, point(trace, tp, version))
            s, policy = res.summary, res.deployment.policy
            sims.append(s["total_token_throughput"])
            print(f"TP {tp} vllm-v1 {version}: {policy.max_num_seqs} sequences, "
                  f"{policy.max_num_batched_tokens} tokens a step; total "
                  f"{s['total_token_throughput']:,.0f} tok/s, output "
                  f"{s['output_throughput']:,.0f} tok/s, {s['num_preemptions']} preemptions")
        print(f"TP {tp}: simulated {sims[1] / sims[0] - 1:+.1%}, published "
              f"{after / before - 1:+.1%} ({before:,.0f} -> {after:,.0f} 'Token throughput')")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
