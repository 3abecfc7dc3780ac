"""Sliding-window layers in vLLM's one pool: each running request holds its last window.

vLLM V1's hybrid KV-cache manager (0.9.1 on) gives a model's window layers blocks from the
same pool as its full layers and frees those before a request's last window at its next
step, so a running request holds ``ceil((W - 1) / block) + 1`` window-layer blocks beside
its context. Before it (vLLM v0, V1 0.8) the window layers cost as full layers. Every
figure here is worked by hand: gpt-oss-120b has 18 window layers of 128 tokens and 18 full
ones, 8 KV heads of 64.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from helpers import TokenCost

from simulator.cluster import ClusterSpec, simulate
from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.kv_config import KVCacheConfig
from simulator.kvcache import BlockManager
from simulator.policies import ContinuousPolicy
from simulator.specs import get_model


def test_a_request_holds_its_window_blocks_from_first_allocation_to_free() -> None:
    kv = BlockManager(100, 16, window_blocks=9)
    assert kv.extra_for(7, 215) == 14 + 9  # ceil(215 / 16) context blocks + the window's
    kv.allocate(7, 215)
    assert (kv.used, kv.held(7)) == (23, 14)  # held: the context's blocks only
    assert kv.extra_for(7, 230) == 1  # growing: context blocks only
    kv.allocate(7, 230)
    assert kv.used == 24 and kv.blocks_in_use([7]) == 24
    assert kv.request_blocks(230) == 24 and kv.blocks_for(230) == 15
    kv.check()
    kv.free(7)
    assert kv.used == 0
    kv.check()


def test_a_new_request_must_fit_its_window_too() -> None:
    kv = BlockManager(30, 16, window_blocks=9)
    kv.allocate(1, 64)  # 4 + 9 = 13 used, 17 free
    assert kv.can_allocate(2, 128)  # 8 + 9 = 17
    assert not kv.can_allocate(2, 129)  # 9 + 9 = 18
    with pytest.raises(RuntimeError, match="overcommit"):
        kv.allocate(2, 129)


def test_gpt_oss_holds_nine_blocks_a_request_at_vllms_block_of_16() -> None:
    model = get_model("gpt-oss-120b")
    held = KVCacheConfig(window_held=True)
    # ceil(127 / 16) + 1 = 9 window-layer blocks; 18 window layers against 18 full: x 1
    assert held.window_blocks(model, "bf16") == 9
    # block 32: ceil(127 / 32) + 1 = 5
    assert dataclasses.replace(held, block_size=32).window_blocks(model, "bf16") == 5
    assert KVCacheConfig().window_blocks(model, "bf16") == 0  # not held: none
    assert held.window_blocks(get_model("llama-3.1-8b"), "bf16") == 0  # no window layers


def test_five_window_layers_to_one_full_hold_five_times_the_blocks() -> None:
    # a Gemma-3-like mix: 30 of 36 layers windowed (1,024 tokens), 6 full
    model = dataclasses.replace(get_model("llama-3.1-8b"), num_layers=36, sliding_layers=30,
                                sliding_window=1024)
    # ceil(1023 / 16) + 1 = 65 window-layer blocks, each 30/6 = 5 of the pool's blocks
    assert KVCacheConfig(window_held=True).window_blocks(model, "bf16") == 325


def test_a_pool_of_its_own_and_blocks_from_the_one_pool_do_not_mix() -> None:
    with pytest.raises(ConfigError, match="window_held"):
        KVCacheConfig(window_held=True, window_share=0.8)


def _gpt_oss(stack: str, version: str, **sections: dict) -> dict:  # type: ignore[type-arg]
    return {"model": {"name": "gpt-oss-120b", "weight_dtype": "mxfp4"},
            "hardware": {"gpu": "h100-sxm", "tp": 1},
            "stack": {"name": stack, "version": version}, **sections}


def test_vllm_presets_charge_the_window_as_each_release_did() -> None:
    hybrid, before = resolve(_gpt_oss("vllm-v1", "0.10")), resolve(_gpt_oss("vllm-v1", "0.8.5"))
    assert hybrid.window_blocks == 9 and before.window_blocks == 0
    # before the hybrid manager every window layer holds every token, as a full one:
    # 36 layers' KV a token instead of 18, so half the tokens (to a block)
    assert before.kv_blocks == pytest.approx(hybrid.kv_blocks / 2, abs=1)
    assert hybrid.cluster().window_blocks == 9
    trtllm = resolve(_gpt_oss("trtllm", "1.0"))
    assert trtllm.window_blocks == 0  # a pool of the window's own


def _burst(n: int, prompt: int, output: int) -> pd.DataFrame:
    return pd.DataFrame({"request_id": np.arange(n), "arrival_s": np.zeros(n),
                         "prompt_tokens": np.full(n, prompt),
                         "output_tokens": np.full(n, output)})


@pytest.mark.parametrize(("window", "admitted"), [(0, 25), (9, 7)])
def test_a_burst_admits_what_fits_with_the_windows(window: int, admitted: int) -> None:
    # 100 blocks of 16; prompts of 60 tokens (4 blocks) and two output tokens each, so
    # nobody grows past 64: 100 // 4 = 25 at once without windows, 100 // (4 + 9) = 7 with
    spec = ClusterSpec(ContinuousPolicy(max_num_seqs=100, max_num_batched_tokens=10_000),
                       TokenCost(step_s=0.01, prefill_token_s=1e-5), kv_blocks=100,
                       block_size=16, check_invariants=True, window_blocks=window)
    res = simulate(_burst(30, 60, 2), spec)
    first = res.steps.iloc[0]
    assert first["num_running"] == admitted
    assert first["kv_blocks_used"] == admitted * (4 + window)
    assert (res.requests["status"] == "finished").all()


def test_vllm_v0_counts_window_layers_as_full_ones() -> None:
    own = resolve(_gpt_oss("vllm-v0", "0.6"))
    free = resolve(_gpt_oss("vllm-v0", "0.6", kv={"window_share": 0.0}))
    assert own.window_blocks == 0
    assert own.kv_blocks == pytest.approx(free.kv_blocks / 2, abs=1)  # 36 layers, not 18


def test_a_scenarios_own_window_rule_replaces_the_stacks() -> None:
    # vLLM 0.9.0 still counted window layers as full: its own [kv] says so over the
    # preset's held windows, and the two rules do not collide
    full = resolve(_gpt_oss("vllm-v1", "0.10", kv={"window_share": 1.0}))
    held = resolve(_gpt_oss("vllm-v1", "0.10"))
    assert full.window_blocks == 0 and held.window_blocks == 9
    assert full.kv_blocks == pytest.approx(held.kv_blocks / 2, abs=1)
    sglang = resolve(_gpt_oss("sglang", "0.5", kv={"window_held": True}))
    assert sglang.window_blocks == 127 + 1  # its page is one token; its window_share gave way


def test_disaggregated_pools_count_window_layers_as_full_ones() -> None:
    # vLLM turns its hybrid manager off beside a KV connector: no held windows, and the
    # pools' tokens those of 36 full layers
    split = {"prefill_replicas": 1, "decode_replicas": 1, "link": "infiniband-ndr"}
    dep = resolve(_gpt_oss("vllm-v1", "0.10", policy={"name": "chunked"}, kv={
        "prefix_caching": False}, disaggregated=split))
    held = resolve(_gpt_oss("vllm-v1", "0.10"))
    assert dep.window_blocks == 0 and dep.disaggregated is not None
    assert dep.disaggregated.decode.kv_blocks == pytest.approx(held.kv_blocks / 2, abs=1)


def test_the_prefix_caches_keep_a_requests_window_private() -> None:
    from simulator.prefix_cache_runs import PrefixRunManager
    from simulator.workload.prefixes import PrefixIdentity, from_lists

    segments, start, stop = from_lists([[(0, 8)], [(0, 8)]])  # both share an 8-token prefix
    table = pd.DataFrame({"request_id": [0, 1], "prompt_tokens": [10, 10],
                          "segments_start": start, "segments_stop": stop})
    kv = PrefixRunManager(40, 4, PrefixIdentity(table, segments), window_blocks=3)
    assert kv.match(0, 10, 12) == 0
    kv.allocate(0, 10)  # 3 blocks of context + 3 of window
    assert kv.used == 6 and kv.held(0) == 3
    assert kv.match(1, 10, 12) == 8  # the two full shared blocks
    assert kv.extra_for(1, 10) == 3 + 3  # counted as new: the hits are netted by can_allocate
    # 34 free; it takes 1 own block + 3 window blocks (its 2 hits are held by request 0)
    assert kv.can_allocate(1, 10, 34 - 4) and not kv.can_allocate(1, 10, 34 - 3)
    kv.allocate(1, 10)
    assert kv.used == 6 + 1 + 3 and kv.blocks_in_use([0, 1]) == 10
    kv.check()
    kv.free(0)
    kv.free(1)
    assert kv.used == 0
    kv.check()
