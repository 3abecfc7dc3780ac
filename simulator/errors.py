"""Error types raised on bad input.

Every message names where the bad value came from (a file and line, or a
scenario field such as ``workload.rate``) and the value itself.
"""


class ConfigError(ValueError):
    """A scenario, spec or cost-profile field holds an impossible value."""


class TraceError(ValueError):
    """A trace file cannot be read; the message names the file, line and field."""


class CapacityError(ValueError):
    """The deployment cannot run at all (for example the weights do not fit in memory)."""
