"""The simulator's hot loop compiled with mypyc, used when built for exactly these sources.

``python -m simulator.build_accel`` (``make accel``; ``make test`` runs it) compiles the
modules in :data:`COMPILED` (the replica's step loop, the batching policies' per-step
code, the KV block manager, the step log and the request records) with mypyc into a
cache directory named by a hash of every ``simulator/**/*.py`` file and the Python build.
At import, ``simulator/__init__.py`` calls :func:`install`: when a build for the current
sources exists it puts a finder on ``sys.meta_path`` that loads those modules from it;
otherwise, or with ``SERVESIM_ACCEL=0``, nothing changes and the same modules run as
Python. So an edited source is never shadowed by a stale build (the hash no longer
matches: pure Python until the next build), a machine without a C compiler or mypy runs
pure Python, and the two can be compared on one machine (``benchmarks/peer_speed.py``
prints which ran; tests/test_accel.py checks that both give the same records and step
log, bit for bit).

Why mypyc: the loop is plain typed Python (lists, ints, floats, small classes), which
mypyc turns into C with native attribute access and unboxed arithmetic; floats stay IEEE
doubles and ints exact, so the answers do not move (docs/architecture.md, "Compiled
core"). Compiled classes cannot be patched at run time: a test that monkeypatches one of
these modules runs them as Python (``SERVESIM_ACCEL=0``, tests/conftest.py).

Build directory: ``$SERVESIM_ACCEL_DIR`` or ``~/.cache/servesim/accel``, one subdirectory
per source hash (a build keeps the three newest others).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

ENV_SWITCH = "SERVESIM_ACCEL"  # "0": always pure Python
ENV_DIR = "SERVESIM_ACCEL_DIR"
MANIFEST = "manifest.json"
KEEP_BUILDS = 3  # builds of other sources kept beside the new one

# The per-step code of the replica loop (cProfile of the peer, chat and chunked workloads:
# ~80% of a simulation's time is in these), and every subclass of their classes (an
# interpreted class cannot inherit from a compiled one); compiled together, so calls
# between them are C.
COMPILED: tuple[str, ...] = (
    "simulator.replica", "simulator.replica_runs", "simulator.replica_clock",
    "simulator.fastforward", "simulator.kvcache", "simulator.driver",
    "simulator.steplog", "simulator.steplog_summary", "simulator.record_columns",
    "simulator.served_requests",
    "simulator.shapes", "simulator.router", "simulator.fleet.urgent",
    "simulator.fleet.tokens", "simulator.costs.piecewise", "simulator.prefix_cache_base",
    "simulator.prefix_cache", "simulator.prefix_cache_runs",
    "simulator.fleet.disagg_kv",
    "simulator.policies.continuous", "simulator.policies.lazy", "simulator.policies.step",
    "simulator.policies.admit_fcfs", "simulator.policies.state",
    "simulator.policies.admission", "simulator.policies.chunk_runs",
    "simulator.policies.clock_chunks", "simulator.policies.padded",
    "simulator.policies.preemption", "simulator.policies.identity",
    "simulator.costs.decode_terms", "simulator.number_lists",
)
# Hand-written C modules built beside them (module -> source, relative to the package's
# parent): the full step log's row expander, which numpy did in ~25 passes over the rows.
C_MODULES: dict[str, str] = {"simulator._steprows": "simulator/_steprows.c"}


def package_dir() -> Path:
    """The directory of the ``simulator`` package whose sources are (or would be) compiled."""
    return Path(__file__).resolve().parent


def cache_root() -> Path:
    """Where builds live: ``$SERVESIM_ACCEL_DIR`` or ``~/.cache/servesim/accel``."""
    env = os.environ.get(ENV_DIR)
    return Path(env) if env else Path.home() / ".cache" / "servesim" / "accel"


def source_key(pkg: Path | None = None) -> str:
    """A hash of every ``.py`` and ``.c`` file of the package (path and bytes) and this
    Python build.

    Any edit anywhere in ``simulator/`` changes it: compiled code also holds the types it
    read from the modules it imports, so a change beside the compiled ones counts too.
    """
    pkg = pkg or package_dir()
    h = hashlib.sha256()
    h.update(sys.version.encode())
    h.update(importlib.machinery.EXTENSION_SUFFIXES[0].encode())
    for path in sorted([*pkg.rglob("*.py"), *pkg.rglob("*.c")]):
        h.update(path.relative_to(pkg).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:24]


class CompiledFinder(importlib.abc.MetaPathFinder):
    """Loads the compiled modules (and mypyc's shared library) from one build directory."""

    def __init__(self, directory: Path, files: dict[str, str]) -> None:
        self.directory = directory
        self.files = files  # module name -> file name in the directory

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        """The compiled module's spec, or None to let the usual finders look."""
        name = self.files.get(fullname)
        if name is None:
            return None
        return importlib.util.spec_from_file_location(fullname, self.directory / name)


def build_dir(key: str | None = None) -> Path:
    """The directory a build of the current sources has (or would have)."""
    return cache_root() / (key or source_key())


def read_manifest(directory: Path) -> dict[str, object] | None:
    """A finished build's manifest, or None (no build, or one cut short)."""
    try:
        data = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def install() -> bool:
    """Use the compiled modules if a build of these sources exists; True if it does.

    Does nothing (False) with ``SERVESIM_ACCEL=0``, with no build, or after a module of
    the list was already imported as Python (mixing the two is not allowed: compiled code
    calls its group's functions directly).
    """
    if os.environ.get(ENV_SWITCH, "1") == "0" or active():
        return active()
    root = cache_root()
    if not root.is_dir() or any(m in sys.modules for m in COMPILED):
        return False
    directory = build_dir()
    manifest = read_manifest(directory)
    files = manifest.get("files") if manifest else None
    if not isinstance(files, dict):
        return False
    sys.meta_path.insert(0, CompiledFinder(directory, {str(k): str(v) for k, v in files.items()}))
    return True


def compiled_module(file: str) -> bool:
    """Whether the module whose ``__file__`` is ``file`` was loaded from a compiled build
    (a module that chooses between two equal-answer paths by which is cheaper there)."""
    return file.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def active() -> bool:
    """Whether this process loads the compiled modules."""
    return any(isinstance(f, CompiledFinder) for f in sys.meta_path)


def build() -> Path:
    """Compile :data:`COMPILED` for the current sources; the build directory.

    Copies the package's sources to a scratch directory, runs ``python -m mypyc`` there,
    and moves the extension modules into the build directory with a manifest (written
    last: a build cut short is never used). Raises RuntimeError when mypyc fails.
    """
    pkg = package_dir()
    key = source_key(pkg)
    target = build_dir(key)
    if read_manifest(target) is not None:
        return target
    with tempfile.TemporaryDirectory(prefix="servesim-accel-") as tmp:
        work = Path(tmp)
        shutil.copytree(pkg, work / "simulator",
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.json", "*.toml"))
        paths = [m.replace(".", "/") + ".py" for m in COMPILED]
        env = dict(os.environ, MYPY_CACHE_DIR=str(work / ".mypy_cache"))
        proc = subprocess.run(
            [sys.executable, "-m", "mypyc", "--ignore-missing-imports",
             "--python-version", "3.11", *paths],
            cwd=work, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
            raise RuntimeError(f"mypyc failed (exit {proc.returncode}):\n{tail}")
        _build_c_modules(work, env)
        suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
        files = _collect(work)
        names = {name: f"{name}{suffix}" for name in files}
        _remove_others(_ensure(cache_root()), keep=key)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache_root()))
        for name, src in files.items():
            shutil.copy2(src, staging / names[name])
        (staging / MANIFEST).write_text(json.dumps(
            {"key": key, "files": names, "python": sys.version,
             "mypyc": _mypy_version()}, indent=1))
        _publish(staging, target)
    return target


def _publish(staging: Path, target: Path) -> None:
    """Move a finished build from ``staging`` to ``target`` in one rename.

    Another process building the same sources may have got there first (two ``make test``
    at once, a test's build beside the user's): that build is as good, so this one is
    dropped. A directory there without a manifest is no build (nothing writes into
    ``target`` but this rename) and is replaced.
    """
    try:
        staging.rename(target)
    except OSError:
        if target.is_dir() and read_manifest(target) is None:
            shutil.rmtree(target)
            staging.rename(target)
            return
        shutil.rmtree(staging, ignore_errors=True)
        if read_manifest(target) is None:
            raise


def _collect(work: Path) -> dict[str, Path]:
    """Module name -> built extension file: the listed modules and mypyc's shared library."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    files: dict[str, Path] = {}
    for module in COMPILED:
        path = work / (module.replace(".", "/") + suffix)
        if not path.is_file():
            raise RuntimeError(f"mypyc left no {path.name} for {module}")
        files[module] = path
    for module in C_MODULES:
        path = work / (module.replace(".", "/") + suffix)
        if not path.is_file():
            raise RuntimeError(f"the C build left no {path.name} for {module}")
        files[module] = path
    for path in work.glob(f"*__mypyc{suffix}"):
        files[path.name[: -len(suffix)]] = path
    return files


def _build_c_modules(work: Path, env: dict[str, str]) -> None:
    """Compile :data:`C_MODULES` in place in ``work`` with setuptools (the compiler and
    flags mypyc's build used); RuntimeError when it fails."""
    extensions = ", ".join(f"Extension({name!r}, [{src!r}], extra_compile_args=['-O2'])"
                           for name, src in C_MODULES.items())
    script = ("from setuptools import Extension, setup; "
              f"setup(name='servesim-accel-c', ext_modules=[{extensions}], "
              "script_args=['build_ext', '--inplace', '--quiet'])")
    proc = subprocess.run([sys.executable, "-c", script], cwd=work, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise RuntimeError(f"the C modules failed to build (exit {proc.returncode}):\n{tail}")


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _remove_others(root: Path, keep: str, newest: int = KEEP_BUILDS) -> None:
    """Drop all but the ``newest`` builds of other sources, and scratch left by builds cut
    short: a process still running another checkout (a before/after comparison) imports
    its compiled modules lazily, from a build that must still be there."""
    builds = sorted((c for c in root.iterdir() if c.is_dir() and c.name != keep),
                    key=lambda c: c.stat().st_mtime, reverse=True)
    for child in builds:
        if child.name.startswith(".") or newest <= 0:
            shutil.rmtree(child, ignore_errors=True)
        else:
            newest -= 1


def _mypy_version() -> str:
    try:
        from mypy.version import __version__
    except ImportError:  # pragma: no cover - mypyc ran, so mypy is there
        return "unknown"
    return str(__version__)
