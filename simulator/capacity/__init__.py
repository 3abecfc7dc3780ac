"""Capacity planning: size and price deployments that serve a target rate within an SLO.

``build_candidates`` (scenario lists and flag lists -> candidates), ``plan`` (search,
cluster check, cost and ranking -> ``PlanResult``), ``pareto_front`` and the price table.
docs/capacity.md describes the method.
"""

from simulator.capacity.candidates import Candidate, build_candidates
from simulator.capacity.pareto import pareto_front
from simulator.capacity.plan import CandidateResult, PlanResult, plan
from simulator.capacity.prices import PriceTable, load_prices, price_table
from simulator.capacity.search import SearchSettings, sample_size

__all__ = [
    "Candidate", "CandidateResult", "PlanResult", "PriceTable", "SearchSettings",
    "build_candidates", "load_prices", "pareto_front", "plan", "price_table", "sample_size",
]
