"""The API server's token stream (``[cost] overhead`` ``stream_s``): a replica's output
tokens reach their clients through one first-in, first-out server.

An engine step ends with one output token for each of its decode rows and for each prompt
it completes; the engine goes on to the next step at once, but the server in front of it
(an OpenAI-compatible HTTP server: detokenising, framing a server-sent event, writing it)
handles the tokens one at a time, ``stream_s`` seconds each. A token reaches its client
when the server has handled it: the step's tokens queue behind what the server still has
to do, in the engine's order (the decode rows oldest first, then the prompts the step
completed: TensorRT-LLM's executor and vLLM's output processor both walk their requests
so). So the stream adds nothing while the server keeps up, and caps a replica's output at
``1 / stream_s`` tokens a second when it does not: the tokens then wait, and with them a
closed-loop client's next request (the driver sends it when the last token arrives).

The same server takes the requests in (``[cost] overhead`` ``intake_s``): each one, when it
arrives, joins the queue for ``intake_s`` seconds, and reaches the engine when the server
has taken it in (:meth:`TokenStream.take`). Tokens queue behind the requests that arrived
before them, so after a burst of N no token reaches a client before the server has taken
in the burst, N x ``intake_s`` (asyncio's one event loop in vLLM's and SGLang's API servers
reads the requests and writes the tokens in turn). With ``stream_s`` 0 the tokens cost
nothing but still wait their turn.

NIM's concurrency sweeps show that cap: Llama-3.1-8B on one H100 (NIM 1.8.0) delivered
13,348 tokens a second at 200 clients and 12,965 at 250, and NIM 1.0's Llama-3-8B on two
H100s levels off the same way while the engine alone would go on; docs/stacks.md ("NIM's
token stream").

:class:`TokenStream` keeps when the server is next free (``busy_s``) and, per step or per
run of steps, moves the first-token and finish times of the step's requests from the
step's end to when their tokens reach the client. A run of steps with ``s_j`` seconds of
tokens each, ending at ``e_j``, is the Lindley recursion ``B_j = max(B_{j-1}, e_j) + s_j``,
solved at once: ``B_j - S_j = max(B_0, max_{i<=j} (e_i - S_{i-1}))`` with ``S`` the
cumulative sums of ``s``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence as Seq

import numpy as np
import pandas as pd

from simulator.policies.state import Sequence


class TokenStream:
    """One replica's API server: it takes each request in, ``intake_s`` seconds, and streams
    the output tokens, ``token_s`` seconds each, one at a time in arrival order."""

    __slots__ = ("token_s", "intake_s", "busy_s")

    def __init__(self, token_s: float, intake_s: float = 0.0) -> None:
        for name, value in (("stream_s", token_s), ("intake_s", intake_s)):
            if not (value >= 0.0 and math.isfinite(value)):
                raise ValueError(f"{name}={value!r} must be a finite number >= 0")
        if token_s == 0.0 and intake_s == 0.0:
            raise ValueError("stream_s and intake_s are both 0: no server to queue at")
        self.token_s = token_s
        self.intake_s = intake_s
        self.busy_s = 0.0  # when the server has handled every token queued so far

    def take(self, now_s: float) -> float:
        """A request arrives at ``now_s``: when the server has taken it in (it reaches the
        engine then; ``now_s`` itself without an intake cost)."""
        if self.intake_s == 0.0:
            return now_s
        busy = self.busy_s
        self.busy_s = (busy if busy > now_s else now_s) + self.intake_s
        return self.busy_s

    def step(self, end_s: float, decode: Seq[Sequence], tokens: int,
             prefill: Seq[tuple[Sequence, int]], finished: Seq[Sequence]) -> None:
        """A step ending at ``end_s`` (already applied) emitted ``tokens`` for its ``decode``
        rows, in order, and a first token for each prompt of ``prefill`` it completed (after
        the rows): their first-token and finish times become the times the server hands
        those tokens out."""
        t = self.token_s
        if t == 0.0 and self.busy_s <= end_s:  # tokens cost nothing, none waits: as emitted
            return
        firsts = [seq for seq, _ in prefill if seq.first_token_s == end_s]
        start = self.busy_s if self.busy_s > end_s else end_s
        after = start + tokens * t  # the rows' tokens are out
        self.busy_s = after + len(firsts) * t
        for k, seq in enumerate(firsts):
            out = after + (k + 1) * t
            if seq.finish_s == seq.first_token_s:  # its first token is its last
                seq.finish_s = out
            seq.first_token_s = out
        if finished:  # (a prompt's only token is out already, past ``after``)
            n = len(finished)
            _rows_out(finished, decode, [start] * n, [tokens * t] * n, after)

    def run(self, ends: np.ndarray | list[float], tokens: np.ndarray | int,
            decode: Seq[Sequence], finished: Seq[Sequence]) -> None:
        """Steps ending at ``ends`` emitting ``tokens`` each (a number, or one a step) for
        the ``decode`` rows they share; ``finished`` ended in them (their ``finish_s``: the
        end of the step that emitted their last token)."""
        if self.token_s == 0.0 and self.busy_s <= float(ends[0]):  # none waits: as emitted
            return
        ends = np.asarray(ends, dtype=np.float64)
        service = np.broadcast_to(np.asarray(tokens, dtype=np.float64), ends.shape) * self.token_s
        before = np.concatenate(([0.0], np.cumsum(service)[:-1]))  # S_{j-1}
        # when the server turns to each step's tokens (the module docstring's closed form)
        starts = np.maximum(np.maximum.accumulate(ends - before), self.busy_s) + before
        self.busy_s = float(starts[-1] + service[-1])
        if finished:
            at = np.searchsorted(ends, [seq.finish_s for seq in finished]).tolist()
            _rows_out(finished, decode, starts[at].tolist(), service[at].tolist(),
                      float(starts[-1] + service[-1]))

    def idle(self, end_s: float, tokens: int) -> None:
        """A step ending at ``end_s`` emitted ``tokens`` and no request's first or last."""
        busy = self.busy_s
        self.busy_s = (busy if busy > end_s else end_s) + tokens * self.token_s


def _rows_out(finished: Seq[Sequence], decode: Seq[Sequence], start: list[float],
              rows_s: list[float], after: float) -> None:
    """Each of ``finished``'s last token, handed out from ``start[i]`` as its row's share of
    the ``rows_s[i]`` seconds its step's rows take (row order: ``decode``); a request that
    is no row (a recomputed prompt's later token) gets ``after``, past the rows."""
    order = {id(seq): i for i, seq in enumerate(decode)}
    rows = max(len(decode), 1)
    for seq, t0, span in zip(finished, start, rows_s, strict=True):
        i = order.get(id(seq))
        if i is not None:
            seq.finish_s = t0 + (i + 1) * span / rows
        elif seq.finish_s < after:
            seq.finish_s = after

def stream_summary(requests: pd.DataFrame, token_s: float, duration_s: float | None,
                   replicas: int) -> dict[str, float | None]:
    """The summary's keys with a token stream priced: ``stream_s`` and
    ``stream_utilization``, the share of the run the replicas' servers spent handing out
    the finished requests' tokens (near 1: the server, not the engine, sets the output
    rate)."""
    done = requests["status"] == "finished"
    tokens = float(requests.loc[done, "output_tokens"].sum())
    busy = (tokens * token_s / (duration_s * replicas)
            if duration_s is not None and duration_s > 0 and replicas > 0 else None)
    return {"stream_s": token_s, "stream_utilization": busy}
