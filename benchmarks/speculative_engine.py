"""Speculative decoding measured on THIS machine: SmolLM2-135M drafting with its first L layers.

Runs the engine's greedy speculative decoding (engine/speculative.py; the draft shares the
target's weights and KV cache, engine/speculative_draft.py) on real chat prompts and
prints, for this CPU:

1. Acceptance per draft depth L: the distribution of drafts accepted per row-step, 0..k
   (rows given all k drafts), and the mean. Measured once at ``--kmax``; for a smaller k
   it is the same distribution with the tail folded into ``k`` (greedy drafts do not
   depend on k, so the leading matches of the first k drafts are exactly ``min(N, k)``).
   Every speculative output is checked token for token against plain greedy decoding.
2. Step costs at batch 1, 2, 4, 8, 16: a plain decode step, one draft pass, the verify
   pass (1 + k tokens a row), and the speed-up TPOT plain / TPOT speculative, where TPOT
   is (finish - first token) / (outputs - 1) per request on a clock of the decode steps'
   CPU seconds (one torch thread, so CPU time is the work, not the machine's contention),
   median of ``--repeats`` runs. ``break-even`` is the tokens per step a draft of that
   cost must reach for a speed-up of 1: (k x draft pass + verify) / plain step.

``--json out.json`` writes the acceptance distributions in the form of the scenario
section ``[speculative] acceptance_counts`` (simulator/speculative_section.py).

    .venv/bin/python benchmarks/speculative_engine.py [--quick] [--json out.json]

A default run takes about 5-10 minutes on 2 shared vCPUs; ``--quick`` about 2.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from engine.models import EngineModel
from engine.pretrained import SMOLLM2, load_engine_model, load_tokenizer
from engine.speculative_draft import layer_draft
from engine.speculative_loop import LoopRun, generate

QUESTIONS = (
    "What is the capital of France?", "Write a haiku about the sea.",
    "List three primary colors.", "Explain what a CPU does in one sentence.",
    "Give me a recipe for pancakes.", "What is 12 times 7?",
    "Translate 'good morning' into Spanish.", "Name the planets of the solar system.",
    "Why is the sky blue?", "Suggest a name for a black cat.",
    "What does DNA stand for?", "Write a short poem about autumn leaves.",
    "How many days are in a leap year?", "What is the boiling point of water?",
    "Describe a rainbow to a child.", "Give two tips for better sleep.",
    "Who wrote Romeo and Juliet?", "What is photosynthesis?",
    "Write a polite email declining a meeting.", "What is the largest ocean on Earth?",
    "Summarize the plot of Cinderella in two sentences.", "What is a prime number?",
    "How do I boil an egg?", "Tell me a fun fact about octopuses.",
    "What is the difference between weather and climate?", "Write a limerick about a frog.",
    "Name three programming languages.", "What causes the seasons?",
    "How far is the Moon from the Earth?", "What is the capital of Japan?",
    "Give me a synonym for happy.", "Explain gravity in simple words.",
)


def machine() -> str:
    """CPU model, cores, torch threads and load, as measured here."""
    model = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path(
        "/proc/loadavg").exists() else "n/a"
    return (f"{model}; {os.cpu_count()} logical CPUs; torch {torch.__version__}, "
            f"{torch.get_num_threads()} thread(s); loadavg {load}")


def chat_prompts(n: int) -> list[list[int]]:
    """The first ``n`` questions through SmolLM2's chat template, as token ids."""
    tok = load_tokenizer(SMOLLM2)
    if tok is None:
        raise SystemExit("SmolLM2's tokenizer is missing from the cache")
    return [tok.apply_chat_template([{"role": "user", "content": q}],
                                    add_generation_prompt=True)["input_ids"]
            for q in QUESTIONS[:n]]


def batched(em: EngineModel, prompts: list[list[int]], new: int, batch: int,
            draft: EngineModel | None = None, k: int = 0) -> list[LoopRun]:
    """:func:`generate` over ``prompts`` in batches of ``batch``."""
    return [generate(em, prompts[i:i + batch], new, draft=draft, k=k)
            for i in range(0, len(prompts), batch)]


def acceptance(em: EngineModel, prompts: list[list[int]], plain: list[list[int]],
               layers: int, kmax: int, new: int) -> list[float]:
    """P(j drafts accepted), j = 0..kmax, over row-steps given all ``kmax`` drafts."""
    runs = batched(em, prompts, new, 16, layer_draft(em, layers), kmax)
    outputs = [o for r in runs for o in r.outputs]
    if outputs != plain:
        raise AssertionError(f"L={layers}: speculative tokens differ from plain greedy")
    counts = [0] * (kmax + 1)
    for r in runs:
        for step in r.steps:
            for a, d in zip(step.accepted, step.drafted, strict=True):
                if d == kmax:
                    counts[a] += 1
    total = sum(counts)
    return [c / total for c in counts]


def fold(p: list[float], k: int) -> list[float]:
    """The distribution at ``k`` drafts from one measured at more: the tail folds into k."""
    return [*p[:k], sum(p[k:])]


def timing(em: EngineModel, prompts: list[list[int]], batch: int, configs: list[tuple[int, int]],
           new: int, repeats: int) -> dict[str, Any]:
    """Median step costs and TPOTs (CPU seconds) at ``batch``, plain and per (L, k)."""
    drafts = {c: layer_draft(em, c[0]) for c in configs}
    plain_steps: list[float] = []
    plain_tpot: list[float] = []
    spec: dict[tuple[int, int], dict[str, list[float]]] = {
        c: {"draft": [], "verify": [], "tpot": [], "tokens": []} for c in configs}
    for _ in range(repeats):  # interleaved: a slow spell of the machine hits every config
        run = generate(em, prompts[:batch], new)
        plain_steps += [s.cpu_s for s in run.steps]
        plain_tpot.append(statistics.fmean(run.tpot_s()))
        for c in configs:
            layers, k = c
            r = generate(em, prompts[:batch], new, draft=drafts[c], k=k)
            if r.outputs != run.outputs:
                raise AssertionError(f"L={layers} k={k} batch {batch}: tokens differ")
            full = [s for s in r.steps if max(s.drafted) == k]
            spec[c]["draft"] += [s.draft_cpu_s / k for s in full]
            spec[c]["verify"] += [s.verify_cpu_s for s in full]
            spec[c]["tpot"].append(statistics.fmean(r.tpot_s()))
            spec[c]["tokens"] += [1 + statistics.fmean(s.accepted) for s in full]
    out: dict[str, Any] = {"batch": batch, "plain_step_s": statistics.median(plain_steps),
                           "plain_tpot_s": statistics.median(plain_tpot), "spec": {}}
    for (layers, k), m in spec.items():
        out["spec"][f"L{layers}_k{k}"] = {
            "layers": layers, "k": k,
            "draft_pass_s": statistics.median(m["draft"]),
            "verify_s": statistics.median(m["verify"]),
            "tokens_per_step": statistics.fmean(m["tokens"]),
            "tpot_s": statistics.median(m["tpot"]),
            "speedup": out["plain_tpot_s"] / statistics.median(m["tpot"]),
        }
    return out


def print_tables(acc: dict[int, list[float]], kmax: int, rows: list[dict[str, Any]]) -> None:
    print(f"\nAcceptance: P(j drafts accepted) per row-step given k = {kmax} drafts")
    print(f"{'L':>4} " + " ".join(f"{'P' + str(j):>7}" for j in range(kmax + 1))
          + f" {'mean acc':>9} {'alpha~':>7}")
    for layers, p in acc.items():
        mean = sum(j * pj for j, pj in enumerate(p))
        alpha = 1 - p[0]  # P(first draft accepted)
        print(f"{layers:>4} " + " ".join(f"{pj:7.3f}" for pj in p) + f" {mean:9.3f} {alpha:7.3f}")
    print("\nStep costs (ms of CPU, medians) and speed-up TPOT plain / TPOT speculative")
    print(f"{'batch':>5} {'config':>8} {'plain':>7} {'draft/pass':>10} {'verify':>7} "
          f"{'ver/plain':>9} {'tok/step':>8} {'break-even':>10} {'TPOT pl':>8} "
          f"{'TPOT sp':>8} {'speed-up':>8}")
    for row in rows:
        for name, s in row["spec"].items():
            plain = row["plain_step_s"]
            even = (s["k"] * s["draft_pass_s"] + s["verify_s"]) / plain
            print(f"{row['batch']:>5} {name:>8} {plain * 1e3:7.1f} {s['draft_pass_s'] * 1e3:10.1f} "
                  f"{s['verify_s'] * 1e3:7.1f} {s['verify_s'] / plain:9.2f} "
                  f"{s['tokens_per_step']:8.2f} {even:10.2f} {row['plain_tpot_s'] * 1e3:8.1f} "
                  f"{s['tpot_s'] * 1e3:8.1f} {s['speedup']:7.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer prompts, tokens and repeats")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--kmax", type=int, default=4, help="drafts for the acceptance runs")
    ap.add_argument("--json", type=Path, help="write acceptance_counts and timings here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    quick = args.quick
    layer_set = (8, 16, 24, 28) if not quick else (8, 24)
    configs = [(8, 3), (24, 3), (30, 3)] if not quick else [(8, 3), (30, 3)]
    batches = (1, 2, 4, 8, 16)
    print(f"Measured on this machine: {machine()}")
    t0, c0 = time.perf_counter(), time.process_time()
    em = load_engine_model(SMOLLM2)
    prompts = chat_prompts(16 if quick else 32)
    new = 16 if quick else 24
    plain = [o for r in batched(em, prompts, new, 16) for o in r.outputs]
    acc = {layers: acceptance(em, prompts, plain, layers, args.kmax, new) for layers in layer_set}
    rows = [timing(em, prompts, b, configs, 10 if quick else 12, 2 if quick else 3)
            for b in batches]
    print_tables(acc, args.kmax, rows)
    print(f"\n{len(prompts)} chat prompts, {new} tokens each (acceptance); every speculative "
          f"output equalled plain greedy decoding. Took {time.perf_counter() - t0:.0f} s wall, "
          f"{time.process_time() - c0:.0f} s CPU; loadavg now "
          f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    if args.json:
        doc = {
            "machine": machine(), "model": SMOLLM2, "kmax": args.kmax,
            "acceptance_counts": {
                f"L{layers}": {str(k): fold(p, k) for k in range(1, args.kmax + 1)}
                for layers, p in acc.items()},
            "timing": rows,
        }
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
