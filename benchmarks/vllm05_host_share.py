"""vLLM 0.5's per-token host cost, from vLLM's own profile of v0.5.3 (the v0.6.0 blog).

    python benchmarks/vllm05_host_share.py

The vLLM team's v0.6.0 blog (blog.vllm.ai/2024/09/05/perf-update.html, "Performance
Diagnosis") profiled v0.5.3 serving Llama 3 8B on one H100: the HTTP API server took 33% of
the time, 29% went to "scheduling, including gathering the LLM results from the last step,
scheduling the requests to run for the next step, and preparing these requests as inputs",
and 38% to GPU execution. v0.5.4 moved the API server to its own process
(vllm-project/vllm#6883); the engine loop kept the rest, blocking: 29 parts of host work to
38 of GPU work. v0.6.0 overlapped the output processing with the next step
(vllm-project/vllm#7049) and cut the rest; the ``vllm-v0 0.6`` preset has only a fixed
cost per step.

This finds the per-output-token cost (``token_s``, blocking: detokenising, building the
request outputs, scheduling and preparing each row; all of it grows with the rows of a
step) that, added to the 0.6 preset's host costs, gives that 29 : 38 split (0.5.4 and
0.5.5) or, with the API server's 33 in the engine's process and interpreter, 62 : 38
(0.5.0 to 0.5.3) on the blog's workload: Llama-3-8B on one H100 SXM, 500 ShareGPT prompts
at once (the blog's benchmark: "500 prompts randomly sampled from ShareGPT", "average input
tokens: 202, average output tokens: 179"; log-normal lengths with those means, kept by the
benchmark tools' filter, as the other ShareGPT replays draw them).
The engine's host time is ``steps x step_s + token_s x output tokens`` (no chunked prefill
here: a request's first token comes from the step that admits it), its GPU time the rest
of the busy time. A fixed point: the GPU time depends on the batches, which depend on
``token_s``. ``simulator/stack_presets.py`` (``VLLM_05_TOKEN_S``, ``VLLM_054_TOKEN_S``)
holds the results; ``--check`` runs the two presets and prints their splits.

``--ratios`` checks the result against the blog's other figure, its headline: v0.6.0 served
2.7x v0.5.3's throughput on Llama 8B (one H100) and 1.8x on Llama 70B (four H100s), 500
ShareGPT prompts. It prints output throughput under ``vllm-v0 0.6`` with multi-step
scheduling of 10 (the blog's v0.6.0 runs used multi-step; 10 is what the same week's
sgl-project/sglang benchmark/benchmark_vllm_060 README ran) over ``vllm-v0 0.5``'s.

``--multistep`` checks the blog's credit for multi-step scheduling (+28% throughput on Llama
70B, four H100s): output throughput under ``vllm-v0 0.6`` with 10 scheduler steps over 1,
as the presets charge host costs (every pass), and with ``step_s`` and the multi-GPU
``seq_s`` divided by 10 on every step (about once per 10-pass run; docs/stacks.md).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.published_lengths import sharegpt_lengths  # noqa: E402
from simulator.costs.host import split_host  # noqa: E402
from simulator.runner import run_point  # noqa: E402
from simulator.specs.models import get_model  # noqa: E402
from simulator.stacks import STACKS  # noqa: E402

GPU_PARTS = 38.0  # the blog's "GPU execution" share
# host parts each release's engine loop waits for: "scheduling" (29), and from 0.5.4 on
# without the API server's 33 (its own process since vllm-project/vllm#6883)
HOST_PARTS = {"0.5": 29.0 + 33.0, "0.5.4": 29.0}
PROMPTS, MEAN_IN, MEAN_OUT = 500, 202, 179  # the blog's ShareGPT benchmark
BLOG_RATIOS = {("llama-3-8b", 1): 2.7, ("llama-3-70b", 4): 1.8}  # v0.6.0 / v0.5.3 throughput


def blog_trace(folder: Path) -> tuple[Path, str]:
    """The blog's ShareGPT sample as a request table in ``folder`` (and its means)."""
    return sharegpt_lengths({"mean": MEAN_IN, "sigma": 1.0}, {"mean": MEAN_OUT, "sigma": 0.9},
                            PROMPTS, folder)


def point(trace: Path, token_s: float | None, version: str = "0.6") -> dict:
    """Llama-3-8B on one H100 SXM under ``vllm-v0 version`` with ``token_s`` on top of the
    preset's host costs (the scenario's own term wins)."""
    cost = {} if token_s is None else {"overhead": {"token_s": token_s}}
    return {"name": f"vllm05-host-share-{version}", "seed": 0,
            "model": {"name": "llama-3-8b", "weight_dtype": "bf16", "kv_dtype": "bf16"},
            "hardware": {"gpu": "h100-sxm", "tp": 1},
            "workload": {"arrival": "poisson", "rate": 1e9, "num_requests": PROMPTS,
                         "trace": str(trace)},
            "run": {"step_log": "full"}, "cost": cost,
            "stack": {"name": "vllm-v0", "version": version}}


def output_throughput(trace: Path, model: str, tp: int, version: str, steps: int = 1,
                      host: dict[str, float] | None = None) -> float:
    """Output throughput of ``model`` on ``tp`` H100s under ``vllm-v0 version`` with
    ``steps`` scheduler steps and ``host`` costs over the preset's."""
    p = point(trace, None, version)
    p.update(model={**p["model"], "name": model}, hardware={"gpu": "h100-sxm", "tp": tp},
             policy={"num_scheduler_steps": steps}, run={},
             cost={"overhead": host} if host else {})
    return float(run_point({}, p).summary["output_throughput"])


def throughput_ratio(trace: Path, model: str, tp: int) -> float:
    """Output throughput of ``vllm-v0 0.6`` with 10 scheduler steps over ``vllm-v0 0.5``'s
    on ``tp`` H100s."""
    return (output_throughput(trace, model, tp, "0.6", steps=10)
            / output_throughput(trace, model, tp, "0.5"))


def multistep_gains(trace: Path, model: str, tp: int) -> tuple[float, float]:
    """``vllm-v0 0.6`` with 10 scheduler steps over 1: host costs on every pass (the
    presets), and ``step_s`` / ``seq_s`` divided by 10 (about once per run)."""
    host = point_host_costs(model, tp)
    once = {k: host[k] / 10 for k in ("step_s", "seq_s") if k in host}
    one = output_throughput(trace, model, tp, "0.6")
    return (output_throughput(trace, model, tp, "0.6", steps=10) / one,
            output_throughput(trace, model, tp, "0.6", steps=10, host=once) / one)


def point_host_costs(model: str, tp: int) -> dict[str, float]:
    """The ``vllm-v0 0.6`` preset's host costs for ``model`` on ``tp`` GPUs."""
    preset = next(p for p in STACKS["vllm-v0"] if p.version == "0.6")
    return preset.host_costs(get_model(model).num_layers, tp)


def host_share(trace: Path, token_s: float | None, version: str = "0.6"
               ) -> tuple[float, float, float, float]:
    """(host s, GPU s, steps, output tokens) of one run; ``token_s`` None: the preset's."""
    res = run_point({}, point(trace, token_s, version))
    steps, (_, overhead) = res.result.steps, split_host(res.deployment.cost)
    busy = float((steps["end_s"] - steps["start_s"]).sum())
    tokens = float(res.summary["total_output_tokens"])
    host = len(steps) * overhead.step_s + overhead.token_s * tokens
    return host, busy - host, float(len(steps)), tokens


def fit(trace: Path, host_parts: float, rounds: int = 2) -> float:
    """``token_s`` giving host : GPU = ``host_parts`` : 38 (fixed-point iteration, printed;
    a burst's batches do not depend on the step times, so the first round gives it and the
    second shows the split it makes)."""
    token_s, target = 0.0, host_parts / GPU_PARTS
    for i in range(rounds):
        host, gpu, steps, tokens = host_share(trace, token_s)
        print(f"  round {i}: token_s {token_s * 1e6:6.2f} us -> host {host:6.3f} s, "
              f"GPU {gpu:6.3f} s, host/GPU {host / gpu:.3f} (target {target:.3f}), "
              f"{steps:.0f} steps, {tokens:.0f} tokens")
        step_part = host - token_s * tokens
        token_s = (target * gpu - step_part) / tokens
    return token_s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="also run the vllm-v0 0.5 and 0.5.4 presets and print their splits")
    ap.add_argument("--ratios", action="store_true",
                    help="also print 0.6 (multi-step 10) over 0.5 against the blog's ratios")
    ap.add_argument("--multistep", action="store_true",
                    help="also print 0.6's multi-step 10 over 1, host costs per pass and "
                         "about once per run, against the blog's +28%% on 70B")
    args = ap.parse_args(argv)
    folder = Path(tempfile.gettempdir()) / "servesim-published"
    trace, kept = blog_trace(folder)
    print(f"{PROMPTS} ShareGPT-shaped requests at once: {kept}")
    for version, parts in HOST_PARTS.items():
        print(f"vllm-v0 {version}: host : GPU = {parts:g} : {GPU_PARTS:g}")
        token_s = fit(trace, parts)
        print(f"  token_s = {token_s * 1e6:.1f} us per output token")
        if args.check:
            host, gpu, _, _ = host_share(trace, None, version)
            print(f"  the vllm-v0 {version} preset: host/GPU {host / gpu:.3f} (host "
                  f"{host / (host + gpu):.0%} of the engine's busy time)")
    if args.ratios:
        for (model, tp), published in BLOG_RATIOS.items():
            print(f"{model} on {tp} H100: 0.6 (multi-step 10) / 0.5 output throughput "
                  f"{throughput_ratio(trace, model, tp):.2f}x, the blog {published}x")
    if args.multistep:
        for model, tp in BLOG_RATIOS:
            per_pass, per_run = multistep_gains(trace, model, tp)
            print(f"{model} on {tp} H100: vllm-v0 0.6 multi-step 10 over 1: host costs every "
                  f"pass {per_pass - 1:+.1%}, step_s/seq_s about once a run "
                  f"{per_run - 1:+.1%} (the blog: +28% on 70B, four H100s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
