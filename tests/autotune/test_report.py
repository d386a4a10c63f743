"""The report: one figure for "best", the default config and the peak marked."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import time
from html.parser import HTMLParser

import pytest

import autotune
import db
from autotune import report
from autotune.selection import record_of
from measure import ErrorKind, MeasureResult


@pytest.fixture
def task():
    return autotune.create_task("matmul", (16, 16, 16, "float32"), "llvm")


def _result(cost: float, when: float) -> MeasureResult:
    return MeasureResult((cost,), None, "", 0.01, 0.02, when, "host:1")


@pytest.fixture
def lucky_log(tmp_path, task):
    """A log whose fastest single trial (config 1 at 1 ms, once) is not the ranking's best: timed
    again it took 10 ms; config 2 took 2 ms every time; the default config 4 ms."""
    space = task.config_space
    default = space.default_config
    others = [space.get(i) for i in range(len(space)) if i != default.index and space.is_valid(i)][:2]
    lucky, steady = others
    log = db.open(tmp_path / "t.db")
    run = log.start_run("grid")
    t0 = time.time() - 100
    trials = [(lucky, 1e-3), (steady, 2e-3), (default, 4e-3)]
    remeasures = [(lucky, 10e-3), (lucky, 10e-3), (steady, 2e-3), (steady, 2e-3), (default, 4e-3)]
    records = [record_of(task, c, _result(cost, t0 + k), run_id=run) for k, (c, cost) in enumerate(trials)]
    records += [record_of(task, c, _result(cost, t0 + 10 + k), run_id=run, kind=db.REMEASURE)
                for k, (c, cost) in enumerate(remeasures)]
    log.add(records)
    log.end_run(run, "budget")
    yield log, lucky, steady, default
    log.close()


def test_the_table_and_the_curve_show_the_rankings_best(lucky_log, task):
    log, lucky, steady, default = lucky_log
    (s,) = report._with_curves(log, report.summarize(log))
    assert s.best_cost == pytest.approx(2e-3) and s.best_config == steady.to_json()["knobs"]
    assert s.default_cost == pytest.approx(4e-3) and s.default_measurements == 2
    table_gflops = float(report.summary_table([s])[1][3])
    assert table_gflops == pytest.approx(task.flop / 2e-3 / 1e9, abs=0.05)

    plt = report._pyplot()
    fig, ax = plt.subplots()
    try:
        report.plot_workload(ax, s, peak_gflops=50.0)
        lines = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
    finally:
        plt.close(fig)
    chosen = [v for k, v in lines.items() if k.startswith("chosen config")]
    assert len(chosen) == 1 and max(chosen[0]) == pytest.approx(s.best_gflops)
    (default_line,) = [v for k, v in lines.items() if k.startswith("default config")]
    assert max(default_line) == pytest.approx(task.flop / 4e-3 / 1e9)
    (peak,) = [v for k, v in lines.items() if k.startswith("peak")]
    assert max(peak) == 50.0
    # no line rises above the table's figure but the peak; the lucky trial is a labelled point
    assert all(max(v) <= s.best_gflops * (1 + 1e-9) for k, v in lines.items() if not k.startswith("peak"))
    labels = [c.get_label() for c in ax.collections]
    assert "single trial" in labels


def test_the_html_page_names_the_default_config(lucky_log, tmp_path):
    log, *_ = lucky_log
    report.write_html(log, tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert "default config 4 ms" in page and "best 2 ms" in page


def _script_sources(page: str) -> list[str]:
    class Scripts(HTMLParser):
        def __init__(self):
            super().__init__()
            self.sources = []

        def handle_starttag(self, tag, attrs):
            if tag == "script" and dict(attrs).get("src"):
                self.sources.append(dict(attrs)["src"])

    parser = Scripts()
    parser.feed(page)
    return parser.sources


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_the_html_report_is_interactive_and_self_contained(lucky_log, tmp_path):
    """The page holds plotly's JavaScript (no network needed) and per-trial hover text: each
    trial's config, cost and error."""
    log, lucky, steady, default = lucky_log
    report.write_html(log, tmp_path / "r.html", peak_gflops=50.0)
    page = (tmp_path / "r.html").read_text()
    assert _script_sources(page) == []  # nothing fetched: plotly's JavaScript is in the page
    assert "Plotly.newPlot" in page
    assert "cost 1 ms" in page and "error: none" in page  # the lucky trial's hover
    knob, value = next(iter(lucky.to_json()["knobs"].items()))
    assert f"{knob} = {json.dumps(value)}" in page


def test_knob_importance_comes_from_the_logs_trials(lucky_log):
    from autotune.report_html import knob_importance

    log, *_ = lucky_log
    importance = knob_importance(log.records())
    assert importance and sum(importance.values()) == pytest.approx(1.0)
    assert set(importance) <= set(log.records()[0].config["knobs"])


@pytest.mark.skipif(_chromium() is None, reason="needs Debian's chromium (CI installs it: .ci/run)")
def test_the_html_report_renders_in_headless_chromium(lucky_log, tmp_path):
    log, *_ = lucky_log
    # a failed trial too: it is drawn as an error, with its message on hover
    task = autotune.create_task("matmul", (16, 16, 16, "float32"), "llvm")
    failed = MeasureResult((), ErrorKind.RUNTIME_ERROR, "boom", 0.01, 0.02, time.time(), "host:2")
    log.add([record_of(task, task.config_space.get(3), failed)])
    report.write_html(log, tmp_path / "r.html", peak_gflops=50.0)
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run",
           f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
           "--virtual-time-budget=10000", "--dump-dom", (tmp_path / "r.html").as_uri()]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Uncaught" not in p.stderr, p.stderr[-2000:]
    summary = re.search(r'<pre id="plot-summary" hidden="">(.*?)</pre>', p.stdout, re.S)
    assert summary, "the page's scripts did not run to the end"
    found = json.loads(html.unescape(summary.group(1)))
    assert found["errors"] == []
    history, importance, timeline = found["plots"]
    assert history["traces"][:2] == ["single trial", "error"]
    assert [t.split(" ")[0] for t in history["traces"][2:]] == ["chosen", "default", "peak"]
    assert importance["traces"] == ["knob importance"]
    assert timeline["traces"] == ["trial", "re-measurement", "error"]


def test_a_long_history_is_drawn_from_the_downsampled_curve(lucky_log, tmp_path, monkeypatch):
    from autotune import report_html

    log, *_ = lucky_log
    monkeypatch.setattr(report_html, "INTERACTIVE_TRIALS", 2)
    report.write_html(log, tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert "3 trials: the history shows the downsampled curve" in page
    history = page.split('id="plot-1"')[1].split('id="plot-2"')[0]
    assert "up to trial 1: fastest 1 ms" in history and "cost 1 ms" not in history
