"""The models peer simulators ship: parameter counts against the published ones, aliases,
and the two Mistral-7B vocabularies."""

from __future__ import annotations

import pytest

from simulator.specs.models import MODEL_ALIASES, MODELS, catalogue_name, get_model

# Published totals: the parameter count of each Hugging Face checkpoint (safetensors
# metadata, as the model page shows it), rounded as published.
PUBLISHED = {
    "codellama-34b": 33.7e9,  # codellama/CodeLlama-34b-hf
    "llama-2-7b": 6.74e9,  # meta-llama/Llama-2-7b-hf
    "llama-3-8b": 8.03e9,  # meta-llama/Meta-Llama-3-8B
    "llama-3-70b": 70.6e9,  # meta-llama/Meta-Llama-3-70B
    "qwen-72b": 72.3e9,  # Qwen/Qwen-72B
    "internlm2-20b": 19.9e9,  # internlm/internlm2-20b
    "mistral-7b": 7.24e9,  # mistralai/Mistral-7B-v0.1
    "mistral-7b-v0.3": 7.25e9,  # mistralai/Mistral-7B-v0.3
    "mixtral-8x7b": 46.7e9,  # mistralai/Mixtral-8x7B-v0.1
    "llama-3.1-405b": 406e9,  # meta-llama/Meta-Llama-3.1-405B
    "mixtral-8x22b": 141e9,  # mistralai/Mixtral-8x22B-v0.1
    "gpt-j-6b": 6.05e9,  # EleutherAI/gpt-j-6b (6,053,381,344 with its biases)
    "falcon-180b": 180e9,  # tiiuae/falcon-180B
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_within_two_percent(name: str) -> None:
    assert MODELS[name].params_total == pytest.approx(PUBLISHED[name], rel=0.02)


def test_phi2_approximation_keeps_the_published_count() -> None:
    # Phi-2's real architecture (microsoft/phi-2 config.json: 32 layers, hidden 2560, MLP
    # 10240, vocab 51200, biases everywhere, LayerNorm with bias, untied lm_head with bias):
    h, inter, vocab, layers = 2560, 10240, 51200, 32
    attention = 4 * (h * h + h)  # q, k, v, dense with biases
    mlp = h * inter + inter + inter * h + h  # fc1, fc2 with biases
    per_layer = attention + mlp + 2 * h  # one LayerNorm (parallel block)
    real = layers * per_layer + vocab * h + (vocab * h + vocab) + 2 * h
    assert real == 2_779_683_840
    # The spec: SwiGLU of width 6,827 in place of the 2-matrix GELU MLP, no biases.
    spec = MODELS["phi-2"]
    assert 3 * spec.intermediate_size == pytest.approx(2 * inter, abs=3)
    assert spec.params_total == pytest.approx(real, rel=0.001)


def test_mistral_vocabularies() -> None:
    assert MODELS["mistral-7b"].vocab_size == 32000  # v0.1, as before
    assert MODELS["mistral-7b-v0.3"].vocab_size == 32768
    assert get_model("mistralai/Mistral-7B-v0.3").name == "mistral-7b-v0.3"
    assert get_model("mistralai/Mistral-7B-Instruct-v0.3").vocab_size == 32768
    assert get_model("mistralai/Mistral-7B-v0.1").name == "mistral-7b"


@pytest.mark.parametrize("hf_id, key", [
    ("codellama/CodeLlama-34b-hf", "codellama-34b"),
    ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"),
    ("meta-llama/Meta-Llama-3-70B", "llama-3-70b"),
    ("Qwen/Qwen-72B", "qwen-72b"),
    ("internlm/internlm2-20b", "internlm2-20b"),
    ("microsoft/phi-2", "phi-2"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
    ("meta-llama/Llama-2-7b-hf", "llama-2-7b"),
    ("meta-llama/Llama-3.1-405B-Instruct-FP8", "llama-3.1-405b"),
    ("mistralai/Mixtral-8x22B-Instruct-v0.1", "mixtral-8x22b"),
])
def test_hugging_face_ids_are_aliases(hf_id: str, key: str) -> None:
    assert catalogue_name(hf_id) == key
    assert get_model(hf_id) is MODELS[key]


def test_every_alias_names_a_catalogue_model() -> None:
    assert all(key in MODELS and alias == alias.lower() for alias, key in MODEL_ALIASES.items())


def test_large_models_match_the_configs_aiconfigurator_ships() -> None:
    # meta-llama--Meta-Llama-3.1-405B_config.json and mistralai--Mixtral-8x22B-v0.1_config.json
    # in aiconfigurator-core 0.12.0's model_configs/: (layers, hidden, heads, KV heads, MLP,
    # vocab, experts, top-k). Hand count of 405B: embeddings 2 x 128,256 x 16,384 = 4.20B;
    # a layer 2 x 16,384^2 + 2 x 16,384 x 1,024 (attention) + 3 x 16,384 x 53,248 (MLP)
    # = 3.188B, x 126 = 401.65B; 405.85B in all.
    shapes = {"llama-3.1-405b": (126, 16384, 128, 8, 53248, 128256, 1, 1),
              "mixtral-8x22b": (56, 6144, 48, 8, 16384, 32000, 8, 2)}
    for name, shape in shapes.items():
        m = MODELS[name]
        assert (m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.intermediate_size,
                m.vocab_size, m.num_experts, m.experts_per_token) == shape
    assert MODELS["llama-3.1-405b"].params_total == pytest.approx(405.85e9, rel=1e-4)
    # Mixtral-8x22B's active parameters: 2 of 8 experts a token, 39B (Mistral's "39B active")
    assert MODELS["mixtral-8x22b"].params_active == pytest.approx(39e9, rel=0.01)


def test_gelu_models_keep_their_mlp_weights() -> None:
    # GPT-J-6B and Falcon-180B: a two-matrix GELU MLP of 4 x hidden, approximated by a SwiGLU
    # of 2/3 that width (three matrices): the same weights and FLOPs per token
    for name, hidden in (("gpt-j-6b", 4096), ("falcon-180b", 14848)):
        m = MODELS[name]
        assert 3 * m.intermediate_size == pytest.approx(2 * 4 * hidden, abs=3)
    # GPT-J by hand: 2 x 50,400 x 4,096 embeddings + 28 x (4 x 4,096^2 + 2 x 4,096 x 16,384)
    # = 0.413B + 5.637B = 6.050B, the published 6,053,381,344 less its 3.0M biases
    assert MODELS["gpt-j-6b"].params_total == pytest.approx(6_050_000_000, rel=2e-4)
    assert MODELS["gpt-j-6b"].head_dim == 256 and MODELS["falcon-180b"].head_dim == 64


def test_parallel_blocks_are_marked_and_checked() -> None:
    import dataclasses

    from simulator.errors import ConfigError

    parallel = {n for n, m in MODELS.items() if m.parallel_block}
    assert parallel == {"phi-2", "gpt-j-6b", "falcon-180b"}
    with pytest.raises(ConfigError, match="parallel_block=1 not bool"):
        dataclasses.replace(MODELS["phi-2"], parallel_block=1)


def test_qwen3_moe_matches_the_config_aiconfigurator_ships() -> None:
    # Qwen--Qwen3-235B-A22B_config.json: 94 layers, hidden 4,096, 64 / 4 heads of 128 (wider
    # than hidden / heads = 64), 128 experts of 1,536, 8 a token, vocab 151,936
    m = MODELS["qwen3-235b-a22b"]
    assert (m.num_layers, m.hidden_size, m.num_heads, m.num_kv_heads, m.head_dim,
            m.intermediate_size, m.num_experts, m.experts_per_token, m.vocab_size) == (
        94, 4096, 64, 4, 128, 1536, 128, 8, 151936)
    # "235B total, 22B activated": an expert 3 x 4,096 x 1,536 = 18.9M a layer; attention
    # 2 x 4,096 x 8,192 + 2 x 4,096 x 512 = 71.3M a layer
    assert m.params_total == pytest.approx(235.09e9, rel=1e-3)
    assert m.params_active == pytest.approx(22.19e9, rel=1e-3)
    assert get_model("Qwen/Qwen3-235B-A22B-FP8") is m
