"""List removal and lookup by identity, for lists of requests.

``Sequence`` compares by identity (``eq=False``), so ``list.remove`` and ``list.index``
find the same element these do; but they call a rich comparison per element they pass
(~100 instructions each), and a busy replica's ``running`` list holds a hundred or more.
Compiled (simulator/accel.py), ``is`` is one pointer comparison; as Python, the loop costs
more than ``list.index``'s C loop, which is used there instead (``python
benchmarks/hot_path_parts.py`` times both, in each core).
"""

from __future__ import annotations

from typing import Any

from simulator.accel import compiled_module

_COMPILED = compiled_module(__file__)


def index_same(items: list[Any], item: object) -> int:
    """``items.index(item)`` for elements that compare by identity."""
    if not _COMPILED:
        return items.index(item)
    for i in range(len(items)):
        if items[i] is item:
            return i
    raise ValueError(f"{item!r} is not in the list")


def remove_same(items: list[Any], item: object) -> None:
    """``items.remove(item)`` for elements that compare by identity."""
    del items[index_same(items, item)]
