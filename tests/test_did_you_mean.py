"""Near misses in a scenario (a section, field, choice, model or GPU spelt slightly wrong)
say which known name was likely meant; a word near none says nothing extra."""

from __future__ import annotations

from pathlib import Path

import pytest

from servesim.cli import main
from simulator.errors import ConfigError, did_you_mean
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model

CHAT = str(Path(__file__).resolve().parents[1] / "scenarios" / "chat.toml")


def test_the_helper_by_hand() -> None:
    assert did_you_mean("nmae", ["name", "weight_dtype"]) == " (did you mean 'name'?)"
    assert did_you_mean("CONTINOUS", ["static", "continuous"]) == " (did you mean 'continuous'?)"
    assert did_you_mean("bogus", ["static", "dynamic"]) == ""  # near nothing: no guess
    assert did_you_mean(3, ["static"]) == ""  # not a word at all


@pytest.mark.parametrize(("override", "hint"), [
    ("model.nmae='x'", "unknown field model.nmae (did you mean 'name'?); known:"),
    ("kv.prefix_cachng=true", "(did you mean 'prefix_caching'?)"),
    ("policy.name='continous'", "(did you mean 'continuous'?)"),
    ("workload.arrival='poison'", "(did you mean 'poisson'?)"),
    ("stack.name='vllm-v2'", "(did you mean 'vllm-v1'?)"),
    ("hardware.gpu='h100-sxm5'", "is not a known device (did you mean 'h100-sxm'?)"),
    ("model.name='llama-3-8'", "(did you mean 'llama-3-8b'?)"),
])
def test_a_typo_on_the_command_line_names_the_likely_field(capsys, override: str,  # type: ignore[no-untyped-def]
                                                          hint: str) -> None:
    assert main(["run", CHAT, "--set", override]) == 2
    assert hint in capsys.readouterr().err


def test_a_misspelt_section_in_a_file(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "s.toml"
    path.write_text('[modle]\nname = "llama-3.1-8b"\n')
    assert main(["run", str(path)]) == 2
    assert "unknown section [modle] (did you mean 'model'?)" in capsys.readouterr().err


def test_catalogue_lookups_guess_too() -> None:
    with pytest.raises(ConfigError, match=r"not a known device \(did you mean 'h200'\?\)"):
        get_hardware("h20O")
    with pytest.raises(ConfigError, match=r"\(did you mean 'mistral-7b'\?\)"):
        get_model("mistrall-7b")
