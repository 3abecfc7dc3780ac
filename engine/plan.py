"""What a profiling sweep measures: :class:`SweepPlan` (torch-free, so the CLI can show its
defaults without importing the engine)."""

from __future__ import annotations

from dataclasses import dataclass


def _positive(name: str, values: tuple[int, ...]) -> None:
    if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise ValueError(f"{name}={values!r} must be a non-empty list of ints >= 1")


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """Which shapes to measure and how often. Defaults take about a minute for ``tiny`` on
    one CPU thread."""

    prefill_batches: tuple[int, ...] = (1, 2, 4, 8)
    prompt_lens: tuple[int, ...] = (16, 64, 128, 256, 512)
    decode_batches: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 12, 16)  # every small batch:
    # on CPU the GEMM kernel differs by row count (3 rows cost more than 4)
    context_lens: tuple[int, ...] = (64, 256, 512, 1024)
    mixed_batches: tuple[int, ...] = (1, 4, 16)  # decode rows beside one prefill chunk
    mixed_chunks: tuple[int, ...] = (32, 128, 512)  # that chunk's tokens
    mixed_context: int = 256  # cached tokens of each decode row in a mixed step
    repeats: int = 10  # timed runs per shape; the row holds their mean (and median)
    warmup: int = 2  # untimed runs per new shape
    seed: int = 0  # token ids are drawn from torch.Generator(seed)

    def __post_init__(self) -> None:
        for name in ("prefill_batches", "prompt_lens", "decode_batches", "context_lens"):
            _positive(name, getattr(self, name))
        for name in ("mixed_batches", "mixed_chunks"):  # () = no mixed shapes
            if getattr(self, name):
                _positive(name, getattr(self, name))
        _positive("mixed_context", (self.mixed_context,))
        if self.repeats < 1 or self.warmup < 0:
            raise ValueError(f"repeats={self.repeats} must be >= 1 and warmup={self.warmup} >= 0")

    def shapes(self) -> list[tuple[str, int, int]]:
        """(phase, batch, prompt / context / chunk length): prefill, decode, then mixed.

        A mixed shape is ``batch`` decode rows at ``mixed_context`` plus one chunk.
        """
        pre = [("prefill", b, n) for b in self.prefill_batches for n in self.prompt_lens]
        dec = [("decode", b, c) for b in self.decode_batches for c in self.context_lens]
        mix = [("mixed", b, n) for b in self.mixed_batches for n in self.mixed_chunks]
        return pre + dec + mix
