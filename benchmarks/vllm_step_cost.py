"""The fit behind the vLLM presets' per-step host cost (simulator/stack_presets.py).

Replays vLLM's six nightly latency cases (benchmarks/published_cases.toml,
``vllm-nightly-*-latency-*``: a batch of 8 prompts of 32 tokens decoding 128) under the
vLLM preset with the per-step host cost set to 0, and prints, per case, the simulated and
published batch latency and the step cost the difference implies: (published - simulated)
/ steps, with steps = 1 prefill + 128 decodes. Then the median per layer, which the presets
use (``step_s`` per layer in VLLM_DISPATCH). Usage: ``python benchmarks/vllm_step_cost.py``.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from published import simulated_value  # noqa: E402
from published_cases import load_cases, scenario_point, stack_accepted  # noqa: E402

from simulator.runner import run_point  # noqa: E402
from simulator.specs.models import get_model  # noqa: E402

STEPS = 1 + 128  # one prefill step, then one decode step per output token after the first


def main() -> None:
    cases = [c for c in load_cases() if c.id.startswith("vllm-nightly")
             and "batch_latency_ms" in c.metrics]
    per_layer = []
    print(f"{'case':<46} {'sim ms':>9} {'pub ms':>9} {'implied step ms':>16} {'per layer':>10}")
    for case in cases:
        point, _ = scenario_point(case, max_prompts=1000, use_stack=True,
                                  burst_rate=float("inf"))
        point, _ = stack_accepted(point, case)
        point["cost"] = {"overhead": {"step_s": 0.0}}  # the preset's step cost left out
        sim = simulated_value("batch_latency_ms", run_point({}, point).summary)
        assert sim is not None
        pub = case.metrics["batch_latency_ms"]
        implied = (pub - sim) / STEPS
        layers = get_model(case.model).num_layers
        per_layer.append(implied / layers)
        print(f"{case.id:<46} {sim:9.1f} {pub:9.1f} {implied:16.3f} {implied / layers:10.4f}")
    print(f"median per layer: {statistics.median(per_layer):.4f} ms "
          f"(the presets use 0.039 ms x layers)")


if __name__ == "__main__":
    main()
