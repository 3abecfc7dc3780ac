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

sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config: object) -> None:
    """An empty profile cache for this test session (removed with the temp folder)."""
    folder = tempfile.mkdtemp(prefix="servesim-profile-cache-")
    os.environ["SERVESIM_PROFILE_CACHE"] = folder
