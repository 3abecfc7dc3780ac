"""The Hardware, Policies and Validation pages: own widget keys, refilled by the scenario.

Issue 11 follow-up: these pages passed their own widget defaults under keys shared with
the Explorer (``rate``, ``gpu``, ``model``, ...), so switching page or scenario could show
a value another page or the previous scenario set. Each page now keys its widgets with
its own prefix and refills them when its scenario changes (dashboard/page_form.py).
Expected values are the shipped scenarios' (collapse keeps the middle of a rate sweep).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from dashboard_support import page  # noqa: E402

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"


def test_hardware_page_takes_the_new_scenarios_values():
    at = page("hardware").run()
    assert not at.exception, at.exception
    assert at.number_input(key="hw_rate").value == 12.0  # gpu-compare: rates 4, 8, 12, 16
    at.multiselect(key="hw_gpus").set_value(["h100-sxm"]).run()  # one GPU: a quick page
    at.number_input(key="hw_rate").set_value(3.0).run()
    at.number_input(key="hw_ttft_ms").set_value(900.0).run()
    at.selectbox(key="hw_scenario").set_value("voice").run()
    assert not at.exception, at.exception
    assert at.number_input(key="hw_rate").value == 20.0  # voice: rates 5, 10, 20, 30
    assert at.number_input(key="hw_ttft_ms").value == 300.0
    assert at.number_input(key="hw_tpot_ms").value == 40.0
    assert at.multiselect(key="hw_gpus").value == ["h100-sxm"]  # not from the scenario: kept


def test_policies_page_takes_the_new_scenarios_values():
    at = page("policies").run()
    assert not at.exception, at.exception
    at.multiselect(key="pol_policies").set_value(["continuous"]).run()
    at.text_input(key="pol_rates").set_value("5").run()
    assert at.number_input(key="pol_continuous_max_num_seqs").value == 256  # chat
    at.number_input(key="pol_ttft_ms").set_value(100.0).run()
    at.selectbox(key="pol_scenario").set_value("code-completion").run()
    assert not at.exception, at.exception
    assert at.number_input(key="pol_ttft_ms").value == 200.0
    assert at.number_input(key="pol_tpot_ms").value == 30.0
    assert at.number_input(key="pol_continuous_max_num_seqs").value == 128
    assert at.number_input(key="pol_continuous_max_num_batched_tokens").value == 8192
    assert "P99 TTFT ≤ 200 ms" in " ".join(m.value for m in at.markdown)  # what ran


def test_validation_page_takes_the_new_scenarios_values():
    at = page("validation").run()
    assert not at.exception, at.exception
    at.selectbox(key="val_gpu").set_value("h200").run()
    at.selectbox(key="val_scenario").set_value("code-completion").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="val_model").value == "qwen2.5-7b"
    assert at.selectbox(key="val_gpu").value == "h100-sxm"
    assert at.selectbox(key="val_policy").value == "chunked"


def test_explorer_rate_does_not_leak_into_the_hardware_page():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=240).run()
    assert not at.exception, at.exception
    at.number_input(key="rate").set_value(25.0).run()
    at.switch_page("views/hardware.py").run()
    assert not at.exception, at.exception
    assert at.number_input(key="hw_rate").value == 12.0  # gpu-compare's, not the Explorer's
