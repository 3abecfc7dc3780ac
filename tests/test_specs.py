"""Model and hardware specs: parameter counts against published totals, KV sizes, dtypes,
the config.json reader and the catalogue errors."""

from __future__ import annotations

import dataclasses
import json

import pytest

from simulator.errors import ConfigError
from simulator.specs import (
    HARDWARE,
    MODELS,
    HardwareSpec,
    ModelSpec,
    get_hardware,
    get_model,
    kv_dtype_bytes,
    model_from_hf_config,
    weight_dtype_bytes,
)

LLAMA31_8B_CONFIG = {  # the keys of meta-llama/Llama-3.1-8B's config.json that we read
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
    "torch_dtype": "bfloat16",
}


def test_kv_bytes_per_token_llama31_8b() -> None:
    m = get_model("llama-3.1-8b")
    assert m.kv_bytes_per_token("bf16") == 2 * 32 * 8 * 128 * 2 == 131072  # K,V * L * kv * d * 2B
    assert m.kv_bytes_per_token("fp8") == 131072 // 2


@pytest.mark.parametrize(
    ("name", "published"),
    [
        ("llama-2-7b", 6.74e9),
        ("llama-2-70b", 68.98e9),
        ("llama-3.1-8b", 8.03e9),
        ("llama-3.1-70b", 70.6e9),
        ("mistral-7b", 7.24e9),
        ("qwen2.5-7b", 7.62e9),  # published count includes 0.1M q/k/v biases we leave out
    ],
)
def test_params_total_within_1pct_of_published(name: str, published: float) -> None:
    m = get_model(name)
    assert m.params_total == pytest.approx(published, rel=0.01)
    assert m.params_active == m.params_total  # dense


def test_llama31_8b_params_by_hand() -> None:
    # embed + lm_head: 2 * 128256 * 4096 = 1_050_673_152
    # per layer: attn 2*4096*4096 + 2*4096*1024 = 41_943_040; mlp 3*4096*14336 = 176_160_768;
    #            norms 2*4096 = 8192  -> 218_112_000; x 32 = 6_979_584_000; final norm 4096
    assert get_model("llama-3.1-8b").params_total == 1_050_673_152 + 6_979_584_000 + 4096


def test_mixtral_total_and_active() -> None:
    m = get_model("mixtral-8x7b")
    assert m.params_total == pytest.approx(46.7e9, rel=0.02)
    assert m.params_active == pytest.approx(12.9e9, rel=0.02)
    # total - active = (8 - 2) experts * 32 layers * 3 * 4096 * 14336
    assert m.params_total - m.params_active == 6 * 32 * 3 * 4096 * 14336


def test_toy_models_sizes() -> None:
    assert get_model("tiny").params_total == pytest.approx(20e6, rel=0.05)
    assert get_model("small").params_total == pytest.approx(100e6, rel=0.05)
    assert get_model("small").params_embedding == 32000 * 768  # tied: one matrix


def test_weight_bytes_by_dtype() -> None:
    m = get_model("llama-3.1-8b")
    bf16 = m.weight_bytes("bf16")
    assert bf16 == 2 * m.params_total
    assert m.weight_bytes("fp32") == 2 * bf16
    # A quantised checkpoint keeps its embedding and lm_head (2 x 128,256 x 4,096 =
    # 1,050,673,152 weights) in 16 bits: 8,030,261,248 - 1,050,673,152 weights at 1 byte
    # plus those at 2 is 9,080,934,400 bytes, the size of the published
    # Llama-3.1-8B-Instruct FP8 checkpoints (9.08 GB); int4 packs the rest two to a byte.
    embedding = 2 * 128_256 * 4_096
    assert m.params_embedding == embedding == 1_050_673_152
    assert m.weight_bytes("fp8") == 9_080_934_400
    assert m.weight_bytes("int8") == 9_080_934_400
    assert m.weight_bytes("int4") == (m.params_total - embedding) // 2 + 2 * embedding


def test_dtype_tables_and_errors() -> None:
    assert weight_dtype_bytes("int4") == 0.5
    assert weight_dtype_bytes("BF16") == 2
    assert kv_dtype_bytes("fp8") == 1
    with pytest.raises(ConfigError, match=r"model\.weight_dtype='fp4'.*fp32, fp16, bf16"):
        weight_dtype_bytes("fp4", "model.weight_dtype")
    with pytest.raises(ConfigError, match=r"kv_dtype='int4'.*known: fp16, bf16, fp8"):
        kv_dtype_bytes("int4")


def test_get_model_lookup() -> None:
    assert get_model("Llama-3.1-8B") is MODELS["llama-3.1-8b"]
    assert get_model("meta-llama/Llama-3.1-8B") is MODELS["llama-3.1-8b"]
    with pytest.raises(ConfigError, match=r"'gpt-5'.*known: llama-2-7b, .*mixtral-8x7b, .*tiny"):
        get_model("gpt-5")


def test_hf_config_round_trip(tmp_path) -> None:
    folder = tmp_path / "Llama-3.1-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA31_8B_CONFIG))
    expected = dataclasses.replace(MODELS["llama-3.1-8b"], name="Llama-3.1-8B")
    assert model_from_hf_config(folder / "config.json") == expected
    assert model_from_hf_config(folder) == expected  # a directory holding config.json
    assert get_model(str(folder)) == expected
    assert model_from_hf_config(LLAMA31_8B_CONFIG, name="x") == dataclasses.replace(
        expected, name="x"
    )


def test_hf_config_defaults_and_moe() -> None:
    cfg = {k: v for k, v in LLAMA31_8B_CONFIG.items() if k != "num_key_value_heads"}
    m = model_from_hf_config({**cfg, "head_dim": None}, name="mha")
    assert (m.num_kv_heads, m.head_dim) == (32, 4096 // 32)  # MHA default, hidden / heads
    moe = {
        **LLAMA31_8B_CONFIG,
        "vocab_size": 32000,
        "max_position_embeddings": 32768,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
    }
    assert model_from_hf_config(moe, name="mixtral-8x7b") == MODELS["mixtral-8x7b"]


def test_hf_config_errors_name_file_and_key(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in LLAMA31_8B_CONFIG.items() if k != "vocab_size"}))
    with pytest.raises(ConfigError, match=r"config\.json: missing required key 'vocab_size'"):
        model_from_hf_config(path)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match=r"config\.json: not valid JSON"):
        model_from_hf_config(path)
    path.write_text(json.dumps({**LLAMA31_8B_CONFIG, "num_key_value_heads": 5}))
    with pytest.raises(ConfigError, match=r"config\.json: .*num_heads=32 .*num_kv_heads=5"):
        model_from_hf_config(path)


def test_model_spec_validation() -> None:
    good = MODELS["tiny"]
    with pytest.raises(ConfigError, match=r"num_layers=0 must be an int >= 1"):
        dataclasses.replace(good, num_layers=0)
    with pytest.raises(ConfigError, match=r"experts_per_token=3 must be <= num_experts=2"):
        dataclasses.replace(good, num_experts=2, experts_per_token=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        good.num_layers = 5  # type: ignore[misc]
    assert not hasattr(good, "__dict__")  # slots


def test_hardware_catalogue_and_aliases() -> None:
    assert get_hardware("H100") is HARDWARE["h100-sxm"]
    assert get_hardware("a100") is HARDWARE["a100-80gb"]
    assert get_hardware("h200-sxm") is HARDWARE["h200"]
    assert set(HARDWARE) >= {
        "a100-80gb",
        "a100-40gb",
        "h100-sxm",
        "h100-pcie",
        "h200",
        "l40s",
        "rtx4090",
        "b200",
        "cpu",
    }
    with pytest.raises(ConfigError, match=r"'tpu-v5'.*known: a100-80gb, .*cpu, a100 \(= a100-80gb"):
        get_hardware("tpu-v5")


def test_peak_flops_and_fallbacks() -> None:
    h100, a100, cpu = HARDWARE["h100-sxm"], HARDWARE["a100-80gb"], HARDWARE["cpu"]
    assert h100.peak_flops("bf16") == 989e12
    assert h100.peak_flops("fp8") == 1979e12
    assert h100.peak_flops("int4") == 989e12  # W4A16: dequantise, bf16 math
    assert h100.peak_flops("fp32") == 989e12 / 2  # TF32 tensor cores
    assert a100.peak_flops("fp8") == 312e12  # no FP8 math on Ampere: bf16 fallback
    assert a100.peak_flops("int8") == 624e12
    assert cpu.peak_flops("fp32") == pytest.approx(0.15e12)
    with pytest.raises(ConfigError, match="compute_dtype='fp4'"):
        h100.peak_flops("fp4")


def test_hardware_memory_and_validation() -> None:
    # an "80 GB" H100: what CUDA reports, 79.10 GiB; a GPU without a CUDA total: its GiB
    assert HARDWARE["h100-sxm"].memory_bytes == round(79.10 * 2**30) == 84_932_978_278
    assert HARDWARE["b200"].memory_bytes == round(178.35 * 2**30)
    assert HARDWARE["cpu"].memory_bytes == 24 * 2**30
    assert HardwareSpec("x", 80, 1000, 100, cuda_total_gib=79.5).memory_bytes == 79.5 * 2**30
    with pytest.raises(ConfigError, match=r"cuda_total_gib=0 must be a finite number > 0"):
        HardwareSpec("x", 80, 1000, 100, cuda_total_gib=0)
    with pytest.raises(ConfigError, match=r"bandwidth_gbps=-1 must be a finite number > 0"):
        HardwareSpec("x", 80, -1, 100)
    with pytest.raises(ConfigError, match=r"link_kind='infiniband'"):
        HardwareSpec("x", 80, 1000, 100, link_bandwidth_gbps=100, link_kind="infiniband")
    with pytest.raises(ConfigError, match=r"needs link_bandwidth_gbps > 0"):
        HardwareSpec("x", 80, 1000, 100, link_kind="nvlink")


def test_model_spec_is_plain_data() -> None:
    spec = ModelSpec("m", 2, 64, 4, 2, 16, 128, 1000, 512)
    assert spec.params_active == spec.params_total > 0
