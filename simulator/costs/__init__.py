"""Cost models: what one engine step costs in seconds.

Three forms behind one interface (:class:`CostModel`): the fitted :class:`LinearCost` and
:class:`PiecewiseCost` (fixed cost per step kind, knees in tokens), and the
:class:`RooflineCost` prior; :class:`CostProfile` stores any of them as JSON (data
contract 3) and :func:`cost_model_from_config` turns a scenario's ``[cost]`` section
into one.
"""

from simulator.costs.base import CostModel, ScaledCost
from simulator.costs.linear import LinearCost
from simulator.costs.piecewise import PiecewiseCost
from simulator.costs.profile import (
    CostProfile,
    cost_model_from_config,
    find_shipped_profile,
    load_profile,
    profile_file_name,
    save_profile,
    shipped_profiles,
)
from simulator.costs.roofline import RooflineCost, RooflineTerms

__all__ = [
    "CostModel",
    "CostProfile",
    "LinearCost",
    "PiecewiseCost",
    "RooflineCost",
    "RooflineTerms",
    "ScaledCost",
    "cost_model_from_config",
    "find_shipped_profile",
    "load_profile",
    "profile_file_name",
    "save_profile",
    "shipped_profiles",
]
