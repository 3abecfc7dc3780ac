"""Prefix caching through whole runs: a shared system prompt, sessions, the Mooncake sample."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simulator.errors import ConfigError
from simulator.runner import run_point
from simulator.workload.build import build_requests
from simulator.workload.config import WorkloadConfig

SHARED = Path(__file__).parents[1].parent / "shared" / "traces"
MOONCAKE = SHARED / "mooncake_conversation.head1000.jsonl"


def point(kv: dict[str, Any], workload: dict[str, Any], **policy: Any) -> dict[str, Any]:
    """A scenario point on Llama-3.1-8B, one H100 (roofline costs)."""
    return {"name": "t", "seed": 3, "model": {"name": "llama-3.1-8b"},
            "hardware": {"gpu": "h100-sxm"}, "kv": kv,
            "policy": {"name": "chunked", **policy}, "workload": workload}


SYSTEM = {"arrival": "poisson", "rate": 4.0, "num_requests": 120, "system_prompt_tokens": 1000,
          "prompt": {"dist": "lognormal", "mean": 150, "sigma": 0.8},
          "output": {"dist": "lognormal", "mean": 100, "sigma": 0.8}}


def test_a_shared_system_prompt_saves_992_prefill_tokens_per_later_request() -> None:
    off = run_point({}, point({}, SYSTEM))
    on = run_point({}, point({"prefix_caching": True}, SYSTEM))
    n = 120
    # every request starts with the same 1,000 tokens: floor(1000 / 16) = 62 full blocks,
    # 62 x 16 = 992 tokens, are cached once the first request is scheduled
    saved = (n - 1) * (1000 // 16) * 16
    prefill_off = int(off.result.steps["num_prefill_tokens"].sum())
    prefill_on = int(on.result.steps["num_prefill_tokens"].sum())
    assert prefill_off - prefill_on == saved
    assert on.summary["prefill_tokens_saved"] == on.summary["prefix_cached_tokens"] == saved
    prompts = int(on.result.requests["prompt_tokens"].sum())
    assert on.summary["prefix_hit_rate"] == pytest.approx(saved / prompts, rel=1e-12)
    assert on.summary["prefix_evictions"] == 0
    cached = on.result.requests.sort_values("request_id")["cached_tokens"].to_numpy()
    assert cached[0] == 0 and (cached[1:] == 992).all()
    assert on.summary["mean_ttft_ms"] < off.summary["mean_ttft_ms"]
    assert "prefix_hit_rate" not in off.summary and "cached_tokens" not in off.result.requests


def test_a_share_of_requests_with_one_of_two_prompts() -> None:
    wl = {**SYSTEM, "system_prompt_share": 0.5, "system_prompts": 2}
    table = build_requests(WorkloadConfig.from_dict(wl), np.random.default_rng(3), None).table
    plain = build_requests(WorkloadConfig.from_dict(
        {k: v for k, v in SYSTEM.items() if k != "system_prompt_tokens"}),
        np.random.default_rng(3), None).table
    with_prompt = (table["segments_stop"] > table["segments_start"]).to_numpy()
    added = (table["prompt_tokens"] - plain["prompt_tokens"]).to_numpy()
    assert ((added == 1000) == with_prompt).all() and ((added == 0) == ~with_prompt).all()
    assert 0.35 < with_prompt.mean() < 0.65  # 120 draws of a fair coin
    run = run_point({}, point({"prefix_caching": True}, wl))
    # one miss per distinct prompt used, 992 tokens per later request with a prompt
    built = build_requests(WorkloadConfig.from_dict(wl), np.random.default_rng(3), None)
    ids = built.segments.ids[table["segments_start"][with_prompt]] if built.segments else []
    expected = (int(with_prompt.sum()) - len(set(ids.tolist()))) * 992
    assert run.summary["prefix_cached_tokens"] == expected


SESSIONS = {"arrival": "closed", "concurrency": 4, "think_time_s": 1.0, "session_turns": 3,
            "num_requests": 24, "prompt": {"dist": "lognormal", "mean": 100, "sigma": 0.5},
            "output": {"dist": "lognormal", "mean": 40, "sigma": 0.5}}


def test_each_turn_extends_the_last_and_the_seed_fixes_everything() -> None:
    cfg = WorkloadConfig.from_dict(SESSIONS)
    a = build_requests(cfg, np.random.default_rng(5), None)
    b = build_requests(cfg, np.random.default_rng(5), None)
    assert a.table.equals(b.table) and a.segments is not None and b.segments is not None
    assert (a.segments.ids == b.segments.ids).all()
    drawn = build_requests(WorkloadConfig.from_dict(
        {k: v for k, v in SESSIONS.items() if k != "session_turns"}),
        np.random.default_rng(5), None).table
    t, d = a.table, drawn
    # client 0 sends rows 0, 4, 8 (session 0: turns 0, 1, 2) then 12, 16, 20 (session 1)
    p, o, u = t["prompt_tokens"], t["output_tokens"], d["prompt_tokens"]
    assert p[0] == u[0] and p[4] == p[0] + o[0] + u[4] and p[8] == p[4] + o[4] + u[8]
    assert p[12] == u[12]  # a new session starts afresh
    seg = a.segments.ids[t["segments_start"]]
    assert seg[0] == seg[4] == seg[8] != seg[12] and seg[0] != seg[1]


def test_later_turns_hit_the_earlier_turns_prompt_and_output() -> None:
    run = run_point({}, point({"prefix_caching": True}, SESSIONS))
    rec = run.result.requests.sort_values("request_id").reset_index(drop=True)
    first_turns = rec.index % 12 < 4  # rows 0-3 and 12-15 start sessions
    assert (rec["cached_tokens"][first_turns] == 0).all()
    # turn t's prompt starts with turn t-1's prompt + output, whose last token never
    # had its KV computed: (prompt + output - 1) // 16 full blocks are cached
    prev = rec.shift(4)
    expect = ((prev["prompt_tokens"] + prev["output_tokens"] - 1) // 16 * 16)[~first_turns]
    assert (rec["cached_tokens"][~first_turns] == expect.astype(np.int64)).all()


@pytest.mark.skipif(not MOONCAKE.exists(), reason="../shared/traces absent (public samples)")
def test_mooncake_hit_rate_equals_a_count_of_repeated_block_prefixes() -> None:
    rows = [json.loads(line) for line in MOONCAKE.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["input_length"] > 0 and r["output_length"] > 0]
    rows.sort(key=lambda r: r["timestamp"])  # stable, as the loader
    seen: set[tuple[tuple[int, ...], int]] = set()
    hit = total = 0
    for r in rows:  # block j of 16 tokens lies in hash id j * 16 // 512
        p, ids = r["input_length"], r["hash_ids"]
        keys = [(tuple(ids[:j * 16 // 512 + 1]), j) if j * 16 // 512 < len(ids) else None
                for j in range(p // 16)]
        k = 0
        while k < (p - 1) // 16 and keys[k] is not None and keys[k] in seen:
            k += 1
        hit, total = hit + 16 * k, total + p
        seen.update(key for key in keys if key is not None)
    run = run_point({}, point(
        {"prefix_caching": True, "num_blocks": 2_000_000},  # never evicts
        {"arrival": "trace", "trace": str(MOONCAKE)}, name="continuous",
        max_num_batched_tokens=1_000_000, max_num_seqs=1024))  # whole prompts, in order
    assert run.summary["prefix_evictions"] == 0
    assert run.summary["prefix_cached_tokens"] == hit
    assert run.summary["prefix_hit_rate"] == pytest.approx(hit / total, rel=1e-12)


@pytest.mark.parametrize(("kv", "workload", "policy", "message"), [
    ({"prefix_caching": True}, {}, "static", "only for the continuous and chunked"),
    ({"prefix_caching": 1}, {}, "chunked", "kv.prefix_caching"),
    ({}, {"session_turns": 2}, "chunked", "sessions need arrival = 'closed'"),
    ({}, {"system_prompt_share": 0.5}, "chunked", "only with system_prompt_tokens > 0"),
    ({}, {"system_prompt_tokens": 10, "system_prompt_share": 1.5}, "chunked", "<= 1"),
    ({}, {"system_prompt_tokens": -1}, "chunked", "system_prompt_tokens"),
    ({}, {"system_prompts": 0, "system_prompt_tokens": 5}, "chunked", "system_prompts"),
])
def test_config_errors_name_the_field(kv: dict[str, Any], workload: dict[str, Any],
                                      policy: str, message: str) -> None:
    wl = {"arrival": "poisson", "num_requests": 5, **workload}
    with pytest.raises(ConfigError, match=message):
        run_point({}, point(kv, wl) | {"policy": {"name": policy}})


def test_a_trace_keeps_its_own_prefixes(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 5, "output_length": 2}\n')
    with pytest.raises(ConfigError, match="keep their own prefixes"):
        WorkloadConfig.from_dict({"trace": str(trace), "system_prompt_tokens": 10})


@pytest.mark.parametrize("name", ["system-prompt", "multiturn", "mooncake"])
def test_shipped_scenarios_report_the_hit_rate(name: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from servesim.cli import main  # the face, only for this test

    scenario = Path(__file__).parents[1] / "scenarios" / f"prefix-caching-{name}.toml"
    small = ["--set", "workload.num_requests=48"] + (
        ["--set", "workload.rate=5.0"] if name == "system-prompt" else [])
    assert main(["run", str(scenario), *small, "--json", "--out", str(tmp_path)]) == 0
    rows = json.loads(capsys.readouterr().out)
    on = [r for r in rows if r["prefix_caching"]]
    off = [r for r in rows if not r["prefix_caching"]]
    assert on and off and all("prefix_hit_rate" not in r for r in off)
    assert all(0 < r["prefix_hit_rate"] < 1 and r["prefill_tokens_saved"] > 0 for r in on)
