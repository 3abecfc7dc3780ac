"""A speculative step's cost: the draft's passes, then one wider target pass that verifies.

With ``k`` drafts per row (policies/speculative.py), a step over ``D`` decode rows whose
first queries attend ``C`` tokens in all costs (docs/speculative.md)::

    t = target(P, A, D, C, S, W)                          the verify (and any prefill)
      + sum_{j=0}^{n-1} draft(D rows, context C + j D)     n = max drafts of a row
      + draft(P, A)                                        a separate draft's prefill

``S`` drafts verified go through the target's GEMMs as tokens, their ``W`` query-key pairs
through its attention, and each row's cache is read once (a verify is a (1 + s)-token
chunk over a cached context, as vLLM's attention backends run it); each target form
prices ``S`` and ``W`` itself (linear, piecewise, roofline). The benefit shrinks with the
batch because a memory-bound target step gets the extra tokens almost free, and a
compute-bound one pays for every one of them, while the draft passes cost more with ``D``.

The draft is priced by the same machinery as the target:

- ``draft = "<catalogue model>"``: its own cost model on the same GPU and tensor-parallel
  degree (a shipped profile when one exists, else the roofline prior), kernel time only
  (host overhead is the target step's). It also prefills every prompt (its own KV cache).
- ``draft_layers = L``: the target's first ``L`` layers plus its embedding and LM head
  (self-speculative, LayerSkip-style: arXiv:2404.16710). It shares the target's KV for
  those layers, so it prefills nothing. Priced as the roofline of the truncated model when
  the target is priced by a roofline, else as the target's own decode step time times
  ``f = N_act(L layers) / N_act(target)`` (weights streamed per token: the step is taken
  to be weight-bound, its fixed cost scaling as the weights do).

Not modelled: a separate draft's first pass catching up on the tokens the last verify
accepted (it is priced as a one-token pass), rejection-sampling work beyond the target's
sampled positions, and drafts run at a tensor-parallel degree other than the target's.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from simulator.costs.base import CostModel
from simulator.costs.from_config import cost_model_from_config
from simulator.costs.host import split_host, with_overhead
from simulator.costs.roofline import RooflineCost
from simulator.errors import ConfigError
from simulator.shapes import StepShape, StepShapes
from simulator.specs.hardware import HardwareSpec
from simulator.specs.model_spec import ModelSpec
from simulator.specs.models import get_model


class SpeculativeCost:
    """``target``'s step (the verify) plus ``draft``'s passes (module docstring)."""

    def __init__(self, target: CostModel, draft: CostModel, draft_prefills: bool) -> None:
        self.target = target  # kernel-level cost of the target model
        self.draft = draft  # kernel-level cost of one draft pass
        self.draft_prefills = draft_prefills  # a separate draft model prefills prompts too

    def draft_time(self, shape: StepShape) -> float:
        """Seconds of the draft's work in a step of this shape."""
        t = 0.0
        d, c = shape.num_decode_seqs, shape.decode_context_tokens
        for j in range(shape.num_draft_passes):
            t += self.draft.step_time(StepShape(num_decode_seqs=d, decode_context_tokens=c + j * d))
        if self.draft_prefills and shape.num_prefill_tokens:
            t += self.draft.step_time(StepShape(num_prefill_tokens=shape.num_prefill_tokens,
                                                prefill_attn_work=shape.prefill_attn_work))
        return t

    def step_time(self, shape: StepShape) -> float:
        return self.target.step_time(shape) + self.draft_time(shape)

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        """Many steps (no draft passes: StepShapes carry none; a separate draft's prefill)."""
        out = self.target.step_times(shapes)
        if self.draft_prefills:
            p = shapes.num_prefill_tokens
            zeros = np.zeros(len(p), dtype=np.int64)
            prefill = StepShapes(p, shapes.prefill_attn_work, zeros, zeros, zeros, zeros)
            out = out + np.where(p > 0, self.draft.step_times(prefill), 0.0)
        return out


class LayerFractionCost:
    """``inner``'s step time times ``fraction`` (a draft of the target's first layers)."""

    def __init__(self, inner: CostModel, fraction: float) -> None:
        if not 0.0 < fraction <= 1.0:
            raise ConfigError(f"layer fraction {fraction!r} must be in (0, 1]")
        self.inner = inner
        self.fraction = fraction

    def step_time(self, shape: StepShape) -> float:
        return self.inner.step_time(shape) * self.fraction

    def step_times(self, shapes: StepShapes) -> np.ndarray:
        return self.inner.step_times(shapes) * self.fraction


def first_layers(model: ModelSpec, num_layers: int) -> ModelSpec:
    """``model`` cut to its first ``num_layers`` layers (embedding and LM head kept)."""
    if not 1 <= num_layers < model.num_layers:
        raise ConfigError(f"speculative.draft_layers = {num_layers}: must be in "
                          f"[1, {model.num_layers - 1}] ({model.name} has "
                          f"{model.num_layers} layers)")
    # a model mixing dense and MoE layers keeps its share of dense layers (rounded; one MoE
    # layer at least): an approximation, as the spec holds counts, not places (DeepSeek's
    # dense layers are its first three, Llama 4's every other one from layer 0)
    dense = min(round(model.dense_layers * num_layers / model.num_layers), num_layers - 1)
    return replace(model, name=f"{model.name}[:{num_layers}]", num_layers=num_layers,
                   dense_layers=dense)


def layer_draft(target: CostModel, model: ModelSpec, num_layers: int) -> tuple[CostModel, str]:
    """The cost of a draft made of ``model``'s first ``num_layers`` layers, and its label."""
    draft_model = first_layers(model, num_layers)
    kernel, _ = split_host(target)
    if isinstance(kernel, RooflineCost):
        return replace(kernel, model=draft_model), f"roofline of {draft_model.name}"
    fraction = draft_model.params_active / model.params_active
    return LayerFractionCost(kernel, fraction), (
        f"{model.name}'s first {num_layers} of {model.num_layers} layers: target decode "
        f"step x {fraction:.3f} (active weights)")


def with_draft(target: CostModel, draft: CostModel, draft_prefills: bool) -> CostModel:
    """``target`` (host overhead kept outside) with ``draft``'s passes added to its steps."""
    kernel, host = split_host(target)
    draft_kernel, _ = split_host(draft)
    return with_overhead(SpeculativeCost(kernel, draft_kernel, draft_prefills), host)


__all__ = ["LayerFractionCost", "SpeculativeCost", "draft_cost", "first_layers",
           "layer_draft", "with_draft"]


def draft_cost(target: CostModel, model: ModelSpec, hw: HardwareSpec, tp: int,
               weight_dtype: str, kv_dtype: str, draft: str | None, draft_layers: int | None,
               base_dir: str | None = None) -> tuple[CostModel, str]:
    """``target`` with a draft's passes added (``draft``: a model name or config path;
    ``draft_layers``: the target's first layers), and a label for the run's cost source.
    Errors name ``speculative.draft`` / ``speculative.draft_layers``."""
    if draft_layers is not None:
        cost, label = layer_draft(target, model, draft_layers)
        return with_draft(target, cost, draft_prefills=False), label
    assert draft is not None
    try:
        draft_model = get_model(draft, base_dir=base_dir, where="speculative.draft")
        if draft_model.vocab_size != model.vocab_size:
            raise ConfigError(f"its vocabulary ({draft_model.vocab_size:,}) differs from "
                              f"{model.name}'s ({model.vocab_size:,}): a draft must share the "
                              "target's tokenizer")
        cost, used = cost_model_from_config({}, draft_model, hw, tp, weight_dtype, kv_dtype,
                                            where="speculative.draft")
    except ConfigError as e:
        text = str(e)
        raise (e if text.startswith("speculative.draft") else
               ConfigError(f"speculative.draft = {draft!r}: {text}")) from None
    return with_draft(target, cost, draft_prefills=True), f"{draft_model.name}: {used}"
