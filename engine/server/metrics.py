"""Prometheus metrics of the server, with vLLM's names, in the text format (version 0.0.4).

Written by hand (no prometheus_client): a few gauges, counters and histograms. Every
sample carries the label ``model_name`` as vLLM's do, so dashboards built for vLLM read
this server too. What each metric observes, in the engine's time base.

Gauges (after the engine's last step):

- ``vllm:num_requests_running``: requests holding KV cache;
- ``vllm:num_requests_waiting``: requests arrived but not yet scheduled;
- ``vllm:kv_cache_usage_perc`` (and vLLM's older ``vllm:gpu_cache_usage_perc``): KV blocks
  used / total, a fraction in [0, 1] as in vLLM despite the name.

Counters: ``vllm:prompt_tokens_total`` (when a request's prefill ends),
``vllm:generation_tokens_total`` (as emitted), ``vllm:request_success_total``
(``finished_reason="length"``, or ``"stop"`` when a stop string ended the output: EOS is
never honoured), ``servesim:request_rejected_total`` (requests the engine refused because
they can never fit), ``servesim:request_aborted_total`` (requests dropped because their
client disconnected; never counted as successes).

Histograms (s): ``vllm:time_to_first_token_seconds`` (first token - arrival),
``vllm:time_per_output_token_seconds`` (each gap between consecutive tokens of a request),
``vllm:request_queue_time_seconds`` (first scheduled - arrival) and
``vllm:e2e_request_latency_seconds`` (last token - arrival), the last two per finished
request.

``time_per_output_token_seconds`` observes every inter-token gap, as vLLM did under that
name (newer vLLM calls it ``inter_token_latency_seconds``).
"""

from __future__ import annotations

import bisect
import math
import threading
from dataclasses import dataclass, field

from engine.server.live_api import Gauges
from simulator.policies import Sequence

# Bucket upper bounds (s): vLLM's ranges, with finer low buckets for CPU and small models.
TTFT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0)
TPOT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,
                0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0,
                   15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0)


@dataclass(slots=True)
class Histogram:
    """Cumulative-bucket histogram (Prometheus semantics: ``le`` = less or equal)."""

    bounds: tuple[float, ...]
    counts: list[int] = field(init=False)  # per bucket (not cumulative), last = +Inf
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        if math.isnan(value):
            return
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def lines(self, name: str, labels: str) -> list[str]:
        out, running = [], 0
        for bound, n in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += n
            le = "+Inf" if math.isinf(bound) else repr(float(bound))
            out.append(f'{name}_bucket{{le="{le}",{labels}}} {running}')
        out.append(f"{name}_sum{{{labels}}} {self.total!r}")
        out.append(f"{name}_count{{{labels}}} {self.count}")
        return out


_HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": ("Time to first token, s.", TTFT_BUCKETS),
    "vllm:time_per_output_token_seconds": ("Gap between consecutive output tokens, s.",
                                           TPOT_BUCKETS),
    "vllm:request_queue_time_seconds": ("Time from arrival to first scheduled, s.",
                                        LATENCY_BUCKETS),
    "vllm:e2e_request_latency_seconds": ("Time from arrival to last token, s.",
                                         LATENCY_BUCKETS),
}
_COUNTERS = {
    "vllm:prompt_tokens": "Prompt tokens prefilled.",
    "vllm:generation_tokens": "Output tokens generated.",
    "vllm:request_success": "Requests finished.",
    "servesim:request_rejected": "Requests refused by the engine (they can never fit).",
    "servesim:request_aborted": "Requests dropped because their client went away.",
}


class ServerMetrics:
    """Counters and histograms fed by the engine thread, rendered by /metrics."""

    def __init__(self, model_name: str, kv_blocks_total: int) -> None:
        self.labels = f'model_name="{_escape(model_name)}"'
        self.kv_blocks_total = kv_blocks_total
        self.histograms = {name: Histogram(b) for name, (_, b) in _HISTOGRAMS.items()}
        self.counters = dict.fromkeys(_COUNTERS, 0)
        self.stopped = 0  # of the successes, those a stop string ended (finished_reason="stop")
        self._lock = threading.Lock()

    def token(self, seq: Sequence, time_s: float, previous_s: float | None) -> None:
        """An output token; ``previous_s`` is the request's last token time (None: first)."""
        with self._lock:
            self.counters["vllm:generation_tokens"] += 1
            if previous_s is None:
                self.counters["vllm:prompt_tokens"] += seq.prompt_tokens
                self.histograms["vllm:time_to_first_token_seconds"].observe(
                    time_s - seq.arrival_s)
            else:
                self.histograms["vllm:time_per_output_token_seconds"].observe(
                    time_s - previous_s)

    def done(self, seq: Sequence, stopped: bool = False) -> None:
        """A request finished (``stopped``: a stop string ended it) or was rejected."""
        with self._lock:
            if seq.reason:
                self.counters["servesim:request_rejected"] += 1
                return
            self.counters["vllm:request_success"] += 1
            self.stopped += stopped
            self.histograms["vllm:request_queue_time_seconds"].observe(
                seq.scheduled_s - seq.arrival_s)
            self.histograms["vllm:e2e_request_latency_seconds"].observe(
                seq.finish_s - seq.arrival_s)

    def aborted(self, seq: Sequence) -> None:
        """A request dropped because its client went away: not a success."""
        with self._lock:
            self.counters["servesim:request_aborted"] += 1

    def render(self, gauges: Gauges) -> str:
        """The exposition text."""
        usage = gauges.kv_blocks_used / self.kv_blocks_total if self.kv_blocks_total else 0.0
        lab = self.labels
        lines: list[str] = []
        for name, help_text, value in (
                ("vllm:num_requests_running", "Requests holding KV cache.", gauges.running),
                ("vllm:num_requests_waiting", "Requests waiting to be scheduled.",
                 gauges.waiting),
                ("vllm:kv_cache_usage_perc", "KV cache usage (1 = full).", usage),
                ("vllm:gpu_cache_usage_perc", "KV cache usage (1 = full); older name.", usage)):
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge",
                      f"{name}{{{lab}}} {float(value)!r}"]
        with self._lock:
            for name, help_text in _COUNTERS.items():
                total = f"{name}_total"
                lines += [f"# HELP {total} {help_text}", f"# TYPE {total} counter"]
                if name != "vllm:request_success":
                    lines.append(f"{total}{{{lab}}} {float(self.counters[name])!r}")
                    continue
                length = self.counters[name] - self.stopped
                for why, value in (("length", length), ("stop", self.stopped)):
                    lines.append(f'{total}{{finished_reason="{why}",{lab}}} {float(value)!r}')
            for name, (help_text, _) in _HISTOGRAMS.items():
                lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
                lines += self.histograms[name].lines(name, lab)
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
