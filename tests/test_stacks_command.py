"""``servesim stacks``: each preset's knobs, KV layout and host costs for one deployment,
as a run would get them (numbers from simulator/stack_presets.py, checked by hand)."""

from __future__ import annotations

import json

import pytest

from servesim.cli import main


def _views(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, dict]:
    assert main(["stacks", *argv, "--json"]) == 0
    return {v["version"]: v for v in json.loads(capsys.readouterr().out)}


def test_vllm_v0_releases_on_llama_3_1_8b(capsys: pytest.CaptureFixture[str]) -> None:
    views = _views(capsys, "vllm-v0")
    assert list(views) == ["0.5", "0.5.4", "0.6"]
    assert [v["latest"] for v in views.values()] == [False, False, True]
    # 131,072 positions: 0.5.0-0.5.3 prefill whole prompts, 0.5.4 on chunks of 512
    assert (views["0.5"]["policy"]["chunked_prefill"],
            views["0.5"]["policy"]["max_num_batched_tokens"]) == (False, 131_072)
    assert views["0.5.4"]["policy"]["max_num_batched_tokens"] == 512
    host = views["0.5.4"]["host_costs_s"]  # 32 layers: 0.8 ms and 0.039 ms each
    assert host["token_s"] == pytest.approx(95.8e-6)
    assert host["request_s"] == pytest.approx(32 * 0.8e-3)
    assert host["step_s"] == pytest.approx(32 * 0.039e-3)
    assert "token_s" not in views["0.6"]["host_costs_s"]
    # the cost source a run resolves: vLLM's own kernel tables, plus the host terms
    assert views["0.5.4"]["step_costs"].startswith(
        "stacks/vllm/h100-sxm__llama-3.1-8b__bf16__tp1.json")
    assert "token 0.0958 ms" in views["0.5.4"]["step_costs"]


def test_host_costs_follow_depth_and_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    host = _views(capsys, "vllm-v0", "--model", "llama-3-70b", "--tp", "4")["0.6"][
        "host_costs_s"]
    assert host["step_s"] == pytest.approx(80 * 0.039e-3)  # 80 layers
    assert host["seq_s"] == pytest.approx(30.6e-6)  # more than one GPU only


def test_vllm_v1_defaults_follow_the_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    views = _views(capsys, "vllm-v1", "--gpu", "a100-80gb")
    batches = {v: (x["policy"]["max_num_seqs"], x["policy"]["max_num_batched_tokens"])
               for v, x in views.items()}
    assert batches == {"0.8": (1024, 2048), "0.8.4": (256, 2048), "0.8.5": (1024, 8192),
                       "0.9": (256, 2048), "0.12": (256, 2048),
                       "0.14": (256, 2048)}  # 0.12 and 0.14: 0.9's (0.14: async on)
    assert [views[v]["policy"].get("overlap_schedule", False) for v in ("0.9", "0.14")] == [
        False, True]


def test_sglang_memory_follows_the_gpu_and_tp(capsys: pytest.CaptureFixture[str]) -> None:
    # the fraction a run gets there (simulator/sglang_memory.py), not one for every TP
    views = _views(capsys, "sglang", "--gpu", "h200", "--tp", "8")
    assert {v: x["kv"]["gpu_memory_utilization"] for v, x in views.items()} == {
        "0.2": 0.83, "0.3": 0.83, "0.4": 0.81, "0.5": 0.896}
    # 0.81 x 1.80 GiB of startup memory outside the pool: 1.5655 GB
    assert views["0.4"]["kv"]["reserve_gb"] == 1.5655
    one = _views(capsys, "sglang")["0.5"]["kv"]  # one H100: 0.834, 0.834 x 0.67 GiB
    assert (one["gpu_memory_utilization"], one["reserve_gb"]) == (0.834, 0.6)
    # and the tokens that leaves Llama-3.1-8B: 0.834 x 84,932,978,278 - 16,060,522,496 -
    # 0.6e9 = 54,173,581,388 B at 131,072 B a token (tests/test_sglang_memory.py)
    assert one["kv_tokens"] == 413_311


def test_the_kv_cache_a_run_gets(capsys: pytest.CaptureFixture[str]) -> None:
    # vLLM V1 on one H100, Llama-3.1-8B: 0.9 x 84,932,978,278 - 16,060,522,496 - 2e9 =
    # 58,379,157,954 B: 27,837 whole blocks of 16 tokens at 131,072 B a token
    views = _views(capsys, "vllm-v1")
    assert {x["kv"]["kv_tokens"] for x in views.values()} == {27_837 * 16}


def test_text_and_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stacks", "trtllm", "--sources"]) == 0
    text = capsys.readouterr().out
    assert "trtllm 1.0 (the default version)" in text and "  source: " in text
    assert main(["stacks", "--model", "nope"]) == 2
    assert "is not a known model" in capsys.readouterr().err
    assert main(["stacks", "--tp", "0"]) == 2
    assert "--tp 0" in capsys.readouterr().err


def test_an_fp8_checkpoint_on_an_a100(capsys: pytest.CaptureFixture[str]) -> None:
    # vLLM keeps an FP8 checkpoint's KV cache in bf16 (--kv-cache-dtype auto), TensorRT-LLM
    # quantises it; an A100 multiplies FP8 weights in bf16, so vLLM's bf16 table is repriced
    vllm = _views(capsys, "vllm-v1", "--gpu", "a100-80gb", "--weight-dtype", "fp8")["0.9"]
    assert vllm["kv"]["kv_dtype"] == "bf16"
    assert vllm["step_costs"].startswith("fp8 weights, weight-only kernels on a100-80gb")
    assert "stacks/vllm/a100-80gb__llama-3.1-8b__bf16__tp1.json" in vllm["step_costs"]
    trtllm = _views(capsys, "trtllm", "--weight-dtype", "fp8")["1.0"]
    assert trtllm["kv"]["kv_dtype"] == "fp8"
    assert trtllm["step_costs"].startswith("h100-sxm__llama-3.1-8b__fp8__tp1.json")
    # TensorRT-LLM has no FP8 on an A100: the preset is listed, with why it cannot run
    refused = _views(capsys, "trtllm", "--gpu", "a100-80gb", "--weight-dtype", "fp8")["1.0"]
    assert "kv_dtype" not in refused["kv"]
    assert refused["step_costs"].startswith("none: model.weight_dtype = fp8: trtllm 1.0 runs "
                                            "FP8 only on GPUs with FP8 tensor cores")


def test_sglang_shows_the_slots_its_pool_allows(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama-3.1-70B on 4 x H200: 0.4's pool of 1,106,960 tokens / 131,072 x 512 = 4,324,
    # clamped to 4,096 running requests; on one H100 the 8B's 2,048 floor
    views = _views(capsys, "sglang", "--model", "llama-3.1-70b", "--gpu", "h200", "--tp", "4")
    assert views["0.4"]["kv"]["kv_tokens"] == 1_106_960
    assert views["0.4"]["policy"]["max_num_seqs"] == 4096
    assert _views(capsys, "sglang")["0.5"]["policy"]["max_num_seqs"] == 2048


def test_the_weights_a_gpu_holds_follow_the_stacks_kernels(
        capsys: pytest.CaptureFixture[str]) -> None:
    """gpt-oss-120b in MXFP4 on one H100: 65,168,599,680 bytes = 60.69 GiB as the checkpoint
    stores it; vLLM before 0.12 pads its experts for Marlin (+5.13 GiB: tests/test_moe_marlin.py
    works it), from 0.12 it does not; at tp 2 each GPU holds half."""
    views = _views(capsys, "vllm-v1", "--model", "gpt-oss-120b", "--weight-dtype", "mxfp4")
    weights = {v: x["kv"]["weights_gib_per_gpu"] for v, x in views.items()}
    assert weights["0.12"] == weights["0.14"] == round(65_168_599_680 / 2**30, 2) == 60.69
    assert weights["0.9"] == pytest.approx(65.82, abs=0.01)
    two = _views(capsys, "sglang", "--model", "gpt-oss-120b", "--weight-dtype", "mxfp4",
                 "--tp", "2")
    assert two["0.5"]["kv"]["weights_gib_per_gpu"] == round(65_168_599_680 / 2 / 2**30, 2)


def test_a_model_that_does_not_fit_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    # DeepSeek-R1 in bf16 on one H200: 1,342 GB of weights; the presets still print
    views = _views(capsys, "trtllm", "--model", "deepseek-r1", "--gpu", "h200")
    step = views["1.0"]["step_costs"]
    assert step.startswith("none: model does not fit: weights 1342.1 GB")
    assert "kv_tokens" not in views["1.0"]["kv"]
    fits = _views(capsys, "trtllm", "--model", "deepseek-r1", "--gpu", "h200", "--tp", "8",
                  "--weight-dtype", "fp8")
    assert fits["1.0"]["kv"]["kv_tokens"] > 0
