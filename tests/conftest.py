"""Make the tests folder importable so tests can share tests/helpers.py; keep the per-user
profile cache out of the tests.

Profiles that ``servesim calibrate --here`` stored in the user's cache would change what a
default ``[cost]`` section resolves to, so every test session gets an empty cache of its
own (``SERVESIM_PROFILE_CACHE``); a test that calibrates this machine fills it for the
tests after it.
"""

import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config: object) -> None:
    """An empty profile cache for this test session (removed with the temp folder), and the
    simulator as Python unless ``SERVESIM_ACCEL=1`` is set: tests patch its classes, which
    the compiled core does not allow; tests/test_accel.py runs the compiled core beside
    the Python one in subprocesses and compares their answers."""
    folder = tempfile.mkdtemp(prefix="servesim-profile-cache-")
    os.environ["SERVESIM_PROFILE_CACHE"] = folder
    os.environ.setdefault("SERVESIM_ACCEL", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With the compiled core loaded (``SERVESIM_ACCEL=1`` and a build of these sources),
    skip the tests that patch or subclass its classes: a compiled class refuses both.
    They run in the default (Python) suite."""
    from simulator.accel import active

    if not active():
        return
    skip = pytest.mark.skip(reason="patches, subclasses or fakes a compiled class: runs with the "
                                   "Python core, the suite's default (SERVESIM_ACCEL=0)")
    for item in items:
        if "pure_python" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def tiny():  # noqa: ANN201 (a ServedModel; engine imported only when a test asks for it)
    """The served tiny model (random weights, byte text) on one CPU thread, for the server
    tests; engine tests that build the bare model define their own ``tiny``."""
    torch = pytest.importorskip("torch")
    from engine.server.model import load_served_model

    torch.set_num_threads(1)
    return load_served_model("tiny")
