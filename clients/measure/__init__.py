"""``servesim measure``: replay a workload against any OpenAI-compatible endpoint and record it.

The client side of validation: it sends a request table (a scenario's ``[workload]`` or a
trace) to a server (this engine's ``servesim serve``, vLLM, SGLang) at the table's
arrival times (open loop) or from N clients (closed loop), streams every answer and
writes the same request records (data contract 4) and summary (contract 5) the simulator
and the engine write, plus per-token times. No torch: only HTTP (httpx2) and the
simulator's workload, records and metrics.

- :mod:`.workload`: the request table and the prompts sent;
- :mod:`.client`: one streamed completion -> an :class:`~.client.Outcome`;
- :mod:`.loops`: open and closed loops with bounded concurrency and a progress bar;
- :mod:`.results`: outcomes -> records, token times and summary, written atomically.
"""

from clients.measure.client import MeasureError, Outcome
from clients.measure.loops import LoopConfig, measure
from clients.measure.results import MeasureRun, write_run
from clients.measure.workload import MeasureWorkload, load_workload

__all__ = ["LoopConfig", "MeasureError", "MeasureRun", "MeasureWorkload", "Outcome",
           "load_workload", "measure", "write_run"]
