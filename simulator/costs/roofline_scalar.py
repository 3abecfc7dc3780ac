"""The roofline step time of one step in plain Python floats, for the simulator's hot loop.

:class:`~simulator.costs.roofline.RooflineCost` writes its formula once over numbers or
arrays; for one step that meant a microsecond of numpy overhead per call (``np.interp``
on one message size, ``np.where``). :class:`ScalarRoofline` evaluates the same terms in
the same order on floats, so its result is bit for bit the formula's (a test checks it on
a grid of shapes against the vectorised path), and caches the terms that depend only on
the step's token count ``T = P + D + S``: the matmuls' roofline ``t_mm`` and the
all-reduce time.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.costs.roofline_constants import RooflineConstants

_MAX_CACHED = 1 << 16  # token counts remembered (a step has at most a few thousand tokens)


class ScalarRoofline:
    """One step's roofline time from floats ``P, A, D, C, n_req`` (roofline.py's symbols)."""

    __slots__ = ("_k", "_lat", "_step", "_per_req", "_by_tokens", "_consts", "_win",
                 "_latent")

    def __init__(self, k: RooflineConstants, allreduce_latency_s: float,
                 per_request_s: float) -> None:
        self._k = k
        self._lat = allreduce_latency_s
        self._step = k.step_s  # t_step + L t_layer
        self._per_req = per_request_s
        self._by_tokens: dict[float, tuple[float, float]] = {}  # T -> _token_terms(T)
        # the constants of every step, unpacked at once (a NamedTuple field read costs a
        # descriptor call each): kv bytes per token, attention FLOPs per pair, 1 / attention
        # peak, compute scale, bandwidth of the KV reads, reads of a decode row's cache
        self._consts = (k.kv_bytes_per_token, k.attn_flops_per_pair, k.inv_peak_attn,
                        k.compute_scale, k.kv_mem_bw, k.decode_kv_reads)
        # a sliding-window model's W, its window layers' FLOPs per pair and KV bytes per
        # token; None for every other model, so their steps pay one test of a slot
        self._win = ((k.window, k.win_attn_flops_per_pair, k.win_kv_bytes_per_token)
                     if k.window else None)
        # latent attention's extra FLOPs a decode pair (0.0: every other model)
        self._latent = k.decode_attn_extra_flops

    def _token_terms(self, t: float) -> tuple[float, float]:
        """(t_mm, t_ar) of a step of ``t`` tokens: sqrt(compute^2 + reads^2) of the matmuls
        (roofline.py's smooth maximum), and the all-reduces (under attention data
        parallelism, the experts' all-gathers and reduce-scatters)."""
        k = self._k
        if k.moe_curve is None:
            experts_hit = k.num_experts * (1.0 - k.miss_prob**t) if k.num_experts else 0.0
            weights = k.shared_bytes + experts_hit * k.expert_bytes
            mm_c = k.flops_per_token * t * k.inv_peak_mm * k.compute_scale
            mm_m = weights / k.mem_bw
            matmul_s = math.sqrt(mm_c * mm_c + mm_m * mm_m)
        else:  # the experts from their measured layer (roofline.py's order)
            mm_c = k.shared_flops_per_token * t * k.inv_peak_mm * k.compute_scale
            mm_m = k.shared_bytes / k.mem_bw
            matmul_s = (math.sqrt(mm_c * mm_c + mm_m * mm_m)
                        + k.moe_layers * k.moe_curve.time_s_scalar(t))
        allreduce_s = 0.0 * t
        if k.num_allreduces and k.ar_curve is not None:
            allreduce_s = k.num_allreduces * k.ar_curve.time_s_scalar(
                k.ar_message_bytes_per_token * t)
        elif k.num_allreduces:
            per_ar = self._lat + k.ar_bytes_per_token * t / k.ar_link_bw
            allreduce_s = k.num_allreduces * per_ar
        if k.num_dispatches:  # attention data parallel: the experts' gather and scatter
            nbytes = k.ar_message_bytes_per_token * t
            if k.dispatch_curves:
                gather, scatter = k.dispatch_curves
                dispatch_s = gather.time_s_scalar(nbytes) + scatter.time_s_scalar(nbytes)
            else:
                one = self._lat + k.dispatch_bytes_per_token * t / k.ar_link_bw
                dispatch_s = one + one
            allreduce_s = allreduce_s + k.num_dispatches * dispatch_s
        terms = (matmul_s, allreduce_s)
        if len(self._by_tokens) >= _MAX_CACHED:
            self._by_tokens.clear()
        self._by_tokens[t] = terms
        return terms

    def matmul_s(self, t: float) -> float:
        """``t_mm`` of a step of ``t`` tokens, cached by ``t`` as :meth:`time` caches it."""
        terms = self._by_tokens.get(t)
        return (terms if terms is not None else self._token_terms(t))[0]

    def time(self, p: float, a: float, d: float, c: float, n_req: float, s: float = 0.0,
             w: float = 0.0) -> float:
        """Seconds of one step (``RooflineTerms.total_s`` of the same floats; ``s``, ``w``:
        a speculative step's drafts verified and their query-key pairs)."""
        t = p + d + s
        terms = self._by_tokens.get(t)
        matmul_s, allreduce_s = terms if terms is not None else self._token_terms(t)
        kv_bytes, attn_flops, inv_peak_attn, compute_scale, kv_bw, reads = self._consts
        x = a / (p if p >= 1.0 else 1.0) - p / 2
        cache_read = 0.0 if 0.0 >= x else x
        flops = attn_flops * (a + c + w)
        if self._latent:  # roofline.py's latent attention, in its order
            flops = flops + self._latent * (c + w)
        read = kv_bytes * (c * reads + cache_read + t)
        win = self._win
        if win is not None:  # roofline.py's window layers, in its order
            window, win_flops, win_kv = win
            c_win = c if c <= d * window else d * window
            a_win = a if a <= p * window else p * window
            flops = flops + win_flops * (a_win + c_win + w)
            r_win = cache_read if cache_read <= window else window
            read = read + win_kv * (c_win * reads + r_win + t)
        attn_c = flops * inv_peak_attn * compute_scale
        attn_m = read / kv_bw
        overhead_s = self._step + self._per_req * n_req
        return (overhead_s + matmul_s + (attn_c if attn_c >= attn_m else attn_m)
                + allreduce_s)

    def decode_time(self, d: int, c: int, num_finished: int) -> float:
        """Seconds of a pure-decode step of ``d`` rows attending ``c`` tokens: :meth:`time`
        with ``P = A = 0`` written out (the cached read ``R`` is then 0.0, ``A + C`` is C)."""
        t = 0.0 + d
        terms = self._by_tokens.get(t)
        matmul_s, allreduce_s = terms if terms is not None else self._token_terms(t)
        kv_bytes, attn_flops, inv_peak_attn, compute_scale, kv_bw, reads = self._consts
        ctx = float(c)
        flops = attn_flops * (0.0 + ctx)
        if self._latent:  # time()'s latent attention (W = 0)
            flops = flops + self._latent * (ctx + 0.0)
        read = kv_bytes * (ctx * reads + 0.0 + t)
        win = self._win
        if win is not None:  # the window layers (time()'s, with P = A = R = 0)
            window, win_flops, win_kv = win
            c_win = ctx if ctx <= t * window else t * window
            flops = flops + win_flops * (0.0 + c_win + 0.0)
            read = read + win_kv * (c_win * reads + 0.0 + t)
        attn_c = flops * inv_peak_attn * compute_scale
        attn_m = read / kv_bw
        overhead_s = self._step + self._per_req * num_finished
        return (overhead_s + matmul_s + (attn_c if attn_c >= attn_m else attn_m)
                + allreduce_s)
