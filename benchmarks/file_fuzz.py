"""Damaged copies of the files users hand servesim: every run must end in a result or in
one clear error line (exit 2) naming the file, never a traceback or a hang.

    python benchmarks/file_fuzz.py --seed 1 --runs 300
    python benchmarks/file_fuzz.py --seed 2 --runs 200 --kind table --show-errors

Each run takes one real file and damages it once, then hands it to the command that reads
it, in this process:

- ``trace``: request traces (../shared/traces' samples when present, else small ones of
  each layout written here), through ``servesim run scenarios/chat.toml --trace``;
- ``measured``: client result files (../shared/clients' GuideLLM and AIPerf files when
  present, and the vLLM bench JSONs in benchmarks/published_runs/), through ``servesim
  validate --measured``;
- ``profile``: a shipped cost profile, through ``servesim run --set cost.profile=``;
- ``table``: a shipped profile table (Parquet), through ``servesim calibrate``.

Text files lose a line, a header or a column, gain a blank line, a stray header or bytes,
are cut mid-line, get a byte-order mark or CRLF endings, or have one value set to an edge
(empty, a word, negative, NaN, inf, 1e309, a huge integer, a list, an object). JSON
documents have one value anywhere in the tree replaced or deleted. Tables have a cell,
a column, a phase or a metadata field damaged. The script prints each run that crashed (an
exception escaped ``servesim``) or timed out, then the counts; ``--show-errors`` prints
each kind of error message, to read them as a user would.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from benchmarks.fuzz_run import TIMEOUT_S, error_kind, report, run_cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
KINDS = ("trace", "measured", "profile", "table")
TEXT_EDGES = ["", "abc", "-5", "nan", "inf", "-inf", "1e309", "3.7", "99999999999999999999",
              "null", "0", "1e-30", " 12 ", "1;2", "true", "\u00e9"]
JSON_EDGES: list[Any] = [None, "", "abc", -5, float("nan"), float("inf"), 3.7, 10**20, 0, [],
                         {}, True, "12", [1, "x"]]
TEXT_DAMAGE = ("value", "value", "value", "drop line", "cut line", "blank line", "no header",
               "stray header", "drop column", "extra column", "bom", "crlf", "empty",
               "only header", "bytes")
LINES_KEPT = 150  # of a long sample: enough rows for every reader, fast to replay
PROFILE = ROOT / "simulator" / "profiles" / "h100-sxm__llama-3.1-8b__bf16__tp1.json"
TABLE = ROOT / "calibrate" / "profiles" / "cpu__tiny__fp32.parquet"
OWN_TRACES = {  # when ../shared is absent: one of each layout
    "generic.csv": "request_id,arrival_s,prompt_tokens,output_tokens\n" + "".join(
        f"{i},{i * 0.25},{100 + 7 * i},{20 + i}\n" for i in range(40)),
    "azure.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:15:{10 + i:02d}.5000000,{300 + 11 * i},{40 + i}\n" for i in range(40)),
    "mooncake.jsonl": "".join(json.dumps({"timestamp": 250 * i, "input_length": 600 + i,
                                          "output_length": 30 + i, "hash_ids": [0, i + 1]})
                              + "\n" for i in range(40)),
}


def trace_files(tmp: Path) -> list[Path]:
    """The trace samples to damage: ../shared/traces' when present, else our own."""
    shared = sorted(p for p in (SHARED / "traces").glob("*.head*") if p.suffix in (".csv",
                                                                                 ".jsonl"))
    if shared:
        return shared
    for name, text in OWN_TRACES.items():
        (tmp / name).write_text(text)
    return [tmp / name for name in OWN_TRACES]


def measured_files() -> list[Path]:
    """Client result files: ../shared/clients' (when present) and the shipped vLLM runs."""
    clients = [SHARED / "clients" / n for n in ("guidellm-benchmarks.json",
                                                "aiperf-profile_export.jsonl")]
    return [p for p in clients if p.is_file()] + sorted(
        (ROOT / "benchmarks" / "published_runs").glob("*qps04.json"))


def damage_text(rng: random.Random, text: str) -> tuple[str, str]:
    """(what was done, the damaged text) of a CSV or JSON-lines file."""
    lines = text.splitlines(keepends=True)[:LINES_KEPT]
    kind = rng.choice(TEXT_DAMAGE)
    whole = "".join(lines)
    if kind in ("empty", "only header", "bom", "crlf"):
        return kind, {"empty": "", "only header": lines[0], "bom": "\ufeff" + whole,
                      "crlf": whole.replace("\n", "\r\n")}[kind]
    i = rng.randrange(1, len(lines)) if len(lines) > 1 else 0
    if kind in ("drop line", "cut line", "blank line", "no header", "stray header", "bytes"):
        cut = lines[i][:rng.randrange(max(1, len(lines[i])))]
        edits = {"drop line": lines[:i] + lines[i + 1:],
                 "cut line": lines[:i] + [cut],
                 "blank line": lines[:i] + ["\n"] + lines[i:],
                 "no header": lines[1:],
                 "stray header": lines[:i] + [lines[0]] + lines[i:],
                 "bytes": lines[:i] + ["\x00\x01garbage,,,\n"] + lines[i:]}
        return f"{kind} (line {i + 1})", "".join(edits[kind])
    if lines[0].lstrip().startswith("{"):  # JSON lines: one object's field
        obj = json.loads(lines[i])
        key = rng.choice(list(obj))
        if kind == "drop column":
            del obj[key]
        elif kind == "extra column":
            obj["unknown_field"] = 1
        else:
            obj[key] = rng.choice(JSON_EDGES)
        lines[i] = json.dumps(obj) + "\n"
        return f"{kind} {key!r} (line {i + 1})", "".join(lines)
    cells = [line.rstrip("\r\n").split(",") for line in lines]
    j = rng.randrange(len(cells[i]))
    if kind == "drop column":
        return f"drop column {j}", "".join(",".join(c[:j] + c[j + 1:]) + "\n" for c in cells)
    if kind == "extra column":
        cells[i].append("7")
    else:
        cells[i][j] = rng.choice(TEXT_EDGES)
    lines[i] = ",".join(cells[i]) + "\n"
    return f"{kind} column {j} = {cells[i][-1] if kind == 'extra column' else cells[i][j]!r} " \
           f"(line {i + 1})", "".join(lines)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into a JSON document (a list's first five elements only)."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj[:5]) if isinstance(
        obj, list) else ()
    for key, value in items:
        yield (*prefix, key)
        yield from _paths(value, (*prefix, key))


def damage_json(rng: random.Random, text: str) -> tuple[str, str]:
    """(what was done, the damaged text) of a JSON document: one value replaced or gone."""
    doc = json.loads(text)
    path = rng.choice(list(_paths(doc)))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and rng.random() < 0.25:
        del parent[path[-1]]
        return f"delete {list(path)}", json.dumps(doc)
    parent[path[-1]] = value = rng.choice(JSON_EDGES)
    return f"{list(path)} = {value!r}", json.dumps(doc)


def damage_table(rng: random.Random, path: Path) -> tuple[str, Any]:
    """(what was done, the damaged pyarrow table) of a profile table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[b"servesim.profile_table"])
    df = table.to_pandas()
    kind = rng.choice(["cell", "cell", "cell", "drop column", "metadata", "metadata",
                       "no metadata", "no rows", "twice", "drop a phase"])
    what = kind
    if kind == "cell":
        col, row = rng.choice(list(df.columns)), rng.randrange(len(df))
        value: Any = rng.choice(["", "bogus", None]) if col == "phase" else rng.choice(
            [float("nan"), -1.0, 0.0, float("inf"), 1e20, 1e-12])
        if df[col].dtype.kind in "iu":
            df[col] = df[col].astype("float64")
        df.loc[row, col] = value
        what = f"{col}[{row}] = {value!r}"
    elif kind == "drop column":
        col = rng.choice(list(df.columns))
        df, what = df.drop(columns=[col]), f"drop column {col}"
    elif kind == "no rows":
        df = df.iloc[:0]
    elif kind == "twice":
        df = df.iloc[list(range(len(df))) * 2]
    elif kind == "drop a phase":
        phase = rng.choice(sorted(df["phase"].unique()))
        df, what = df[df["phase"] != phase], f"drop the {phase} rows"
    elif kind == "metadata":
        key = rng.choice(sorted(meta))
        meta[key] = rng.choice(JSON_EDGES)
        what = f"metadata {key} = {meta[key]!r}"
    out = pa.Table.from_pandas(df, preserve_index=False)
    keep = {} if kind == "no metadata" else {b"servesim.profile_table": json.dumps(meta)}
    return what, out.replace_schema_metadata(keep)


def one_run(rng: random.Random, kind: str, i: int, tmp: Path, traces: list[Path]
            ) -> tuple[str, list[str]]:
    """Damage one file of ``kind`` and read it through its command: (what, argv)."""
    out = ["--out", str(tmp / "out"), "--overwrite"]
    if kind == "table":
        import pyarrow.parquet as pq

        what, table = damage_table(rng, TABLE)
        path = tmp / f"t{i}.parquet"
        pq.write_table(table, path)
        return f"{TABLE.name}: {what}", ["calibrate", str(path), "--out",
                                         str(tmp / "p.json"), "--no-plot"]
    src = rng.choice({"trace": traces, "measured": measured_files(), "profile": [PROFILE]}[
        kind])
    text = src.read_text(encoding="utf-8")
    what, new = damage_json(rng, text) if src.suffix == ".json" else damage_text(rng, text)
    path = tmp / f"in{i}{src.suffix}"
    path.write_text(new, encoding="utf-8")
    run = ["--json", *out, "--workers", "1", "--no-cache", "--set", "workload.num_requests=100"]
    chat = str(ROOT / "scenarios" / "chat.toml")
    if kind == "trace":
        argv = ["run", chat, "--trace", str(path), *run]
    elif kind == "profile":
        argv = ["run", chat, *run, "--set", f"cost.profile='{path}'"]
    else:
        scenario = ROOT / ("benchmarks/published_runs/llmk8s.toml" if "llmk8s" in src.name
                           else "scenarios/validate-cpu.toml")
        argv = ["validate", str(scenario), "--measured", str(path), "--json", *out]
    return f"{src.name}: {what}", argv


def fuzz(seed: int, runs: int, kinds: tuple[str, ...], tmp: Path
         ) -> tuple[Counter[str], list[str], Counter[str]]:
    """(outcome counts by kind, crash and timeout lines, error kinds)."""
    rng = random.Random(seed)
    traces = trace_files(tmp)
    outcomes: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    bad: list[str] = []
    for i in range(runs):
        kind = rng.choice(kinds)
        what, argv = one_run(rng, kind, i, tmp, traces)
        outcome, said = run_cli(argv, TIMEOUT_S)
        outcomes[f"{kind} {outcome}"] += 1
        if outcome in ("crash", "timeout"):
            bad.append(f"run {i}: {outcome}: {what}" + (f"\n{said}" if said else ""))
        elif outcome != "exit 0":
            errors[f"{kind}: {error_kind(said)}"] += 1
    return outcomes, bad, errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--kind", choices=KINDS, action="append",
                    help="which files to damage (repeatable; default all)")
    ap.add_argument("--show-errors", action="store_true",
                    help="print each distinct error message kind and its count")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="servesim-file-fuzz-") as tmp:
        outcomes, bad, errors = fuzz(args.seed, args.runs, tuple(args.kind or KINDS), Path(tmp))
    return report(args.runs, args.seed, outcomes, bad, errors, args.show_errors)


if __name__ == "__main__":
    sys.exit(main())
