"""Error types raised on bad input.

Every message names where the bad value came from (a file and line, or a
scenario field such as ``workload.rate``) and the value itself; a near miss of a known
name says which one was likely meant (:func:`did_you_mean`).
"""

import difflib
from collections.abc import Iterable


class ConfigError(ValueError):
    """A scenario, spec or cost-profile field holds an impossible value."""


class TraceError(ValueError):
    """A trace file cannot be read; the message names the file, line and field."""


class CapacityError(ValueError):
    """The deployment cannot run at all (for example the weights do not fit in memory)."""


def did_you_mean(word: object, known: Iterable[str]) -> str:
    """``" (did you mean 'name'?)"`` when ``word`` is a near miss of one of ``known`` (a
    typo: difflib's ratio 0.75 or more, case aside), else ``""``; for error messages."""
    if not isinstance(word, str):
        return ""
    lowered = {k.lower(): k for k in known}
    close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.75)
    return f" (did you mean {lowered[close[0]]!r}?)" if close else ""
