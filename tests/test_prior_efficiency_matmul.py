"""A GPU without measured operator tables takes its prior's eff_c from published matmul
runs: the fitted GPUs' eff_c / (matmul / peak), times its own share of peak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibrate.prior_efficiency import transferred
from simulator.costs import RooflineCost, cost_model_from_config
from simulator.costs.host import split_host
from simulator.costs.prior_efficiency import MATMUL_FILE, matmul_shares, prior_knobs, prior_note
from simulator.errors import ConfigError
from simulator.specs.hardware import get_hardware
from simulator.specs.models import get_model


def test_the_transfer_is_the_median_ratio_times_the_share() -> None:
    # fitted: A reaches its whole peak in a matmul and eff_c 0.8 (ratio 0.8); B 0.75 of
    # peak and eff_c 0.6 (ratio 0.8); C 0.5 and eff_c 0.45 (ratio 0.9): median 0.8.
    # D has only its matmul, 0.5 of peak: eff_c 0.8 x 0.5 = 0.4.
    fitted = {"a": {"bf16": {"compute_efficiency": 0.8}},
              "b": {"bf16": {"compute_efficiency": 0.6}, "fp8": {"compute_efficiency": 0.5}},
              "c": {"bf16": {"compute_efficiency": 0.45}}}
    rows = transferred(fitted, {"a": 1.0, "b": 0.75, "c": 0.5, "d": 0.5})
    assert set(rows) == {"d"}  # a fitted GPU keeps its fit
    row = rows["d"]["bf16"]
    assert row["compute_efficiency"] == 0.4
    moved = row["transferred"]
    assert moved["ratio"] == 0.8 and moved["matmul_share_of_peak"] == 0.5  # type: ignore[index]
    # leave one out: C from A and B (ratio 0.8) x 0.5 = 0.4 against its fitted 0.45
    assert moved["leave_one_out"]["c"] == {"predicted": 0.4, "fitted": 0.45}  # type: ignore[index]
    # nothing fitted was measured: nothing to transfer from
    assert transferred({"a": {"fp8": {"compute_efficiency": 0.5}}}, {"a": 1.0, "d": 0.5}) == {}


def test_the_shipped_rtx4090_row_by_hand() -> None:
    # Published bf16 torch.matmul, one script (matmul_published.json): A100 264.53 of 312
    # (0.8479), H100 789.24 of 989 (0.7980), H200 790.29 of 989 (0.7991), L40S 269.15 of
    # 362 (0.7435), B200 1696.03 of 2250 (0.7538). Fitted eff_c 0.706, 0.681, 0.715,
    # 0.524, 0.547: ratios 0.8327, 0.8534, 0.8948, 0.7048, 0.7257, median 0.8327 (A100).
    # RTX 4090: the median of seven runs, 165.71, of 165: share 1.0043 -> 0.8363.
    shares = matmul_shares()
    assert shares["rtx4090"] == pytest.approx(165.71 / 165)
    assert shares["h100-sxm"] == pytest.approx(789.24 / 989)
    assert prior_knobs("rtx4090", "bf16") == {"compute_efficiency": 0.836}
    assert prior_knobs("rtx4090", "int4") == {"compute_efficiency": 0.836}  # W4A16: bf16 math
    assert prior_knobs("rtx4090", "fp8") == {}  # FP8 tensor cores: no fp8 run published
    # the H100 PCIe: 495.93 of 756 (0.6560) x 0.8327 = 0.546 (its prior where the SXM has
    # no measured profile to scale: tests/test_sibling_cost.py)
    assert prior_knobs("h100-pcie", "bf16") == {"compute_efficiency": 0.546}
    note = prior_note("rtx4090", "bf16")
    assert "eff_c 0.836 transferred from published bf16 matmul runs" in note
    assert "1.0043 of its peak" in note and "0.8327" in note


def test_a_4090_prior_starts_from_the_transferred_eff_c_and_default_others() -> None:
    cost, used = cost_model_from_config({}, get_model("llama-3.1-8b"), get_hardware("rtx4090"),
                                        2, "bf16", "bf16")
    kernel, _ = split_host(cost)
    assert isinstance(kernel, RooflineCost)
    assert kernel.compute_efficiency == 0.836
    defaults = RooflineCost(get_model("llama-3.1-8b"), get_hardware("rtx4090"))
    assert kernel.memory_efficiency == defaults.memory_efficiency
    assert kernel.layer_overhead_s == 0.0
    assert "transferred from published bf16 matmul runs" in used


@pytest.mark.parametrize(("gpus", "names"), [
    ({"tpu-v9": {"runs": [{"tflops": 1.0}]}}, "'tpu-v9' is not in the hardware catalogue"),
    ({"l40s": {"runs": [{"tflops": -3.0}]}}, "'l40s' needs runs with tflops > 0"),
    ({"l40s": {"runs": []}}, "'l40s' needs runs with tflops > 0"),
    ({"l40s": {"tflops": 269.15}}, "not a matmul measurement file"),
])
def test_a_bad_matmul_file_is_refused_naming_it(tmp_path: Path, gpus: dict, names: str) -> None:
    path = tmp_path / "matmul.json"
    path.write_text(json.dumps({"gpus": gpus}))
    with pytest.raises(ConfigError, match=names) as err:
        matmul_shares(path)
    assert str(path) in str(err.value)


def test_every_run_names_its_source() -> None:
    data = json.loads(MATMUL_FILE.read_text())
    runs = [r for row in data["gpus"].values() for r in row["runs"]]
    assert len(runs) >= 14 and all(r["source"] and r["tflops"] > 0 for r in runs)
