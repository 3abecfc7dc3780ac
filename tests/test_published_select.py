"""benchmarks/published.py's case selection: ``--case`` and ``--group`` each repeatable."""

from __future__ import annotations

import pytest

from benchmarks.published import select
from benchmarks.published_cases import load_cases
from simulator.errors import ConfigError


@pytest.fixture(scope="module")
def cases():
    return load_cases()


def test_two_groups_select_the_cases_of_either(cases) -> None:
    nim = select(cases, [], ["trtllm-nim-1.8"])
    v011 = select(cases, [], ["vllm-v1-0.11"])
    both = select(cases, [], ["trtllm-nim-1.8", "vllm-v1-0.11"])
    assert {c.id for c in both} == {c.id for c in nim} | {c.id for c in v011}
    assert len(both) == len(nim) + len(v011)  # the groups share no case
    assert all(c.group.startswith("trtllm-nim-1.8") for c in nim)


def test_no_group_means_every_case_and_ids_narrow_within_groups(cases) -> None:
    assert len(select(cases, [])) == len(cases) == len(select(cases, [], None))
    ids = ["nim1.8.0-h100-sxm-llama-3.1-8b"]
    inside = select(cases, ids, ["trtllm-nim-1.8"])
    assert inside and all(c.id.startswith(ids[0]) for c in inside)
    with pytest.raises(ConfigError, match="no case matches"):
        select(cases, ids, ["vllm-v1-0.11"])  # those ids are in neither group named
