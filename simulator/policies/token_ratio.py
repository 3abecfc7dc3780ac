"""SGLang's ``new_token_ratio``: its estimate of how much of their output running requests
will still generate, kept per replica (see :mod:`simulator.policies.admission`).

Constants are SGLang's defaults (python/sglang/global_config.py and srt/environ.py:
init ratio 0.7 x schedule_conservativeness 1.0, min factor 0.14, 600 decay steps,
SGLANG_RETRACT_DECODE_STEPS 20, SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION 4096).
"""

from __future__ import annotations

from dataclasses import dataclass

INIT_NEW_TOKEN_RATIO = 0.7  # SGLang default_init_new_token_ratio (x schedule_conservativeness 1)
MIN_NEW_TOKEN_RATIO = INIT_NEW_TOKEN_RATIO * 0.14  # x default_min_new_token_ratio_factor
NEW_TOKEN_RATIO_DECAY = (INIT_NEW_TOKEN_RATIO - MIN_NEW_TOKEN_RATIO) / 600  # per decode step
RETRACT_DECODE_STEPS = 20  # tokens per kept request in the estimate after a retraction
CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION


@dataclass(slots=True)
class TokenRatio:
    """SGLang's ``new_token_ratio`` on one replica, counted in decode steps.

    Its value after ``decode_steps`` decode steps is ``base`` less the decay for the
    decode steps since ``since_step``, never below the minimum.
    """

    base: float = INIT_NEW_TOKEN_RATIO  # value at ``since_step``
    since_step: int = 0  # ServerState.decode_steps when ``base`` was set

    def value(self, decode_steps: int) -> float:
        """The ratio now (``decode_steps``: the replica's decode steps so far)."""
        decayed = self.base - NEW_TOKEN_RATIO_DECAY * (decode_steps - self.since_step)
        return max(decayed, MIN_NEW_TOKEN_RATIO)

    def set(self, value: float, decode_steps: int) -> None:
        """Start again from ``value`` (a retraction's estimate, or the initial ratio)."""
        self.base = value
        self.since_step = decode_steps
