"""The dashboard in a real browser: Debian's chromium driven by Playwright.

Starts ``streamlit run dashboard/app.py`` on a free loopback port, visits every page,
changes a control, waits for the page to answer, checks what is shown and saves a
screenshot per page under ``test-output/``. Skips (saying how to enable it) where
chromium or playwright is missing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
CHROMIUM = shutil.which("chromium")
try:
    from playwright.sync_api import Page, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None
if CHROMIUM is None or sync_playwright is None:
    pytest.skip("browser test needs Debian's chromium and playwright: "
                "`apt-get install -y chromium` and `pip install playwright` "
                "(never `playwright install`)", allow_module_level=True)

from servesim.dashboard_command import streamlit_args  # noqa: E402

OUT = Path(__file__).resolve().parents[2] / "test-output"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PLOT = "div.js-plotly-plot .main-svg"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(streamlit_args(port), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("streamlit did not become healthy in 60 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture(scope="module")
def page(base_url: str) -> Iterator[Page]:
    OUT.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield browser.new_page(viewport={"width": 1400, "height": 2000})
        browser.close()


def _open(page: Page, url: str) -> None:
    page.goto(url)
    page.wait_for_selector(PLOT, timeout=90_000)
    _settle(page)


def _settle(page: Page, timeout_s: float = 90) -> None:
    """Wait until Streamlit has finished running the script: no "Stop" button, no running
    status widget and no progress bar, twice in a row."""
    busy = ['[data-testid="stStatusWidget"]', '[data-testid="stProgress"]',
            'button:has-text("Stop")']
    time.sleep(0.5)
    deadline, quiet = time.monotonic() + timeout_s, 0
    while quiet < 2 and time.monotonic() < deadline:
        running = any(page.locator(sel).count() for sel in busy)
        quiet = 0 if running else quiet + 1
        time.sleep(0.25)
    page.wait_for_selector(PLOT, timeout=90_000)


def _set_number(page: Page, label: str, value: str) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(value)
    box.press("Enter")
    _settle(page)


def _check(page: Page, label: str) -> None:
    """Tick the checkbox ``label`` by clicking it, as a person does."""
    page.locator('[data-testid="stCheckbox"]', has_text=label).locator("label").click()
    _settle(page)


def _tile(page: Page, label: str) -> str:
    tile = page.locator('[data-testid="stMetric"]', has_text=label).first
    tile.wait_for(timeout=60_000)
    return tile.locator('[data-testid="stMetricValue"]').inner_text()


def _table(page: Page) -> list[dict[str, str]]:
    """The page's first st.dataframe as rows of header -> cell text (its accessible table)."""
    grid = page.locator('[data-testid="stDataFrame"] table').first
    head = grid.locator("th").all_inner_texts()
    rows = grid.locator("tbody tr").all()
    return [dict(zip(head, row.locator("td").all_inner_texts(), strict=False)) for row in rows]


def _ms(text: str) -> float:
    value, unit = text.split()
    return float(value) * (1000.0 if unit == "s" else 1.0)


def _shot(page: Page, name: str) -> None:
    page.screenshot(path=str(OUT / f"dashboard-{name}.png"), full_page=True)


def test_explorer(page: Page, base_url: str) -> None:
    _open(page, base_url)
    assert page.locator("div.js-plotly-plot").count() >= 3
    assert page.get_by_text("Latency CDFs").count() >= 1
    before = _ms(_tile(page, "P99 TTFT"))
    _set_number(page, "Rate (req/s)", "25")
    deadline = time.monotonic() + 60
    while _ms(_tile(page, "P99 TTFT")) == before and time.monotonic() < deadline:
        time.sleep(0.3)
    assert _ms(_tile(page, "P99 TTFT")) > before
    assert page.locator("div.js-plotly-plot g.trace").count() >= 7  # + a WebGL scatter
    page.get_by_text("Track record: how servesim read published runs like this one").click()
    page.get_by_text("runs like this: stack, GPU, load").wait_for(timeout=30_000)
    assert page.get_by_text("any data-centre GPU, one GPU, arrivals at a rate").count() >= 1
    _shot(page, "explorer")


def test_explorer_upload_fills_the_widgets(page: Page, base_url: str, tmp_path: Path) -> None:
    """Issue 11 item 5 in a real browser: after an upload every widget shows the uploaded
    value (rate 3, continuous, its trace), not what was on screen before."""
    _open(page, base_url)
    _set_number(page, "Rate (req/s)", "25")
    trace = tmp_path / "t.csv"
    trace.write_text("request_id,arrival_s,prompt_tokens,output_tokens\n"
                     + "".join(f"{i},{i * 0.3:.1f},{100 + i},12\n" for i in range(40)))
    scenario = tmp_path / "mine.toml"
    scenario.write_text(f'[workload]\narrival = "poisson"\nrate = 3.0\ntrace = "{trace}"\n'
                        'num_requests = 40\n[policy]\nname = "continuous"\n')
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.locator('input[type="file"]').first.set_input_files(str(scenario))
    page.get_by_text("trace: t.csv (from the scenario)").wait_for(timeout=60_000)
    _settle(page)
    assert float(page.get_by_label("Rate (req/s)", exact=True).input_value()) == 3.0
    policy = sidebar.locator('[data-testid="stSelectbox"]', has_text="Policy").first.inner_html()
    assert "continuous (vLLM v0)" in policy and "chunked prefill" not in policy
    assert page.get_by_text("40 of 40 requests finished").count() == 1
    _shot(page, "explorer-upload")


def test_explorer_speculative_decoding_and_prefix_caching(page: Page, base_url: str) -> None:
    """Issue 14 item 3: both features switched on through the sidebar's widgets, and their
    metrics shown with values a reader can check (100 requests keep each rerun short)."""
    _open(page, base_url)
    _set_number(page, "Requests", "100")
    assert page.get_by_text("Accepted tokens per step").count() == 0
    _check(page, "Speculative decoding")
    k = int(page.get_by_label("Draft tokens per step (k)", exact=True).input_value())
    assert k == 4 and 1 < float(_tile(page, "Accepted tokens per step")) <= k + 1
    # alpha 1 and k 2: every draft is accepted, a row emits 3 tokens a step (fewer only
    # at its end); the closed form in the caption says 3.00
    _set_number(page, "Draft tokens per step (k)", "2")
    _set_number(page, "Acceptance per draft (alpha)", "1")
    page.get_by_text("= 3.00 tokens a step").wait_for(timeout=60_000)
    assert _tile(page, "Draft acceptance rate") == "100.0%"
    assert 2.5 < float(_tile(page, "Accepted tokens per step")) <= 3
    _check(page, "Prefix caching")
    _set_number(page, "Shared system prompt (tokens)", "1000")
    hit = float(_tile(page, "Prefix hit rate").rstrip("%"))
    assert 0 < hit < 100
    assert int(_tile(page, "Prefill tokens saved").replace(",", "")) > 0
    _shot(page, "explorer-features")


def test_policies_speculative_decoding_column(page: Page, base_url: str) -> None:
    _open(page, f"{base_url}/policies")
    _set_number(page, "Request rates (req/s)", "5")
    _set_number(page, "Requests per point", "100")
    assert "spec_mean_accepted_tokens_per_step" not in _table(page)[0]
    _check(page, "Speculative decoding")
    page.get_by_text("run without speculative decoding").wait_for(timeout=60_000)
    # the note shows before the simulations: wait for the table they write
    deadline = time.monotonic() + 60
    while ("spec_mean_accepted_tokens_per_step" not in (_table(page) or [{}])[0]
           and time.monotonic() < deadline):
        time.sleep(0.3)
    rows = {row["policy"]: row for row in _table(page)}
    assert float(rows["chunked"]["spec_mean_accepted_tokens_per_step"]) > 1
    assert rows["static"]["spec_mean_accepted_tokens_per_step"] in ("", "None", "nan")
    _shot(page, "policies-speculative")


def test_policies(page: Page, base_url: str) -> None:
    _open(page, f"{base_url}/policies")
    assert page.get_by_text("Recommended:").count() == 1
    assert page.locator("div.js-plotly-plot").count() == 3
    _set_number(page, "TTFT target (ms)", "100")
    page.get_by_text("No policy meets").wait_for(timeout=60_000)
    _shot(page, "policies")


def test_hardware(page: Page, base_url: str) -> None:
    _open(page, f"{base_url}/hardware")
    assert page.locator("div.js-plotly-plot").count() == 4
    assert page.get_by_text("Cheapest that meets the SLO").count() == 1
    _set_number(page, "Rate (req/s)", "30")
    assert page.locator("div.js-plotly-plot g.trace").count() >= 8
    _shot(page, "hardware")


def test_capacity(page: Page, base_url: str) -> None:
    _open(page, f"{base_url}/capacity")
    assert page.get_by_text("Best for 40 req/s").count() == 1
    assert page.locator("div.js-plotly-plot").count() == 2
    _set_number(page, "Target rate (req/s)", "80")
    page.get_by_text("Best for 80 req/s").wait_for(timeout=60_000)
    assert page.locator("div.js-plotly-plot g.trace").count() >= 4
    _shot(page, "capacity")


def test_validation(page: Page, base_url: str, tmp_path: Path) -> None:
    _open(page, f"{base_url}/validation")
    assert page.get_by_text("Worst:").count() == 1
    _shot(page, "validation")
    page.get_by_role("button", name="Fit", exact=True).click()  # the demo: steps 1.3x
    page.get_by_text("on 1 run(s): ").wait_for(timeout=90_000)
    _settle(page)
    fitted = page.locator('[data-testid="stDataFrame"] table').nth(1)
    row = fitted.locator("tbody tr", has_text="time_scale").first.locator("td")
    assert float(row.all_inner_texts()[1]) == pytest.approx(1.3, rel=0.02)
    assert page.get_by_role("button", name="Calibrated profile (JSON)").count() == 1
    _shot(page, "validation-fit")
    bad = tmp_path / "broken.csv"
    bad.write_text("request_id,arrival_s,first_token_s,finish_s,prompt_tokens,output_tokens\n"
                   "0,x,1,2,3,4\n")
    page.locator('input[type="file"]').first.set_input_files(str(bad))
    page.get_by_text("broken.csv line 2: arrival_s").wait_for(timeout=60_000)
    _shot(page, "validation-bad-upload")


def test_calibration(page: Page, base_url: str) -> None:
    _open(page, f"{base_url}/calibration")
    assert page.locator("div.js-plotly-plot").count() == 5
    assert page.get_by_text("roofline prior, not measured").count() >= 1
    _shot(page, "calibration")


def _billed_counts(page: Page) -> set[float]:
    """The distinct y values of the Fleet page's "replicas billed" trace as plotted (plotly.js's
    full data: its arrays decoded from the base64 form the figure JSON carries)."""
    ys = page.evaluate("""() => [...document.querySelectorAll('div.js-plotly-plot')]
        .flatMap(d => (d._fullData || []).filter(t => t.name === 'replicas billed'))
        .map(t => Array.from(t.y))""")
    assert len(ys) == 1
    return set(ys[0])


def test_fleet(page: Page, base_url: str) -> None:
    """Issue 15 item 6: the autoscaler follows the step and is switched off through its
    checkbox; another scenario picked in the select box shows its per-class table."""
    _open(page, f"{base_url}/fleet")
    _set_number(page, "Time scale", "0.05")  # 1,400 requests: 4 -> 40 req/s at 15 s
    page.get_by_text("1,400 of 28,000 requests").wait_for(timeout=60_000)
    assert len(_billed_counts(page)) > 1
    assert _tile(page, "Cost").startswith("$")
    _check(page, "Autoscaler")  # on -> off
    page.get_by_text("Autoscaler off: 1 replica(s) throughout").wait_for(timeout=60_000)
    assert _billed_counts(page) == {1}
    _shot(page, "fleet-autoscaler")
    page.locator('[data-testid="stSelectbox"]', has_text="Scenario").first.click()
    page.get_by_role("option", name="priority-overload").click()
    page.get_by_text("TTFT by priority class").wait_for(timeout=90_000)
    _settle(page)
    assert [row["class"] for row in _table(page)] == ["interactive", "batch"]
    _shot(page, "fleet-classes")
