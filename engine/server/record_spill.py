"""Records that left a live server's memory, on disk: ``<records-out>/records-parts/``.

Each chunk the :class:`~engine.server.record_keeper.RecordKeeper` takes out of memory is
written as up to three Parquet part files, numbered in the order they left::

    records-parts/requests-000001.parquet   request records (contract 4, no point column)
    records-parts/steps-000001.parquet      step-log rows
    records-parts/tokens-000001.parquet     request_id, token_index, time_s

At shutdown :func:`engine.server.records.write_records` merges the parts and what is still
in memory into ``requests.parquet``, ``steps.parquet`` and ``tokens.parquet`` (one part in
memory at a time) and removes the folder. A server killed before that leaves its parts: no
record is lost, and the next server refuses to start on them until they are moved away.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pandas as pd

from simulator.atomic import atomic_write
from simulator.errors import ConfigError

PARTS = "records-parts"
TABLES = ("requests", "steps", "tokens")


def part_files(folder: Path, table: str) -> list[Path]:
    """The part files of ``table`` under ``folder`` (a ``--records-out``), in order."""
    return sorted((Path(folder) / PARTS).glob(f"{table}-*.parquet"))


class RecordSpill:
    """Writes chunks of records to ``<folder>/records-parts`` (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.parts = self.folder / PARTS
        self.count = 0  # chunks written

    def check(self) -> None:
        """Refuse a folder that holds parts of an earlier server (it did not shut down)."""
        if any(part_files(self.folder, t) for t in TABLES):
            raise ConfigError(
                f"--records-out {str(self.folder)!r}: {self.parts} holds records of an "
                "earlier server that did not shut down cleanly; move them away first")

    def write(self, requests: pd.DataFrame, steps: pd.DataFrame, tokens: pd.DataFrame) -> None:
        """Write one chunk (empty tables are skipped)."""
        self.count += 1
        for table, frame in zip(TABLES, (requests, steps, tokens), strict=True):
            if len(frame):
                atomic_write(self.parts / f"{table}-{self.count:06d}.parquet",
                             partial(_to_parquet, frame))


def _to_parquet(frame: pd.DataFrame, path: Path) -> None:
    frame.to_parquet(path, index=False)
