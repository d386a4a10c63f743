"""The interactive HTML report of a tuning log: one self-contained page that works offline.

Per workload (:class:`autotune.report.WorkloadSummary`), three plotly figures:

- the optimisation history: every search trial as a point (hover: its config, cost, rate,
  error), failed trials as red crosses at zero, and the :func:`autotune.report.references`
  as labelled lines (the chosen config's figure, the table's; the default config; a peak);
- knob importance: Optuna's PED-ANOVA importance evaluator
  (:class:`optuna.importance.PedAnovaImportanceEvaluator`, which needs no scikit-learn) on a
  study built from the log's successful trials, the knob values as categories and the trial's
  mean cost as the value to minimise;
- a timeline of the workers: each measurement (trials and re-measurements) as a bar on its
  worker's row (host and worker of the record), from its start to its end. A record keeps
  when its measurement finished and how long its run took, so a bar's start is the end less
  the run time (the build, done before, is not drawn).

Above them the summary table and the runs, as in the static report. plotly.js is embedded
once in the page (no network needed). Workloads with more than :data:`INTERACTIVE_TRIALS`
trials draw the downsampled curve instead of single trials (no per-trial hover), and their
timeline and importance read the first :data:`INTERACTIVE_TRIALS` records only: the page
says so.
"""

from __future__ import annotations

import html
import json
import warnings
from collections.abc import Sequence

__all__ = ["INTERACTIVE_TRIALS", "history_figure", "importance_figure", "timeline_figure",
           "knob_importance", "page"]

#: Past this many trials of a workload, the page draws its downsampled curve, not every trial.
INTERACTIVE_TRIALS = 5000


def _plotly():
    # plotly loads only for an HTML report.
    import plotly.graph_objects as go
    from plotly.offline import get_plotlyjs

    return go, get_plotlyjs


def _knobs_text(config: dict) -> str:
    knobs = config.get("knobs", config) if isinstance(config, dict) else {}
    return "<br>".join(f"{html.escape(str(k))} = {html.escape(json.dumps(v))}" for k, v in knobs.items())


def _trials(records: Sequence) -> list:
    """The search trials of ``records``, in time order (as the curve numbers them)."""
    import db

    return sorted((r for r in records if r.kind == db.TRIAL), key=lambda r: r.timestamp)


def history_figure(summary, records: Sequence | None, peak_gflops: float | None = None):
    """The optimisation history of one workload (a plotly figure): its search trials (from
    ``records``, or from ``summary.curve`` when ``records`` is None), failed ones at zero, and
    the reference lines."""
    from autotune.report import references

    go, _ = _plotly()
    fig = go.Figure()
    unit = summary.rate_unit
    xs, ys, texts, bad_x, bad_text = [], [], [], [], []
    if records is not None:
        for n, r in enumerate(_trials(records), 1):
            cost = r.mean_cost
            if r.error_kind is not None or cost is None:
                bad_x.append(n)
                bad_text.append(f"trial {n}<br><b>error: {html.escape(r.error_kind or 'no cost')}</b><br>"
                                f"{html.escape((r.error_msg or '')[:300])}<br>{_knobs_text(r.config)}")
                continue
            xs.append(n)
            ys.append(summary.rate(cost))
            texts.append(f"trial {n}<br>cost {cost * 1e3:.4g} ms<br>{summary.rate(cost):.4g} {unit}<br>"
                         f"error: none<br>{_knobs_text(r.config)}")
        name = "single trial"
    else:
        for p in summary.curve.points if summary.curve is not None else []:
            for cost, which in ((p.fastest, "fastest"), (p.slowest, "slowest")):
                if cost is not None:
                    xs.append(p.trial)
                    ys.append(summary.rate(cost))
                    texts.append(f"up to trial {p.trial}: {which} {cost * 1e3:.4g} ms")
            if p.errors:
                bad_x.append(p.trial)
                bad_text.append(f"up to trial {p.trial}: {p.errors} errors")
        bucketed = summary.curve is not None and summary.curve.trials != len(summary.curve.points)
        name = "single trials (fastest, slowest per bucket)" if bucketed else "single trial"
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=name, text=texts, hoverinfo="text",
                             marker={"color": "#4c72b0", "size": 6, "opacity": 0.7}))
    if bad_x:
        fig.add_trace(go.Scatter(x=bad_x, y=[0.0] * len(bad_x), mode="markers", name="error",
                                 text=bad_text, hoverinfo="text",
                                 marker={"color": "#c44e52", "symbol": "x", "size": 8}))
    last = max(xs + bad_x, default=1)
    dashes = {"-": "solid", "--": "dash", ":": "dot"}
    for ref in references(summary, peak_gflops):
        fig.add_trace(go.Scatter(x=[0, last + 1], y=[ref.value, ref.value], mode="lines", name=ref.name,
                                 hoverinfo="name", line={"color": ref.color, "dash": dashes[ref.dash]}))
    fig.update_layout(title=f"Optimisation history: {summary.label} on {summary.target_label}",
                      xaxis_title="trial (in time order)", yaxis_title=unit, height=420,
                      legend={"orientation": "h", "y": -0.2}, margin={"t": 50})
    fig.update_yaxes(rangemode="tozero")
    return fig


def knob_importance(records: Sequence) -> dict[str, float]:
    """The importance of each knob (summing to 1) for the mean cost of the successful trials
    among ``records``, by Optuna's PED-ANOVA evaluator; empty when fewer than two trials
    succeeded or no knob took two values."""
    import optuna
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import create_trial

    ok = [r for r in _trials(records) if r.error_kind is None and r.mean_cost is not None]
    if len(ok) < 2:
        return {}
    values = [{k: json.dumps(v) for k, v in r.config.get("knobs", r.config).items()} for r in ok]
    names = sorted({k for v in values for k in v})
    varied = [k for k in names if len({v.get(k) for v in values}) > 1 and all(k in v for v in values)]
    if not varied:
        return {}
    dists = {k: CategoricalDistribution(sorted({v[k] for v in values})) for k in varied}
    trials = [create_trial(params={k: v[k] for k in varied}, distributions=dists, value=r.mean_cost)
              for v, r in zip(values, ok)]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize")
    study.add_trials(trials)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the evaluator is marked experimental
        evaluator = optuna.importance.PedAnovaImportanceEvaluator()
        return dict(optuna.importance.get_param_importances(study, evaluator=evaluator))


def importance_figure(summary, importance: dict[str, float]):
    """A bar per knob: its importance (see :func:`knob_importance`)."""
    go, _ = _plotly()
    names = list(importance)[::-1]  # the most important on top
    fig = go.Figure(go.Bar(x=[importance[k] for k in names], y=names, orientation="h",
                           name="knob importance", marker={"color": "#4c72b0"},
                           hovertemplate="%{y}: %{x:.3f}<extra></extra>"))
    fig.update_layout(title=f"Knob importance (Optuna PED-ANOVA, on the trials' mean cost): {summary.label}",
                      xaxis_title="importance (sums to 1)", height=120 + 28 * len(names), margin={"t": 50})
    return fig


def timeline_figure(summary, records: Sequence):
    """Each measurement of ``records`` as a bar on its worker's row, from its start (its end
    less its run time) to its end, in seconds since the first start; one trace per kind:
    trials, re-measurements, errors."""
    import db

    go, _ = _plotly()
    timed = [r for r in records if r.run_time is not None]
    t0 = min((r.timestamp - r.run_time for r in timed), default=0.0)
    groups = {"trial": [], "re-measurement": [], "error": []}
    for r in timed:
        which = "error" if r.error_kind is not None else ("trial" if r.kind == db.TRIAL else "re-measurement")
        groups[which].append(r)
    colors = {"trial": "#4c72b0", "re-measurement": "#dd8452", "error": "#c44e52"}
    fig = go.Figure()
    for which, rs in groups.items():
        if not rs:
            continue
        texts = []
        for r in rs:
            cost = r.mean_cost
            what = f"error: {html.escape(r.error_kind)}" if r.error_kind else f"cost {cost * 1e3:.4g} ms"
            texts.append(f"{which}<br>{html.escape(r.host)} {html.escape(r.device)}<br>{what}<br>"
                         f"run {r.run_time:.3g} s<br>{_knobs_text(r.config)}")
        fig.add_trace(go.Bar(
            x=[max(r.run_time, 1e-3) for r in rs], base=[r.timestamp - r.run_time - t0 for r in rs],
            y=[f"{r.host} {r.device}".strip() or "?" for r in rs], orientation="h", name=which,
            text=texts, hoverinfo="text", textposition="none", marker={"color": colors[which]}))
    workers = len({f"{r.host} {r.device}" for r in timed})
    fig.update_layout(title=f"Timeline of the workers: {summary.label}", barmode="overlay",
                      xaxis_title="seconds since the first measurement started", height=160 + 30 * workers,
                      margin={"t": 50}, legend={"orientation": "h", "y": -0.3})
    return fig


#: Run first: keeps the page's JavaScript errors, for :data:`_SUMMARY_JS` to report.
_ERRORS_JS = """window.reportErrors = [];
window.addEventListener("error", function (e) { window.reportErrors.push(String(e.message)); });"""

#: Run once the page has loaded: writes a summary of the plots (each div's id and its traces'
#: names) and of the errors met into a hidden ``<pre id="plot-summary">``, so that a headless
#: browser's dump of the DOM tells whether every plot rendered.
_SUMMARY_JS = """window.addEventListener("load", function () {
  var plots = [];
  document.querySelectorAll(".js-plotly-plot").forEach(function (d) {
    plots.push({id: d.id, traces: (d.data || []).map(function (t) { return t.name || t.type; })});
  });
  var pre = document.createElement("pre");
  pre.id = "plot-summary"; pre.hidden = true;
  pre.textContent = JSON.stringify({plots: plots, errors: window.reportErrors});
  document.body.appendChild(pre);
});"""


def page(title: str, intro: str, summary_table_html: str, sections: Sequence[tuple[str, str, list]],
         tail_html: str, css: str) -> str:
    """The whole page: ``sections`` are (heading, HTML text, plotly figures) per workload."""
    _, get_plotlyjs = _plotly()
    body = [f"<h1>{html.escape(title)}</h1>", intro, '<h2 id="summary">Summary</h2>', summary_table_html]
    n = 0
    for heading, text, figures in sections:
        body += [heading, text]
        for fig in figures:
            n += 1
            body.append(fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"plot-{n}",
                                    config={"displaylogo": False, "responsive": True}))
    body.append(tail_html)
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{css}</style>\n"
            f"<script>{_ERRORS_JS}</script>\n"
            f"<script type=\"text/javascript\">{get_plotlyjs()}</script>\n</head>\n<body>\n"
            + "\n".join(body) + f"\n<script>{_SUMMARY_JS}</script>\n</body>\n</html>\n")

