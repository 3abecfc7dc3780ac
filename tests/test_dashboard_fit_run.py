"""The Validation page's fit of host costs to the uploaded run (dashboard/logic/fit_run.py):
``servesim calibrate --from-run`` on one file, under AppTest. No torch."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from dashboard.logic.fit_run import PAGE_TERMS, fit_run, measured_run
from dashboard.logic.run import simulate
from dashboard.logic.scenario_form import apply_knobs, collapse, knobs_from_point, load_shipped
from simulator.costs.profile import load_profile
from simulator.errors import ConfigError

pytest.importorskip("streamlit")

from dashboard_support import page  # noqa: E402

SLOWDOWN = 1.3


@pytest.fixture(scope="module")
def point() -> dict:
    base = collapse(load_shipped("chat"))
    return apply_knobs(base, replace(knobs_from_point(base), num_requests=200))


def _records(point: dict, slowdown: float, path: Path) -> Path:
    simulate({**point, "cost": {"time_scale": slowdown}}).requests.to_csv(path, index=False)
    return path


def test_a_slowdown_is_found_and_the_profile_carries_it(point: dict, tmp_path: Path) -> None:
    """Every step 1.3x slower: before the fit the replay's mean TPOT reads at least
    1 - 1/1.3 = 23% low (more where the slower steps batch more), after it time_scale is
    1.3 and the means read within 2%; the profile is the base's with that scale and the
    fit's record."""
    path = _records(point, SLOWDOWN, tmp_path / "slow.csv")
    got = fit_run(point, [path], PAGE_TERMS)
    terms = got.terms.set_index("term")
    assert list(terms.index) == list(PAGE_TERMS)
    assert terms.loc["time_scale", "value"] == pytest.approx(SLOWDOWN, rel=0.02)
    assert terms.loc["time_scale", "unit"] == "x" and terms.loc["request_s", "unit"] == "ms"
    assert set(terms["pinned"]) <= {"yes", "loose", "not seen"}
    errs = got.errors.set_index("statistic")
    assert errs.loc["tpot_mean", "before"] < 1 / SLOWDOWN - 1
    assert abs(errs.loc["tpot_mean", "after"]) < 0.02
    assert abs(errs.loc["ttft_mean", "after"]) < 0.02
    (tmp_path / "fitted.json").write_text(got.profile_json)
    profile = load_profile(tmp_path / "fitted.json")
    assert profile.time_scale == pytest.approx(SLOWDOWN, rel=0.02)  # the base's is 1
    record = profile.fit["from_run"]
    assert set(record["term_spread"]) == set(PAGE_TERMS)
    assert record["heldout"].startswith("not computed")
    assert "servesim dashboard" in profile.provenance["calibrated_from_run"]["command"]


def test_two_runs_choose_their_terms_and_predict_each_other(point: dict,
                                                             tmp_path: Path) -> None:
    """The slowed deployment at the scenario's rate and at a third of it: terms chosen by
    leave-one-run-out error, each run predicted by a fit on the other within 3% on the
    means, time_scale 1.3 with its range over those fits around it."""
    slow = _records(point, SLOWDOWN, tmp_path / "busy.csv")
    light = {**point, "workload": {**point["workload"], "rate": point["workload"]["rate"] / 3}}
    quiet = _records(light, SLOWDOWN, tmp_path / "quiet.csv")
    got = fit_run(point, [slow, quiet], None)
    terms = got.terms.set_index("term")
    assert "time_scale" in terms.index
    assert terms.loc["time_scale", "value"] == pytest.approx(SLOWDOWN, rel=0.02)
    low, high = terms.loc["time_scale", ["leave-one-run-out low", "leave-one-run-out high"]]
    assert low <= high and low == pytest.approx(SLOWDOWN, rel=0.05)
    assert high == pytest.approx(SLOWDOWN, rel=0.05)
    errs = got.errors.set_index(["run", "statistic"])
    for run in ("busy.csv", "quiet.csv"):
        for stat in ("ttft_mean", "tpot_mean", "e2e_mean"):
            assert abs(errs.loc[(run, stat), "held out"]) < 0.03, (run, stat)
    record = json.loads(got.profile_json)["fit"]["from_run"]
    assert record["heldout"] == "leave-one-run-out" and len(record["heldout_error"]) == 2
    with pytest.raises(ConfigError, match="the same file twice"):
        fit_run(point, [slow, slow], None)
    (tmp_path / "again").mkdir()
    other = _records(light, SLOWDOWN, tmp_path / "again" / "busy.csv")  # another busy.csv
    names = set(fit_run(point, [slow, other], PAGE_TERMS).errors["run"])
    assert names == {"busy.csv", "busy.csv (2)"}


def test_records_give_each_requests_own_times(tmp_path: Path) -> None:
    """TTFT = first token - arrival, TPOT = (finish - first) / (outputs - 1), by hand."""
    path = tmp_path / "two.csv"
    pd.DataFrame({"request_id": [0, 1], "arrival_s": [0.0, 0.5],
                  "first_token_s": [0.1, 0.7], "finish_s": [0.5, 0.7],
                  "prompt_tokens": [10, 20], "output_tokens": [5, 1]}).to_csv(path, index=False)
    run = measured_run(path)
    assert run.per_request and run.ttft_s.tolist() == pytest.approx([0.1, 0.2])
    assert run.tpot_s[0] == pytest.approx(0.1) and pd.isna(run.tpot_s[1])
    assert run.e2e_s.tolist() == pytest.approx([0.5, 0.2])


def test_an_unreadable_result_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "nothing.json"
    bad.write_text("[]")
    with pytest.raises(ConfigError, match="nothing.json"):
        measured_run(bad)


def test_the_page_fits_its_demo_run() -> None:
    """The demo's steps are 1.3x the deployment's: the Fit button finds time_scale 1.3."""
    at = page("validation").run()
    assert not at.exception, at.exception
    assert len(at.dataframe) == 1  # nothing fitted until asked
    at.button(key="val_fit").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    terms = at.dataframe[1].value.set_index("term")
    assert terms.loc["time_scale", "value"] == pytest.approx(SLOWDOWN, rel=0.02)
    errs = at.dataframe[2].value.set_index("statistic")
    assert errs.loc["tpot_mean", "before"] < -0.15 and abs(errs.loc["tpot_mean", "after"]) < 0.02
    assert any("on 1 run(s): " in c.value for c in at.caption)
    at.multiselect(key="val_fit_terms").set_value(["time_scale"]).run()
    assert len(at.dataframe) == 1  # other terms: fitted again only when asked


def test_the_page_fits_two_runs(point: dict, tmp_path: Path) -> None:
    """A second run beside the demo: a held-out error for each run (the terms chosen by
    leave-one-run-out error are the logic's test above; here the checkbox is offered)."""
    at = page("validation").run()
    assert at.checkbox(key="val_fit_auto").disabled  # one run: nothing to choose by
    demo = _records(point, SLOWDOWN, tmp_path / "other.csv")
    at.file_uploader(key="val_fit_more").set_value(
        [("other.csv", demo.read_bytes(), "text/csv")]).run()
    assert not at.checkbox(key="val_fit_auto").disabled
    at.button(key="val_fit").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    errs = at.dataframe[2].value
    assert set(errs["run"]) == {"other.csv", next(r for r in errs["run"] if r != "other.csv")}
    assert errs["held out"].notna().all()
    assert any("on 2 run(s): " in c.value for c in at.caption)


AIPERF = Path(__file__).resolve().parents[2] / "shared" / "clients" / "aiperf-profile_export.jsonl"
TINY_CPU = {"name": "tiny-cpu", "model": {"name": "tiny", "weight_dtype": "fp32"},
            "hardware": {"gpu": "cpu"}, "policy": {"name": "continuous"},
            "workload": {"arrival": "poisson", "rate": 1.0, "num_requests": 1}}


@pytest.mark.skipif(not AIPERF.exists(), reason="../shared/clients is not beside the repo")
def test_a_real_aiperf_file_is_fitted_request_by_request() -> None:
    """AIPerf 0.13's records of 30 requests at 1 req/s against servesim serve (SmolLM2-135M
    on a 2-vCPU machine; ../shared/clients/README.md), on the tiny model's CPU profile:
    another model on another machine, which time_scale and request_s take up. The fit
    lowers its own loss, so the mean TTFT and TPOT errors end no larger than they began."""
    run = measured_run(AIPERF)
    assert run.per_request and len(run.requests) == 30 and run.name == AIPERF.name
    got = fit_run(TINY_CPU, [AIPERF], ("time_scale", "request_s"))
    errs = got.errors.set_index("statistic")
    for stat in ("ttft_mean", "tpot_mean"):
        assert abs(errs.loc[stat, "after"]) <= abs(errs.loc[stat, "before"]) + 1e-9, stat
    assert abs(errs.loc["tpot_mean", "after"]) < 0.15
