"""Preemption rules of the continuous policy: whom to evict when a running request needs a
KV block and none is free. Every stack evicts by recompute here: the victim's blocks are
freed and it computes its prompt and its outputs so far again when it is re-admitted.

``newest``          the last request of the running list (the one admitted last), back to
                    the head of the queue. vLLM v1 (vllm/v1/core/sched/scheduler.py:
                    ``self.running.pop()`` then ``self.waiting.prepend_request``, FCFS
                    policy), vLLM v0 (vllm/core/scheduler.py ``_schedule_running``:
                    ``running_queue.pop()``, recompute for single-sequence groups, then
                    ``waiting.appendleft``) and TensorRT-LLM MAX_UTILIZATION
                    (capacityScheduler.cpp: the last started request is paused; it keeps
                    its place in the active request list, ahead of later arrivals).
``fewest_outputs``  SGLang's ``retract_decode`` (python/sglang/srt/managers/schedule_batch.py):
                    the running request with the fewest output tokens, the longest prompt
                    among those, the later one among equals; retracted requests go to the
                    tail of the waiting queue (scheduler.py ``_extend_requests_to_queue``).

vLLM v0's swap mode (beam search and other multi-sequence groups) is not modelled: with
one sequence per request, which is what serving benchmarks send, v0 recomputes.
"""

from __future__ import annotations

from simulator.policies.state import Sequence

PREEMPTIONS = ("newest", "fewest_outputs")


def victim(rule: str, running: list[Sequence]) -> Sequence:
    """The running request ``rule`` evicts first: ``newest``, ``fewest_outputs``, or
    ``priority`` (scheduling = "priority": the least urgent, max (class, arrival_s), the
    later on ties; vLLM v1's ``max(self.running, key=lambda r: (r.priority,
    r.arrival_time))``)."""
    if rule == "newest":
        return running[-1]
    chosen = running[0]
    if rule == "priority":
        for seq in running:
            if (seq.priority, seq.arrival_s) >= (chosen.priority, chosen.arrival_s):
                chosen = seq
        return chosen
    for seq in running:  # "<=": the later of equal keys, as SGLang's stable sort and pop()
        if (seq.num_generated, -seq.prompt_tokens) <= (chosen.num_generated,
                                                        -chosen.prompt_tokens):
            chosen = seq
    return chosen


def requeues_at_tail(rule: str) -> bool:
    """Whether ``rule`` sends its victims to the tail of the queue (else the head)."""
    return rule == "fewest_outputs"


def unschedule(seq: Sequence, prefill: list[tuple[Sequence, int]], decode: list[Sequence]) -> int:
    """Take ``seq`` out of this step's batch lists; the tokens it had been given."""
    if seq in decode:
        decode.remove(seq)
        return 1
    for k, (s, n) in enumerate(prefill):
        if s is seq:
            del prefill[k]
            return n
    raise AssertionError(f"request {seq.request_id} was not scheduled")
