"""SGLang's KV pool by release, TP and GPU (simulator/sglang_memory.py), worked by hand."""

from __future__ import annotations

import dataclasses

import pytest

from simulator.deployment import resolve
from simulator.errors import ConfigError
from simulator.kv_config import KVCacheConfig
from simulator.sglang_memory import (
    fraction_05,
    fraction_by_tp,
    graph_max_bs_05,
    kv_05,
    request_slots,
)
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model

GIB = 2**30


def _point(version: str, model: str, gpu: str, tp: int, **kv: float) -> dict:
    point = {"stack": {"name": "sglang", "version": version}, "model": {"name": model},
             "hardware": {"gpu": gpu, "tp": tp}}
    return {**point, "kv": kv} if kv else point


@pytest.mark.parametrize(("tp", "v03", "v04"), [(1, 0.88, 0.88), (2, 0.87, 0.87),
                                                 (4, 0.85, 0.85), (8, 0.83, 0.81),
                                                 (16, 0.79, 0.79)])
def test_the_early_releases_fraction_falls_with_tp(tp: int, v03: float, v04: float) -> None:
    # server_args.py: 0.88, 0.87 from 2, 0.85 from 4, 0.83 (0.4: 0.81) from 8, 0.79 from 16
    assert fraction_by_tp(tp, 0.83) == v03
    assert fraction_by_tp(tp, 0.81) == v04


def test_sglang_04_on_eight_h200s_pools_what_its_fraction_leaves() -> None:
    # Llama-3.1-405B FP8 (a bf16 cache: SGLang's kv_cache_dtype auto), 8 x H200 (139.81 GiB
    # each as CUDA reports it): f = 0.81; startup 1.80 GiB a GPU, of which the pool's share
    # is 0.81 x 1.80 GiB = 1.5655 GB. Pool: 0.81 x 8 x 150,119,844,413 B - 410,056,081,408 B
    # of weights - 8 x 1.5655e9 B = 550,196,510,388 B, over 516,096 B a token:
    dep = resolve(_point("0.4", "llama-3.1-405b", "h200", 8) | {
        "model": {"name": "llama-3.1-405b", "weight_dtype": "fp8"}})
    assert dep.kv_dtype == "bf16"
    assert dep.kv_blocks == 1_066_073
    # Before (one fraction for every TP): 0.88 x 8 x 150,119,844,413 - 410,056,081,408 - 8 x
    # 2e9 = 630,787,623,259 B, 14.8% more
    before = resolve(_point("0.4", "llama-3.1-405b", "h200", 8,
                            gpu_memory_utilization=0.88, reserve_gb=2.0) | {
        "model": {"name": "llama-3.1-405b", "weight_dtype": "fp8"}})
    assert before.kv_blocks == 1_222_229


def test_sglang_05_derives_its_fraction_from_the_gpus_capacity() -> None:
    # H100 (79.10 GiB = 80,998.4 MiB), TP 1: chunk 8192, cuda_graph_max_bs 256, reserved =
    # 512 + 1.5 x 8192 + 2 x 256 + 1024 x 1 / 8 = 13,440 MiB -> f = 67,558.4 / 80,998.4 =
    # 0.834 (three places, as SGLang rounds it)
    h100 = get_hardware("h100-sxm")
    assert graph_max_bs_05(h100, 1) == 256
    assert fraction_05(h100, 1, 8192) == 0.834
    # Llama-3.1-8B on it: 0.834 x 84,932,978,278 B - 16,060,522,496 B of weights - 0.834 x
    # 0.67 GiB (0.6000 GB) = 54,173,581,388 B of pool, 131,072 B a token
    dep = resolve(_point("0.5", "llama-3.1-8b", "h100-sxm", 1))
    assert dep.kv_blocks == 413_311
    # B200 (178.35 GiB = 182,630.4 MiB), TP 8: chunk 16384, max_bs 512, reserved = 512 +
    # 24,576 + 1,024 + 1,024 = 27,136 MiB -> f = 0.851
    b200 = get_hardware("b200")
    assert fraction_05(b200, 8, 16384) == 0.851
    # Under 60 GiB no 10 GiB floor: L40S (44.42 GiB = 45,486.1 MiB), TP 1, chunk 8192, max_bs
    # 32: reserved = 512 + 12,288 + 64 + 128 = 12,992 -> f = 0.714; with the 4096-token
    # chunk 0.5 gives a GPU under 60 GiB, 512 + 6,144 + 64 + 128 = 6,848 -> f = 0.849
    assert fraction_05(get_hardware("l40s"), 1, 8192) == 0.714
    l40s = resolve(_point("0.5", "llama-3.1-8b", "l40s", 1))
    assert l40s.policy.max_num_batched_tokens == 4096
    assert fraction_05(get_hardware("l40s"), 1, 4096) == 0.849


def test_a_gpu_the_reserve_fills_is_refused_by_name() -> None:
    tiny = dataclasses.replace(get_hardware("rtx4090"), name="tiny", cuda_total_gib=3.0)
    # 3,072 MiB against 512 + 1.5 x 2048 + 2 x 8 + 128 = 3,728 MiB reserved
    with pytest.raises(ConfigError, match=r"tiny: it reserves 3,728 MiB of the GPU's 3,072"):
        fraction_05(tiny, 1, 2048)


def test_a_scenarios_own_kv_fraction_wins() -> None:
    own = resolve(_point("0.5", "llama-3.1-8b", "h100-sxm", 1,
                         gpu_memory_utilization=0.9, reserve_gb=2.0))
    # 0.9 x 84,932,978,278 - 16,060,522,496 - 2e9 = 58,379,157,954 B / 131,072 B
    assert own.kv_blocks == 445_397
    # Its own fraction alone: the startup memory's share of it is the reserve, 0.9 x 0.67
    # GiB = 0.6475 GB: 76,439,680,450 - 16,060,522,496 - 647,500,000 = 59,731,657,954 B
    fraction = resolve(_point("0.5", "llama-3.1-8b", "h100-sxm", 1,
                              gpu_memory_utilization=0.9))
    assert fraction.kv_blocks == 455_716


def test_the_users_own_fraction_is_not_refused() -> None:
    # What the refusal advises works: with a fraction of its own, 0.5's rule is not run
    tiny = dataclasses.replace(get_hardware("rtx4090"), name="tiny", cuda_total_gib=3.0)
    with pytest.raises(ConfigError, match="set \\[kv\\] gpu_memory_utilization yourself"):
        kv_05(tiny, 1, {"max_num_batched_tokens": 2048})
    # 0.5 x 0.67 GiB = 0.3597 GB outside the pool
    assert kv_05(tiny, 1, {"max_num_batched_tokens": 2048}, 0.5) == {
        "gpu_memory_utilization": 0.5, "reserve_gb": 0.3597, "window_share": 0.8}


def test_sglang_05_sets_a_pool_aside_for_the_window_layers() -> None:
    # SGLang 0.5 splits the tokens T its budget holds at every layer into a full pool F and
    # a sliding-window pool 0.8 F: F = T x 36 / (0.8 x 18 + 18) for gpt-oss-120b. A token of
    # F then costs 0.8 x 18 + 18 = 32.4 layers of 2 x 8 x 64 x 2 bytes (bf16): 66,355.2
    model = get_model("gpt-oss-120b")
    point = {"stack": {"name": "sglang"}, "model": {"name": "gpt-oss-120b",
                                                    "weight_dtype": "mxfp4"},
             "hardware": {"gpu": "h200", "tp": 1}}
    dep = resolve(point)
    kv = KVCacheConfig(window_share=0.8)
    assert kv.pool_bytes_per_token(model, "bf16") == pytest.approx(32.4 * 2048)
    apart = resolve({**point, "kv": {"window_share": 0.0}})  # the full layers' tokens only
    assert abs(dep.kv_blocks - apart.kv_blocks * 18 / 32.4) <= 1  # 1 / 1.8 of the tokens
    # a model without windows is not touched
    llama = {**point, "model": {"name": "llama-3.1-8b"}}
    assert resolve(llama).kv_blocks == resolve({**llama, "kv": {"window_share": 0.0}}).kv_blocks


def test_vllm_keeps_its_own_memory_rule() -> None:
    point = {"stack": {"name": "vllm-v1"}, "model": {"name": "llama-3.1-8b"},
             "hardware": {"gpu": "h100-sxm", "tp": 1}}
    # 0.9 x 84,932,978,278 - 16,060,522,496 - 2e9 = 58,379,157,954 B, blocks of 16 tokens
    assert resolve(point).kv_blocks == 58_379_157_954 // (131_072 * 16)


@pytest.mark.parametrize(("pool", "context", "slots"), [
    (1_106_960, 131_072, 4096),  # 4,324 clamped to 4,096
    (413_311, 131_072, 2048),  # 1,614 raised to 2,048
    (600_000, 131_072, 2343),  # int(600,000 / 131,072 x 512) = 2,343: between the bounds
    (3_000, 8_192, 1500),  # a small pool: pool // 2 = 1,500 under the 2,048 floor
])
def test_request_slots_follow_the_pool(pool: int, context: int, slots: int) -> None:
    assert request_slots(pool, context) == slots


def test_a_run_gets_the_slots_its_pool_allows() -> None:
    # Llama-3.1-70B on 4 x H200 under 0.4: 1,106,960 tokens (f 0.85), so 4096 at once,
    # where the preset had said 2048; Llama-3.1-8B on one H100 under 0.5 keeps 2048
    big = resolve(_point("0.4", "llama-3.1-70b", "h200", 4))
    assert big.kv_blocks == 1_106_960 and big.policy.max_num_seqs == 4096
    assert resolve(_point("0.5", "llama-3.1-8b", "h100-sxm", 1)).policy.max_num_seqs == 2048
    # a scenario's own max_num_seqs wins; a served context of 32,768 tokens: 6,458 -> 4096
    own = _point("0.4", "llama-3.1-70b", "h200", 4) | {"policy": {"max_num_seqs": 300}}
    assert resolve(own).policy.max_num_seqs == 300
    short = resolve(_point("0.5", "llama-3.1-8b", "h100-sxm", 1) | {
        "policy": {"max_model_len": 32_768}})
    assert short.kv_blocks == 413_311 and short.policy.max_num_seqs == 4096
    # vLLM sizes its batch by max_num_seqs alone: unchanged
    vllm = resolve({"stack": {"name": "vllm-v1"}, "model": {"name": "llama-3.1-70b"},
                    "hardware": {"gpu": "h200", "tp": 4}})
    assert vllm.policy.max_num_seqs == 1024
