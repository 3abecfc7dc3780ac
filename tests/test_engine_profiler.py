"""The engine's profiler on CPU: models, phase functions, a tiny sweep, ``servesim profile``.

Skipped as a whole without torch (the core suite runs without the engine extra).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from engine.models import build_model, hf_config_dict  # noqa: E402
from engine.plan import SweepPlan  # noqa: E402
from engine.profiler import time_interleaved, time_step  # noqa: E402
from engine.sweep import RunLoad, run_metadata, run_sweep  # noqa: E402
from servesim.cli import main  # noqa: E402
from simulator.errors import ConfigError  # noqa: E402
from simulator.profile_table import (  # noqa: E402
    ProfileTable,
    read_profile_table,
    validate_profile_table,
    write_profile_table,
)
from simulator.specs.models import MODELS  # noqa: E402

TINY = MODELS["tiny"]


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return build_model("tiny", seed=0)


def test_tiny_builds_from_catalogue_with_spec_param_count(tiny):
    assert type(tiny.model).__name__ == "LlamaForCausalLM"
    assert not tiny.model.training
    assert tiny.model.config._attn_implementation == "sdpa"
    assert next(tiny.model.parameters()).dtype == torch.float32
    assert abs(tiny.num_parameters() / TINY.params_total - 1) < 0.01


def test_builds_from_config_json_dict():
    cfg = {**hf_config_dict(MODELS["small"]), "model_type": "llama", "_name_or_path": "mine"}
    em = build_model(cfg, seed=1)
    assert em.spec.name == "mine"
    assert abs(em.num_parameters() / MODELS["small"].params_total - 1) < 0.01


def test_unknown_model_and_remote_model_type_are_refused():
    with pytest.raises(ConfigError, match="known"):
        build_model("no-such-model")
    with pytest.raises(ConfigError, match="model_type='gpt2' is not supported"):
        build_model({**hf_config_dict(TINY), "model_type": "gpt2"})


def test_interleaved_timing_warms_each_step_then_runs_passes():
    calls: list[str] = []
    steps = [lambda n=n: calls.append(n) for n in ("a", "b")]
    done: list[int] = []
    timings = time_interleaved(steps, torch.device("cpu"), repeats=3, warmup=1,
                               progress=done.append)
    # warm-ups, then three passes over both, each timed run after an untimed one
    assert calls == ["a", "b"] + ["a", "a", "b", "b"] * 3
    assert sum(done) == 2 * (1 + 3)
    assert all(t.repeats == 3 and t.mean_s > 0 and t.cv >= 0 for t in timings)


def test_time_step_warms_up_and_resets():
    calls: list[str] = []
    timing = time_step(lambda: calls.append("step"), torch.device("cpu"), repeats=3, warmup=2,
                       reset=lambda: calls.append("reset"))
    assert calls == ["step", "reset"] * 5
    assert timing.repeats == 3 and timing.wall_s > 0 and timing.spread >= 0


def _small_sweep(tiny, plan: SweepPlan) -> ProfileTable:
    load = RunLoad()
    rows = list(run_sweep(tiny, plan))
    load.finish()
    import pandas as pd

    return ProfileTable(pd.DataFrame(rows), run_metadata(tiny, 1, load, plan, "servesim test"))


def test_tiny_sweep_writes_a_valid_table_with_contract_columns(tiny, tmp_path):
    plan = SweepPlan((1, 2), (8, 32), (1, 4), (16, 64), (2,), (8,), mixed_context=16,
                     repeats=1, warmup=1)
    table = _small_sweep(tiny, plan)
    path = tmp_path / "t.parquet"
    write_profile_table(table, path)
    back = read_profile_table(path)
    steps = validate_profile_table(back.steps)
    assert len(steps) == 9
    for row, (phase, b, n) in zip(steps.itertuples(), plan.shapes(), strict=True):
        assert row.phase == phase
        assert row.batch_size == (b + 1 if phase == "mixed" else b)
        if phase == "prefill":
            assert (row.num_prefill_tokens, row.num_decode_seqs) == (b * n, 0)
            assert row.prefill_attn_work == b * n * n / 2 and row.decode_context_tokens == 0
        elif phase == "mixed":  # 2 decode rows at context 16 beside one 8-token chunk
            assert (row.num_prefill_tokens, row.num_decode_seqs) == (8, 2)
            assert row.prefill_attn_work == 8 * 4 and row.decode_context_tokens == 2 * 17
        else:
            assert (row.num_prefill_tokens, row.num_decode_seqs) == (0, b)
            assert row.decode_context_tokens == b * (n + 1) and row.prefill_attn_work == 0
        assert row.time_s > 0 and row.cpu_time_s > 0
    meta = back.metadata
    assert (meta["device"], meta["model"], meta["dtype"], meta["tp"]) == ("cpu", "tiny", "fp32", 1)
    assert meta["torch_version"] == torch.__version__ and meta["threads"] == 1
    assert "transformers_version" in meta and len(meta["load"]["before"]) == 3


def test_larger_shapes_take_longer(tiny):
    """Weak monotonicity of medians (can fail on a very noisy machine): 16x the prompt
    tokens (~8 vs ~30 ms), 16x the decode rows (~7 vs ~14 ms)."""
    plan = SweepPlan((1,), (16, 256), (1, 16), (256,), (), repeats=3, warmup=1)
    pre_small, pre_big, dec_small, dec_big = (r["time_s"] for r in run_sweep(tiny, plan))
    assert pre_big > pre_small
    assert dec_big > dec_small


def test_servesim_profile_end_to_end(tmp_path, capsys):
    out = tmp_path / "p.parquet"
    rc = main(["profile", "--model", "tiny", "--out", str(out), "--prefill-batches", "1",
               "--prompt-lens", "8,16", "--decode-batches", "1,2", "--context-lens", "8",
               "--mixed-batches", "2", "--mixed-chunks", "4", "--mixed-context", "8",
               "--repeats", "1", "--warmup", "0", "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    table = read_profile_table(out)
    assert len(table.steps) == 5 and table.metadata["model"] == "tiny"
    assert list(table.steps["phase"]).count("mixed") == 1
    assert "wrote" in capsys.readouterr().out


def test_servesim_profile_bad_input(tmp_path, capsys):
    out = tmp_path / "p.parquet"
    assert main(["profile", "--model", "nope", "--out", str(out)]) == 2
    assert "known" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert main(["profile", "--device", "cuda", "--out", str(out)]) == 2
        assert "CUDA is not available" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_smoke_bf16():
    em = build_model("tiny", dtype="bf16", device="cuda")
    rows = list(run_sweep(em, SweepPlan((1,), (16,), (2,), (32,), (1,), (8,), 32, repeats=2,
                                        warmup=1)))
    assert [r["phase"] for r in rows] == ["prefill", "decode", "mixed"]
    assert all(r["time_s"] > 0 for r in rows)
