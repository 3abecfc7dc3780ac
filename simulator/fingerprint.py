"""Where a step time was measured: a machine fingerprint, and how two fingerprints differ.

A measured step time holds on the machine that measured it: the CPU profile of the tiny
model taken on a 2-vCPU AMD EPYC VM was 2-4x slow on a 2-vCPU Intel Xeon with AMX. So every
profile table and every measured cost profile carries the fingerprint of its machine, and
every run that compares the simulator with an engine checks it against the engine's.

A fingerprint is a flat JSON object (all values str or int)::

    kind          "cpu" | "cuda"
    device        CPU model name (/proc/cpuinfo) or GPU name
    cpu_id        "family 25 model 17 stepping 1": the microarchitecture, where a VM's
                  model name is generic ("AMD EPYC")
    cpu_flags     the ISA extensions that pick different kernels: AVX2, AVX-512 (f, bf16,
                  vnni), AMX (tile, bf16, int8), space-separated, sorted
    logical_cpus  os.cpu_count()
    gpu_memory_mib, driver   (cuda only)
    torch, transformers, servesim   package versions (read without importing torch)
    threads       torch intra-op threads the engine ran with

Only the fields in :data:`COMPARED` decide whether two machines are "the same"; the
``id`` is a short hash of those, and names the folder of the per-user profile cache.
This module reads files and package metadata only: the simulator never imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
from importlib.metadata import PackageNotFoundError, version
from typing import Any

FINGERPRINT_VERSION = 1
# ISA extensions that change which CPU kernels torch runs (oneDNN picks AMX or AVX-512 BF16
# GEMMs where present): the 2-4x difference between two 2-vCPU boxes came from these.
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx512_fp16",
                "amx_tile", "amx_bf16", "amx_int8")
COMPARED = ("kind", "device", "cpu_id", "cpu_flags", "logical_cpus", "gpu_memory_mib",
            "driver", "torch", "transformers", "servesim", "threads")
HOW_TO_FIX = "servesim calibrate --here --model {model} --threads {threads}"


def _package(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"


def _cpuinfo() -> dict[str, str]:
    """The first processor block of /proc/cpuinfo (empty off Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read().split("\n\n")[0]
    except OSError:
        return {}
    pairs = (ln.split(":", 1) for ln in text.splitlines() if ":" in ln)
    return {k.strip(): v.strip() for k, v in pairs}


def cpu_fields() -> dict[str, Any]:
    """CPU model, microarchitecture id, kernel-relevant ISA flags, logical CPUs."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    cpu_id = " ".join(f"{k} {info[k2]}" for k, k2 in
                      (("family", "cpu family"), ("model", "model"), ("stepping", "stepping"))
                      if k2 in info)
    return {
        "device": info.get("model name") or platform.processor() or platform.machine(),
        "cpu_id": cpu_id or platform.machine(),
        "cpu_flags": " ".join(sorted(f for f in KERNEL_FLAGS if f in flags)),
        "logical_cpus": os.cpu_count() or 0,
    }


def gpu_fields() -> dict[str, Any] | None:
    """Name, memory and driver of GPU 0 from ``nvidia-smi``, or None without one."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name,memory.total,driver_version",
                              "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=10, check=True).stdout
        name, memory, driver = (x.strip() for x in out.splitlines()[0].split(","))
        return {"device": name, "gpu_memory_mib": int(float(memory)), "driver": driver}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def this_machine(kind: str = "cpu", threads: int = 1,
                 gpu: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fingerprint of this machine running the engine on ``kind`` with ``threads``.

    ``gpu`` (name, memory, driver) comes from the engine's torch on CUDA; without it,
    ``nvidia-smi`` is asked.
    """
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"kind={kind!r} must be 'cpu' or 'cuda'")
    fp: dict[str, Any] = {"version": FINGERPRINT_VERSION, "kind": kind, **cpu_fields()}
    if kind == "cuda":
        found = gpu or gpu_fields()
        if found is None:
            raise ValueError("kind='cuda' but no GPU was found (nvidia-smi)")
        fp.update(found)
    fp.update({"torch": _package("torch"), "transformers": _package("transformers"),
               "servesim": _package("servesim"), "threads": int(threads)})
    fp["id"] = fingerprint_id(fp)
    return fp


def fingerprint_id(fp: dict[str, Any]) -> str:
    """A short hash (12 hex digits) of the compared fields: the profile cache's folder name."""
    text = json.dumps({k: fp.get(k) for k in COMPARED}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def differences(theirs: dict[str, Any], ours: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(field, their value, our value) for every compared field that differs."""
    return [(k, theirs.get(k), ours.get(k)) for k in COMPARED
            if str(theirs.get(k)) != str(ours.get(k))]


def describe_differences(diffs: list[tuple[str, Any, Any]]) -> str:
    """``device 'AMD EPYC' here 'Intel Xeon'; threads 1 here 2``."""
    return "; ".join(f"{k} {theirs!r} (here {ours!r})" for k, theirs, ours in diffs)


def short(fp: dict[str, Any]) -> str:
    """One line: device, cores, threads, id."""
    if not fp:
        return "no fingerprint"
    cores = f", {fp.get('logical_cpus')} logical CPUs" if fp.get("kind") == "cpu" else ""
    return (f"{fp.get('device', '?')}{cores}, {fp.get('threads', '?')} thread(s), torch "
            f"{fp.get('torch', '?')} [{fp.get('id') or fingerprint_id(fp)}]")
