"""Reading a tuning log for people: summary tables, tuning curves and an HTML report.

>>> import db, autotune.report as report
>>> with db.open("tuning.db") as log:
...     rows = report.summarize(log)
...     print(report.format_table(report.summary_table(rows)))
...     report.write_html(log, "report.html")      # one interactive page (plotly) + the table
...     report.write_plot(log, "curve.png")        # the curves alone

A workload's best config is chosen as :func:`autotune.apply_history_best` chooses it
(:mod:`autotune.selection`: the best confident median over every measurement of a
config), so the tables name the config a build would use. The tables read the counts and
per-config statistics the log keeps (no record is loaded); the plots read each workload's
trials downsampled in SQL (:meth:`db.TuningLog.trial_curve`), at most
:data:`PLOT_POINTS` buckets of consecutive trials. Trials are ordered by timestamp;
failed trials are drawn as red crosses on the x axis.

Only :mod:`db` is needed to summarise; image plots need matplotlib (drawn off-screen with
the Agg backend), the HTML page plotly (:mod:`autotune.report_html`: interactive, its
JavaScript embedded, so it works offline).
"""

from __future__ import annotations

import html
import math
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import db as tuning_db
from autotune.selection import gflops, knobs_of, target_label, workload_label
from measure import code_version
from search_spaces import SearchSpaceError, create_task

__all__ = ["WorkloadSummary", "summarize", "summarize_workload", "summary_table", "stale_figures",
           "format_table", "run_lines", "Reference", "references", "plot_workload", "write_plot",
           "write_html", "IMAGE_SUFFIXES", "SUMMARY_HEADER", "PLOT_POINTS"]

#: File suffixes :func:`write_plot` can write (matplotlib's formats).
IMAGE_SUFFIXES = (".png", ".svg", ".pdf")

#: At most this many points per tuning curve: longer histories are drawn in buckets.
PLOT_POINTS = 1000


@dataclass
class WorkloadSummary:
    """What a log knows about one workload.

    ``trials`` counts the search trials and ``errors`` the failed ones among them;
    ``remeasured`` counts the end-of-run re-measurements, which are no trials but count
    as measurements of their config. ``best_cost`` is the median (seconds) of every
    measurement of the best config, ``best_gflops`` its rate; ``flop`` is the work of
    one run (None when no record of the best config says). ``curve`` is the downsampled
    tuning curve (a :class:`db.TrialCurve`), read only for plots.
    """

    key: str
    template: str
    args: list
    target: str
    target_model: str
    trials: int
    errors: int
    error_kinds: dict
    best_config: dict | None
    best_cost: float | None
    best_measurements: int
    flop: float | None
    remeasured: int = 0
    curve: object = field(default=None, repr=False)
    #: the median cost (seconds) of every measurement of the template's default config and their
    #: number, when the log measured it (read for plots only)
    default_cost: float | None = None
    default_measurements: int = 0
    #: the code version the best figure was measured with (:func:`measure.code_version`)
    best_code_version: str = ""

    @property
    def label(self) -> str:
        """``matmul(1024,1024,1024,float32)``."""
        return workload_label(self.template, self.args)

    @property
    def target_label(self) -> str:
        """The target string, with the CPU or GPU model when the string does not name it."""
        return target_label(self.target, self.target_model)

    @property
    def best_gflops(self) -> float | None:
        """The rate of the best config (None without a FLOP count or a success)."""
        return gflops(self.flop, self.best_cost)

    def rate(self, cost: float | None) -> float | None:
        """What the plots draw for a cost (seconds): GFLOPS with a FLOP count, else runs per second."""
        if cost is None or not math.isfinite(cost) or cost <= 0:
            return None
        return self.flop / cost / 1e9 if self.flop else 1.0 / cost

    @property
    def rate_unit(self) -> str:
        """The unit of :meth:`rate`."""
        return "GFLOPS" if self.flop else "runs per second"


def summarize_workload(log, workload, counts=None) -> WorkloadSummary:
    """The :class:`WorkloadSummary` of one workload (a :class:`db.Workload`) of ``log``;
    ``counts`` is its :class:`db.SummaryRow` when the caller has it."""
    if counts is None:
        counts = next((row for row in log.summary() if row.workload_key == workload.key), None)
    top = log.config_stats(workload.key, limit=1)
    best = top[0] if top else None
    return WorkloadSummary(
        key=workload.key, template=workload.template, args=list(workload.args), target=workload.target,
        target_model=workload.target_model, trials=counts.trials if counts else 0,
        errors=counts.errors if counts else 0, error_kinds=dict(counts.error_kinds) if counts else {},
        best_config=knobs_of(best.config) if best else None, best_cost=best.median if best else None,
        best_measurements=best.count if best else 0, flop=best.flop if best else None,
        remeasured=counts.remeasured if counts else 0, best_code_version=best.code_version if best else "")


def summarize(log, match: str | None = None) -> list[WorkloadSummary]:
    """One :class:`WorkloadSummary` per workload of ``log``, sorted by template then label.

    ``match`` keeps the workloads whose key starts with it or whose label contains it.
    """
    counts = {row.workload_key: row for row in log.summary()}
    out = []
    for w in log.workloads():
        label = workload_label(w.template, w.args)
        if match and not (w.key.startswith(match) or match in label):
            continue
        out.append(summarize_workload(log, w, counts.get(w.key)))
    return sorted(out, key=lambda s: (s.template, s.label, s.target))


def _when(seconds: float | None) -> str:
    return "-" if seconds is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def run_lines(runs: Sequence) -> list[str]:
    """Lines about a log's tuning runs (:class:`db.RunInfo`): how many ended how, then one line
    per run still running or dead (its process gone: no heartbeat for a while)."""
    if not runs:
        return ["runs: none recorded"]
    counts = Counter(r.status for r in runs)
    lines = [f"runs: {len(runs)} (" + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
             + ")"]
    for r in runs:
        if r.status == "dead":
            lines.append(f"  dead     {r.run_id[:12]} ({r.tuner}, started {_when(r.started)}): no heartbeat "
                         f"since {_when(r.heartbeat or r.started)}; its process is gone")
        elif r.status == "running":
            lines.append(f"  running  {r.run_id[:12]} ({r.tuner}, started {_when(r.started)}; last "
                         f"heartbeat {_when(r.heartbeat or r.started)})")
    return lines


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.4g}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


#: The columns of :func:`summary_table` (and of ``autotune best``).
SUMMARY_HEADER = ("workload", "target", "best ms", "GFLOPS", "trials", "errors")


def stale_figures(rows: Sequence[WorkloadSummary]) -> str:
    """A sentence on how many of ``rows``' best figures other code than today's measured
    (:func:`measure.code_version`: the compiler or a template changed since), and what times
    them again; "" when none did."""
    today = code_version()
    stale = sum(1 for s in rows if s.best_config is not None and s.best_code_version != today)
    if not stale:
        return ""
    return (f"{stale} of these figures were measured with other code than today's ({today}); tuning "
            f"again times the best configs again (`autotune tune-model` with the same budget makes no "
            f"new trials)")


def summary_table(rows: Sequence[WorkloadSummary]) -> list[tuple]:
    """The rows of ``autotune best``: header first."""
    return [SUMMARY_HEADER, *[(s.label, s.target_label, _ms(s.best_cost), _num(s.best_gflops),
                               str(s.trials), str(s.errors)) for s in rows]]


def format_table(rows: Sequence[Sequence], right: Sequence[int] | None = None) -> str:
    """``rows`` (header first) as aligned text columns; columns in ``right`` align right
    (by default every column whose cells, header aside, look like numbers)."""
    if not rows:
        return ""
    ncol = max(len(r) for r in rows)
    cells = [[str(c) for c in r] + [""] * (ncol - len(r)) for r in rows]
    widths = [max(len(r[k]) for r in cells) for k in range(ncol)]
    if right is None:
        right = [k for k in range(ncol) if len(cells) > 1 and all(_numeric(r[k]) for r in cells[1:])]
    lines = []
    for r in cells:
        parts = [c.rjust(w) if k in right else c.ljust(w) for k, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def _numeric(text: str) -> bool:
    if text in ("-", ""):
        return True
    try:
        float(text.rstrip("x%"))
        return True
    except ValueError:
        return False


# ---------------------------------------------------------------------------- plots


def _pyplot():
    # matplotlib (heavy) loads only for a plot, with the Agg backend chosen before pyplot loads.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@dataclass(frozen=True)
class Reference:
    """A horizontal line of a tuning plot: the chosen config, the default config or the peak."""

    name: str
    value: float
    color: str
    dash: str  # matplotlib's linestyle


def references(summary: WorkloadSummary, peak_gflops: float | None = None) -> list[Reference]:
    """The lines a plot of ``summary`` marks: the chosen config (the table's figure: the median of
    every measurement of the config the ranking puts first), the default config when the log
    measured it, and ``peak_gflops`` (a measured FMA peak or roofline, GFLOPS) when given and the
    workload has a FLOP count."""
    out = []
    best = summary.rate(summary.best_cost)
    if best is not None:
        out.append(Reference(f"chosen config {best:.4g} (median of {summary.best_measurements}, as in the "
                             "table)", best, "#dd8452", "-"))
    default = summary.rate(summary.default_cost)
    if default is not None:
        out.append(Reference(f"default config {default:.4g} (median of {summary.default_measurements})",
                             default, "#55a868", "--"))
    if peak_gflops and summary.flop:
        out.append(Reference(f"peak {peak_gflops:.4g} GFLOPS", float(peak_gflops), "#8172b3", ":"))
    return out


def plot_workload(ax, summary: WorkloadSummary, peak_gflops: float | None = None) -> None:
    """Draw ``summary``'s tuning curve (its ``curve``, see :func:`summarize`) on matplotlib
    axes ``ax``: the single trials as points (GFLOPS of each trial's mean; past
    :data:`PLOT_POINTS` trials, the fastest and slowest of each bucket of consecutive trials),
    failed trials as red crosses at zero, a dotted line where a new tuning run starts, and the
    :func:`references` as horizontal lines: the chosen config's figure (the table's, never the
    fastest single trial, which may have been luck), the default config and the peak.
    (Re-measurements are no trials: not drawn as points; they count in the chosen config's
    median.)"""
    curve = summary.curve
    points = curve.points if curve is not None else []
    xs = [p.trial for p in points]
    ok = []
    for p in points:
        ok += [(p.trial, y) for y in {summary.rate(p.fastest), summary.rate(p.slowest)} if y is not None]
    bad = [p.trial for p in points if p.errors]
    if ok:
        single = ("single trial" if curve.trials == len(points)
                  else "single trials (fastest, slowest per bucket)")
        ax.scatter([q[0] for q in ok], [q[1] for q in ok], s=12, color="#4c72b0", alpha=0.55,
                   label=single, zorder=2)
    for ref in references(summary, peak_gflops):
        ax.axhline(ref.value, color=ref.color, linestyle=ref.dash, linewidth=2 if ref.dash == "-" else 1.5,
                   label=ref.name, zorder=3)
    if bad:
        ax.scatter(bad, [0.0] * len(bad), marker="x", s=30, color="#c44e52",
                   label=f"error ({sum(p.errors for p in points)})", zorder=4)
    for start in curve.run_starts if curve is not None else []:
        ax.axvline(start - 0.5, color="#999999", linestyle=":", linewidth=1)
    ax.set_title(f"{summary.label} on {summary.target_label}", fontsize=9)
    ax.set_xlabel("trial (in time order)")
    ax.set_ylabel(summary.rate_unit)
    ax.set_ylim(bottom=0)
    if xs:
        ax.set_xlim(0, xs[-1] + 1)
        ax.legend(loc="lower right", fontsize=7)
    ax.grid(True, alpha=0.3)


def _default_config_stats(log, s: WorkloadSummary) -> tuple[float | None, int]:
    """The median cost of every measurement of ``s``'s default config and their number (None, 0
    when the log never measured it, or the template is not registered in this process)."""
    try:
        task = create_task(s.template, s.args, s.target)
    except SearchSpaceError:  # a template of the user's, not imported here: no default to mark
        return None, 0
    key = tuning_db.knobs_fingerprint(task.config_space.default_config.to_json())
    costs = [c for r in log.records(s.key, knobs_hash=key) for c in tuning_db.stats.usable_costs(r.costs)]
    return (statistics.median(costs), len(costs)) if costs else (None, 0)


def _with_curves(log, summaries: Sequence[WorkloadSummary]) -> list[WorkloadSummary]:
    for s in summaries:
        s.curve = log.trial_curve(s.key, points=PLOT_POINTS)
        s.default_cost, s.default_measurements = _default_config_stats(log, s)
    return list(summaries)


def _figure(summaries: Sequence[WorkloadSummary], peak_gflops: float | None = None):
    plt = _pyplot()
    n = max(1, len(summaries))
    cols = 1 if n == 1 else 2
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7 * cols, 4 * rows), squeeze=False)
    for ax in axes.flat[len(summaries):]:
        ax.set_visible(False)
    for ax, s in zip(axes.flat, summaries):
        plot_workload(ax, s, peak_gflops)
    fig.tight_layout()
    return plt, fig


def write_plot(log, path, match: str | None = None, peak_gflops: float | None = None) -> int:
    """Write the tuning curves of ``log``'s workloads (those ``match`` selects) as one
    image (``.png``, ``.svg`` or ``.pdf``): one panel per workload (:func:`plot_workload`;
    ``peak_gflops``, a measured FMA peak or roofline, is marked when given). Returns the
    number of panels."""
    path = Path(path)
    if path.suffix.lower() not in IMAGE_SUFFIXES:
        raise ValueError(f"{path}: an image file ends in {', '.join(IMAGE_SUFFIXES)}")
    summaries = _with_curves(log, summarize(log, match))
    plt, fig = _figure(summaries, peak_gflops)
    try:
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)
    return len(summaries)


# ---------------------------------------------------------------------------- HTML

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.7em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f3f3f3; }
.meta { color: #666; font-size: 0.85em; }
code { background: #f6f6f6; padding: 0 0.2em; }
img { max-width: 100%; }
"""


def _html_table(rows: Sequence[Sequence], numeric: Sequence[int] = ()) -> str:
    head, *body = rows
    out = ["<table>", "<tr>" + "".join(f"<th>{html.escape(str(c))}</th>" for c in head) + "</tr>"]
    for r in body:
        cells = "".join(f'<td class="num">{html.escape(str(c))}</td>' if k in numeric
                        else f"<td>{html.escape(str(c))}</td>" for k, c in enumerate(r))
        out.append(f"<tr>{cells}</tr>")
    out.append("</table>")
    return "\n".join(out)


def _workload_text(s: WorkloadSummary) -> str:
    """The lines under a workload's heading: its counts, its best and default figures, its key."""
    stats = [f"{s.trials} trials", f"{s.errors} errors"]
    if s.remeasured:
        stats.insert(1, f"{s.remeasured} re-measurements of the best")
    if s.error_kinds:
        stats[-1] += " (" + ", ".join(f"{k}: {n}" for k, n in sorted(s.error_kinds.items())) + ")"
    if s.best_cost is not None:
        rate = f", {s.best_gflops:.1f} GFLOPS" if s.best_gflops is not None else ""
        stats.append(f"best {s.best_cost * 1e3:.4g} ms{rate} (median of {s.best_measurements} "
                     "measurements)")
    if s.default_cost is not None:
        rate = gflops(s.flop, s.default_cost)
        rate_text = f", {rate:.1f} GFLOPS" if rate is not None else ""
        stats.append(f"default config {s.default_cost * 1e3:.4g} ms{rate_text} (median of "
                     f"{s.default_measurements} measurements)")
    return (f'<p class="meta">{html.escape("; ".join(stats))}. Workload key '
            f"<code>{html.escape(s.key)}</code>.</p>")


def _workload_section(log, s: WorkloadSummary, peak_gflops: float | None) -> tuple[str, str, list]:
    """The heading, text and plotly figures of one workload (see :mod:`autotune.report_html`)."""
    from autotune import report_html as R

    heading = f'<h2 id="w-{s.key[:12]}">{html.escape(s.label)} on {html.escape(s.target_label)}</h2>'
    parts = [_workload_text(s)]
    if s.best_config:
        rows = [("knob", "chosen value (the winner)"), *[(k, repr(v)) for k, v in s.best_config.items()]]
        parts.append(_html_table(rows))
    few = s.trials <= R.INTERACTIVE_TRIALS
    # a long history is drawn from the downsampled curve; its first records only are read
    records = log.records(s.key, limit=None if few else R.INTERACTIVE_TRIALS)
    if not few:
        parts.append(f'<p class="meta">{s.trials} trials: the history shows the downsampled curve (no '
                     f"per-trial hover); importance and timeline read the first {R.INTERACTIVE_TRIALS} "
                     "records.</p>")
    figures = [R.history_figure(s, records if few else None, peak_gflops)]
    importance = R.knob_importance(records)
    if importance:
        figures.append(R.importance_figure(s, importance))
    else:
        parts.append('<p class="meta">Knob importance needs two successful trials and a knob that '
                     "took two values.</p>")
    if any(r.run_time is not None for r in records):
        figures.append(R.timeline_figure(s, records))
    return heading, "\n".join(parts), figures


def write_html(log, path, match: str | None = None, title: str = "Tuning report",
               peak_gflops: float | None = None) -> int:
    """Write an interactive, self-contained HTML page (plotly, its JavaScript embedded: it
    works offline): the summary table, then per workload its figures and best config, as
    :mod:`autotune.report_html` describes: the optimisation history (hover shows each trial's
    config, cost and error), knob importance and a timeline of the workers. ``peak_gflops``
    (a measured FMA peak or roofline) is marked on the histories when given. Returns the
    number of workloads."""
    from autotune import report_html as R

    summaries = _with_curves(log, summarize(log, match))
    runs = log.runs()
    when = time.strftime("%Y-%m-%d %H:%M:%S")
    intro = (f'<p class="meta">Tuning log <code>{html.escape(log.where)}</code>: {len(summaries)} '
             f"workloads, {sum(s.trials for s in summaries)} trials, {len(runs)} runs. Generated {when}. "
             "Best times are medians over every measurement of the best config (the one "
             "<code>apply_history_best</code> builds): the figure the plots draw as "
             "<em>chosen config</em>; single trials may lie above it by luck.</p>")
    if stale := stale_figures(summaries):
        intro += f"<p>{html.escape(stale)}.</p>"
    if not summaries:
        intro += "<p>The log holds no records yet.</p>"
    tail = ""
    if runs:
        rows = [("run", "tuner", "started", "status", "last heartbeat", "options")]
        for r in runs:
            opts = ", ".join(f"{k}={v}" for k, v in sorted(r.options.items()))
            rows.append((r.run_id[:12], r.tuner, _when(r.started), r.status, _when(r.heartbeat), opts))
        tail = "\n".join(['<h2 id="runs">Runs</h2>',
                          '<p class="meta">A run is <em>dead</em> when it never ended and its heartbeat '
                          "stopped: its process was killed or its machine lost.</p>", _html_table(rows)])
    sections = [_workload_section(log, s, peak_gflops) for s in summaries]
    page = R.page(title, intro, _html_table(summary_table(summaries), numeric=(2, 3, 4, 5)), sections,
                  tail, _CSS)
    Path(path).write_text(page, encoding="utf-8")
    return len(summaries)
