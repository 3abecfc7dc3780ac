"""benchmarks/client_itl.py: a client's gaps between a request's chunks, worked by hand."""

from __future__ import annotations

import pandas as pd

from benchmarks.client_itl import client_gaps_ms


def test_a_prefill_only_step_between_two_chunks_is_inside_the_gap() -> None:
    # replica 0: a prefill (0-1 s, A's first token), a decode (1-2), a prefill-only step
    # (2-3, another request's prompt), a decode (3-4, A's last token); replica 1: B's
    # prefill (0-0.5) and two decodes ending at 1.0 and 1.5. A's gaps: 1 s, then 2 s (the
    # prefill-only step inside); B's: 0.5 s and 0.5 s; C finished with one token: none.
    steps = pd.DataFrame({
        "replica": [0, 0, 0, 0, 1, 1, 1],
        "end_s": [1.0, 2.0, 3.0, 4.0, 0.5, 1.0, 1.5],
        "num_decode_tokens": [0, 1, 0, 1, 0, 1, 1],
    })
    requests = pd.DataFrame({
        "replica": [0, 1, 0], "first_token_s": [1.0, 0.5, 3.0], "finish_s": [4.0, 1.5, 3.0],
        "status": ["finished"] * 3, "output_tokens": [3, 3, 1],
    })
    assert sorted(client_gaps_ms(requests, steps).tolist()) == [500.0, 500.0, 1000.0, 2000.0]
