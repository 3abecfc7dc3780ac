"""What the HTTP layer costs the engine: served decode steps vs the same steps offline.

    python benchmarks/serve_overhead.py [--requests 32] [--streams 8]

Starts `servesim serve`'s app in-process (tiny, continuous, one thread), streams
``--requests`` requests (64-token id prompts, 32 output tokens) from ``--streams`` client
threads, and reads the server's own step log; then replays the same requests offline
(`engine.serving.replay`, all queued at t = 0). Prints the median duration of full decode
steps (``--streams`` rows) both ways: the server's threads share the GIL with the engine.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx2 as httpx  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from engine.server.app import create_app, start_in_thread  # noqa: E402
from engine.server.live import LiveEngine  # noqa: E402
from engine.server.model import load_served_model  # noqa: E402
from engine.serving import prompt_ids, replay  # noqa: E402
from simulator.policies import make_policy  # noqa: E402

PROMPT, OUTPUT = 64, 32


def decode_median_ms(steps: pd.DataFrame, rows: int) -> float:
    full = steps[(steps["num_prefill_tokens"] == 0) & (steps["num_decode_seqs"] == rows)]
    return float((full["end_s"] - full["start_s"]).median() * 1e3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--streams", type=int, default=8)
    args = ap.parse_args()
    torch.set_num_threads(1)
    em, served = load_served_model("tiny")
    policy = make_policy("continuous", max_num_seqs=args.streams)
    prompts = {i: prompt_ids(i, PROMPT, em.vocab_size) for i in range(args.requests)}
    engine = LiveEngine(em, policy, 512)
    server = start_in_thread(create_app(engine, served))

    def send(i: int) -> None:
        body = {"prompt": prompts[i], "max_tokens": OUTPUT, "stream": True}
        with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=120) as r:
            for _ in r.iter_lines():
                pass

    try:
        with ThreadPoolExecutor(args.streams) as pool:
            list(pool.map(send, range(args.requests)))
        served_steps = engine.snapshot().steps
    finally:
        server.stop()
    table = pd.DataFrame({"request_id": range(args.requests), "arrival_s": 0.0,
                          "prompt_tokens": PROMPT, "output_tokens": OUTPUT})
    offline = replay(table, em, policy, 512, prompts=prompts).result.steps
    s, o = decode_median_ms(served_steps, args.streams), decode_median_ms(offline, args.streams)
    print(f"median {args.streams}-row decode step: served {s:.1f} ms, offline {o:.1f} ms, "
          f"served/offline {s / o:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
