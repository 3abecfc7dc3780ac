"""The ``[workload]`` section of a scenario: ``WorkloadConfig.from_dict`` validates it.

simulator/workload/build.py turns a validated section into a request table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from simulator.errors import ConfigError
from simulator.scenario_fields import spec
from simulator.workload.classes import WorkloadClasses
from simulator.workload.clients import CLIENT_STARTS
from simulator.workload.lengths import (
    CHAT_OUTPUT,
    CHAT_PROMPT,
    LengthDist,
    check_keys,
    get_choice,
    get_number,
    length_dist_from_dict,
)
from simulator.workload.prefix_knobs import check_prefix_knobs
from simulator.workload.rate_schedule import SCHEDULED_ARRIVALS, RateSchedule
from simulator.workload.traces import TRACE_FORMATS
from simulator.workload.transforms import (
    CONTEXT_RULES,
    ContextRule,
)

ARRIVALS: tuple[str, ...] = ("poisson", "gamma", "constant", "closed", "trace")
SYNTHETIC: tuple[str, ...] = ("poisson", "gamma", "constant")
DEFAULT_RATE_PER_S = 1.0  # open-loop synthetic arrivals when no rate is given
DEFAULT_NUM_REQUESTS = 1000  # synthetic lengths when no num_requests is given
# Chat-like defaults fitted to the Azure conv and ShareGPT samples (numbers in lengths.py)
DEFAULT_PROMPT = CHAT_PROMPT  # LogNormal(mean 1100 tokens, sigma 1.0)
DEFAULT_OUTPUT = CHAT_OUTPUT  # LogNormal(mean 265 tokens, sigma 0.9)


@dataclass(frozen=True, slots=True)
class WorkloadConfig:
    """What traffic to send: arrival process, request lengths or a trace.

    ``arrival`` picks the process: poisson / gamma / constant at ``rate`` (synthetic,
    open loop); ``closed``: ``concurrency`` clients each send a request, wait for the
    response, think (exponential with mean ``think_time_s``, or 0) and send the next,
    ``num_requests`` in total, each client's first at its ``client_start``
    (simulator/workload/clients.py); ``trace``: arrivals from the ``trace`` file, rescaled
    to ``rate`` when one is given. Lengths come from the ``trace`` file when one is
    set (its prompt/output pairs, first ``num_requests`` rows), else from the
    ``prompt`` and ``output`` distributions. ``max_concurrency`` caps the requests in
    flight of an open loop: one due while that many are outstanding is sent when the first
    of them ends (FIFO), as a client's semaphore does (simulator/cluster.py).
    """

    arrival: str = spec("poisson", choices=ARRIVALS)
    # None = DEFAULT_RATE_PER_S (synthetic), the trace's own (trace); inf = all at t = 0
    rate: float | None = spec(None, unit="req/s", low=0, low_open=True, allow_inf=True)
    cv: float = spec(1.0, low=0, low_open=True)  # gamma only: CV of inter-arrival gaps
    # None = DEFAULT_NUM_REQUESTS, or every trace row
    num_requests: int | None = spec(None, unit="requests", low=1)
    concurrency: int | None = spec(None, unit="clients", low=1)  # closed only
    # open loop only: most requests in flight at the client; a request due while this many
    # are outstanding waits for one to end (vLLM bench --max-concurrency); None = no cap
    max_concurrency: int | None = spec(None, unit="requests", low=1)
    think_time_s: float = spec(0.0, unit="s", low=0)  # closed only: mean think time (0 = none)
    # closed only: when clients first send: all at 0, over one estimated cycle, over a ramp
    client_start: str = spec("together", choices=CLIENT_STARTS)
    client_ramp_s: float = spec(0.0, unit="s", low=0)  # client_start = "ramp": its length
    prompt: LengthDist = DEFAULT_PROMPT  # prompt tokens per request
    output: LengthDist = DEFAULT_OUTPUT  # output tokens per request
    trace: str | None = None  # path of a trace file giving lengths (and maybe arrivals)
    trace_format: str = spec("auto", choices=("auto", *TRACE_FORMATS))
    context_rule: ContextRule = "truncate"  # over-long requests: "truncate" or "drop"
    # piecewise-constant rates over time in place of rate (rate_schedule.py, docs/fleet.md)
    rate_schedule: RateSchedule | None = None
    # prefix identity (prefix_knobs.py): tokens of a shared system prompt (0: none), the
    # share of requests (sessions) that start with one, how many distinct ones
    system_prompt_tokens: int = spec(0, unit="tokens", low=0)
    system_prompt_share: float = spec(1.0, low=0, high=1)
    system_prompts: int = spec(1, unit="prompts", low=1)
    session_turns: int = spec(1, unit="turns", low=1)  # closed only: turns per session
    # priority classes, most urgent first: name = share, or name = { share, priority,
    # SLO targets } (workload/classes.py, docs/fleet.md); None: one class, 0
    classes: WorkloadClasses | None = None
    where: str = field(default="workload", compare=False, repr=False)  # name in errors
    # fields the table gave but the trace overrides ("prompt", "output"); said in the notes
    ignored: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        w, own = self.where, {k: getattr(self, k) for k in _KEYS}
        arrival = get_choice(own, "arrival", w, ARRIVALS)
        get_choice(own, "trace_format", w, ("auto", *TRACE_FORMATS))
        get_choice(own, "context_rule", w, CONTEXT_RULES)
        get_choice(own, "client_start", w, CLIENT_STARTS)
        ramp = get_number(own, "client_ramp_s", w, low=0)
        object.__setattr__(self, "client_ramp_s", float(ramp))
        rate = get_number(own, "rate", w, None, low=0, low_open=True, allow_inf=True)
        num = get_number(own, "num_requests", w, None, integer=True, low=1)
        cap = get_number(own, "max_concurrency", w, None, integer=True, low=1)
        object.__setattr__(self, "max_concurrency", cap)
        object.__setattr__(self, "rate", None if rate is None else float(rate))
        object.__setattr__(self, "num_requests", num)
        object.__setattr__(self, "cv", float(get_number(own, "cv", w, low=0, low_open=True)))
        think = get_number(own, "think_time_s", w, low=0)
        object.__setattr__(self, "think_time_s", float(think))
        for key in ("prompt", "output"):
            if not isinstance(own[key], LengthDist):
                raise ConfigError(f"{w}.{key} = {own[key]!r}: must be a length distribution")
        self._check_combination(arrival, w)
        self._check_prefix_knobs(arrival, w)
        self._check_schedule(arrival, w)
        if arrival in SYNTHETIC and self.rate is None and self.rate_schedule is None:
            object.__setattr__(self, "rate", DEFAULT_RATE_PER_S)
        if self.trace is None and self.num_requests is None:
            object.__setattr__(self, "num_requests", DEFAULT_NUM_REQUESTS)

    def _check_combination(self, arrival: str, w: str) -> None:
        """Fields that only make sense with some arrival processes."""
        closed = arrival == "closed"
        if closed:
            clients = get_number(
                {"concurrency": self.concurrency}, "concurrency", w, integer=True, low=1
            )
            object.__setattr__(self, "concurrency", clients)
        elif self.concurrency is not None:
            raise ConfigError(
                f"{w}.concurrency = {self.concurrency!r}: only for arrival = 'closed'")
        if closed and self.max_concurrency is not None:
            raise ConfigError(
                f"{w}.max_concurrency = {self.max_concurrency!r}: only for an open loop "
                "(poisson, gamma, constant, trace); a closed loop's cap is its concurrency")
        if not closed and self.think_time_s != 0:
            raise ConfigError(
                f"{w}.think_time_s = {self.think_time_s!r}: only for arrival = 'closed'"
            )
        if not closed and self.client_start != "together":
            raise ConfigError(
                f"{w}.client_start = {self.client_start!r}: only for arrival = 'closed'")
        if (self.client_start == "ramp") != (self.client_ramp_s > 0):
            raise ConfigError(
                f"{w}.client_ramp_s = {self.client_ramp_s:g}: give a ramp > 0 s exactly "
                f"when client_start = 'ramp' (it is {self.client_start!r})")
        if closed and self.rate is not None:
            raise ConfigError(
                f"{w}.rate = {self.rate}: a closed loop has no rate (clients "
                "send when answered); set concurrency and think_time_s"
            )
        if arrival != "gamma" and self.cv != 1.0:
            raise ConfigError(f"{w}.cv = {self.cv}: only for arrival = 'gamma'")
        if arrival == "trace" and self.trace is None:
            raise ConfigError(f"{w}.trace is required for arrival = 'trace'")
        if self.trace is not None and (not isinstance(self.trace, str) or not self.trace):
            raise ConfigError(f"{w}.trace = {self.trace!r}: must be a file path")
        for key, default in (("prompt", DEFAULT_PROMPT), ("output", DEFAULT_OUTPUT)):
            if self.trace is not None and getattr(self, key) is not default:
                raise ConfigError(
                    f"{w}.{key}: the trace {self.trace} gives the lengths; drop {w}.{key} "
                    f"or {w}.trace (a scenario table with both keeps the trace's lengths)"
                )

    def _check_schedule(self, arrival: str, w: str) -> None:
        """``rate_schedule`` replaces ``rate``, for a poisson or constant open loop."""
        if self.rate_schedule is None:
            return
        if not isinstance(self.rate_schedule, RateSchedule):
            raise ConfigError(f"{w}.rate_schedule = {self.rate_schedule!r}: must be a table")
        if arrival not in SCHEDULED_ARRIVALS or self.rate is not None:
            raise ConfigError(f"{w}.rate_schedule: only with arrival in "
                              f"{list(SCHEDULED_ARRIVALS)} and no {w}.rate (it is {arrival!r}"
                              f", rate {self.rate!r})")

    def _check_prefix_knobs(self, arrival: str, w: str) -> None:
        own = {k: getattr(self, k) for k in _KEYS}
        tokens = get_number(own, "system_prompt_tokens", w, integer=True, low=0)
        share = float(get_number(own, "system_prompt_share", w, low=0))
        if share > 1:
            raise ConfigError(f"{w}.system_prompt_share = {share:g}: must be <= 1")
        prompts = get_number(own, "system_prompts", w, integer=True, low=1)
        turns = get_number(own, "session_turns", w, integer=True, low=1)
        object.__setattr__(self, "system_prompt_share", share)
        check_prefix_knobs(w, arrival=arrival, trace=self.trace, system_tokens=tokens,
                           share=share, num_prompts=prompts, turns=turns)

    @classmethod
    def from_dict(
        cls, d: Mapping[str, Any], where: str = "workload", base_dir: str | Path | None = None
    ) -> WorkloadConfig:
        """Validate a ``[workload]`` table; relative trace paths are taken from ``base_dir``."""
        if not isinstance(d, Mapping):
            raise ConfigError(f"{where} = {d!r}: must be a table")
        check_keys(d, _KEYS, where)
        kwargs: dict[str, Any] = {k: v for k, v in d.items() if k not in ("prompt", "output")}
        trace = d.get("trace")
        lengths = [k for k in ("prompt", "output") if k in d]
        if trace is not None:  # the trace supplies the lengths: the distributions step aside
            kwargs["ignored"] = tuple(lengths)
        else:
            for key in lengths:
                kwargs[key] = length_dist_from_dict(d[key], f"{where}.{key}", base_dir)
        if "rate_schedule" in d:
            kwargs["rate_schedule"] = RateSchedule.from_table(d["rate_schedule"],
                                                              f"{where}.rate_schedule")
        if isinstance(trace, str) and trace and base_dir is not None:
            kwargs["trace"] = str(Path(base_dir, trace))
        if "classes" in d:
            kwargs["classes"] = WorkloadClasses.from_value(d["classes"], f"{where}.classes")
        return cls(**kwargs, where=where)


_KEYS = tuple(f.name for f in fields(WorkloadConfig) if f.name not in ("where", "ignored"))
