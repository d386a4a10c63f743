"""A whole model tuned on a Ray cluster started as users start it (``ray start --head`` plus a
second node: the ``cluster`` fixture of :mod:`test_ray_cluster`): the model's tasks in flight
together over every node, one timing at a time on each node, every trial in one log, and a node
killed mid-run.

The tuner is ``autotune tune-model --cluster auto``, run in a process of its own through a small
wrapper that notes in a file each candidate handed to the measure session and each that comes
back (when, and of which task): the tuner's own view of what is in flight. The log's records say
where each candidate was timed (``device``: the Ray node) and when (``timestamp``, ``run_time``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

import db
from tests.conftest import POSTGRES_ENV, in_ci
from tests.measure.test_ray_cluster import _WAIT_S, _kill, _processes, cluster  # noqa: F401 - the fixture

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds Ray's processes in /proc"),
    pytest.mark.xdist_group("ray"),  # one module of Ray tests at a time (``--dist loadgroup``)
]

onnx = pytest.importorskip("onnx")

# ``python watched_cli.py EVENTS ARGS...`` runs ``autotune ARGS...``, MeasureSession noting in
# EVENTS, one JSON line per call, [time, "submit" or "done", the candidates' workload names].
_WATCHED_CLI = """
import json, sys, time

from autotune.cli import main
from measure import MeasureSession

EVENTS = open(sys.argv[1], "a")
submit, results = MeasureSession.submit, MeasureSession.results


def note(kind, inputs):
    EVENTS.write(json.dumps([time.time(), kind, [i.task.workload_name for i in inputs]]) + "\\n")
    EVENTS.flush()


def watched_submit(self, inputs):
    inputs = list(inputs)
    note("submit", inputs)
    return submit(self, inputs)


def watched_results(self, timeout=None):
    done = results(self, timeout)
    note("done", [inp for inp, _ in done])
    return done


MeasureSession.submit, MeasureSession.results = watched_submit, watched_results
sys.exit(main(sys.argv[2:]))
"""

@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A directory holding tiny.onnx (conv-relu, dense-relu, dense: three tuning tasks, of 4, 16
    and 6 configs) and watched_cli.py."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {"w": rng.uniform(-0.5, 0.5, (6, 3, 3, 3)), "fc1": rng.uniform(-0.5, 0.5, (64, 6 * 6 * 6)),
               "fc2": rng.uniform(-0.5, 0.5, (4, 64))}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("Gemm", ["f", "fc1"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["hr"]),
             helper.make_node("Gemm", ["hr", "fc2"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "tiny",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, 6, 6])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(a.astype("float32"), name)
                                           for name, a in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    d = tmp_path_factory.mktemp("model")
    onnx.save(model, d / "tiny.onnx")
    (d / "watched_cli.py").write_text(textwrap.dedent(_WATCHED_CLI))
    return d


@pytest.fixture
def log_url(request, tmp_path) -> str:
    """The one log: PostgreSQL where the suite has one (always in CI), else an SQLite file."""
    if os.environ.get(POSTGRES_ENV) or in_ci():
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'model.db'}"


def _tune_model(model_dir: Path, events: Path, url: str, trials: int, *more: str) -> list[str]:
    return [str(model_dir / "watched_cli.py"), str(events), "tune-model", str(model_dir / "tiny.onnx"),
            "--shape", "x=1,3,6,6", "--cluster", "auto", "--db", url, "--trials", str(trials),
            "--tuner", "random", "--seed", "0", "--no-progress", "--no-deployed", *more]


def _events(path: Path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _most_tasks_in_flight(events: list) -> int:
    """The most tasks that had candidates in flight at one moment; every candidate came back."""
    in_flight: Counter = Counter()
    most = 0
    for _, kind, names in events:
        for name in names:
            in_flight[name] += 1 if kind == "submit" else -1
        most = max(most, sum(1 for n in in_flight.values() if n > 0))
    assert all(n == 0 for n in in_flight.values()), in_flight
    return most


def _records(url: str) -> list:
    with db.open(url) as log:
        return log.records()


def _check_trials(trials: list, expected: int) -> None:
    """``expected`` trials in the log, no config of a task among them twice."""
    assert len(trials) == expected, Counter(r.workload_key for r in trials)
    twice = [key for key, n in Counter((r.workload_key, r.config_index) for r in trials).items() if n > 1]
    assert not twice, twice


def _overlapping_timings(records: list) -> list:
    """Pairs of timings on one node whose spans overlap.

    A record's ``timestamp`` is when the tuner received its result, its ``run_time`` how long the
    node's run worker took to check and time it: ``[timestamp - run_time, timestamp]`` starts no
    earlier than the timing did. The runner gives a node its next candidate only once it has the
    last one's result, so timings made one after the other never seem to overlap, and two made
    at once on one node (most of a timing's span) do."""
    spans = defaultdict(list)
    for r in records:
        if r.run_time:
            spans[r.device].append((r.timestamp - r.run_time, r.timestamp, r.template, r.config_index))
    found = []
    for node, node_spans in spans.items():
        node_spans.sort()
        found += [(node, a, b) for a, b in zip(node_spans, node_spans[1:]) if b[0] < a[1]]
    return found


def _failed(records: list) -> list:
    return [(r.template, r.config_index, r.error_kind, r.error_msg[:300]) for r in records if r.error_kind]


def test_a_model_tunes_on_every_node_at_once_into_one_log(cluster, model_dir, tmp_path, log_url):  # noqa: F811
    events = tmp_path / "events.jsonl"
    # 4 trials per task: batches of 4 candidates, with 6 in flight (2 CPUs building, 2 nodes timing)
    p = cluster.run(_tune_model(model_dir, events, log_url, 4), tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "3 run 3 tuning tasks" in p.stdout and "12 trials in all" in p.stdout, p.stdout

    records = _records(log_url)
    trials = [r for r in records if r.kind == db.TRIAL]
    # Every trial is in the one log, each config of a task measured once as a trial, and works.
    _check_trials(trials, 12)
    assert len({r.workload_key for r in trials}) == 3, Counter(r.workload_key for r in trials)
    assert not _failed(records), _failed(records)
    # Both nodes timed candidates; candidates of several tasks were in flight at once.
    assert len({r.device for r in trials}) == 2, Counter(r.device for r in records)
    assert _most_tasks_in_flight(_events(events)) >= 2, _events(events)
    # One timing at a time on each node (the final re-measurements included).
    assert not _overlapping_timings(records)


def _node_id(marker: str) -> str:
    """The Ray node id of the node whose processes carry ``marker`` (its raylet's ``--node_id``)."""
    for pid in _processes(marker):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        for arg in args:
            if arg.startswith("--node_id="):
                return arg.split("=", 1)[1]
    raise AssertionError(f"no raylet of {marker} found")


def _building(marker: str) -> bool:
    """Whether a process of ``marker`` builds a candidate: Ray names a worker's process after the
    task it runs ("ray::_build"; "ray::_RunActor.run" when it times one, "ray::IDLE" between)."""
    for pid in _processes(marker):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if title.strip() == b"ray::_build":
            return True
    return False


def test_a_node_lost_mid_run_costs_only_its_candidates_in_flight(cluster, model_dir, tmp_path, log_url):  # noqa: F811
    cluster.start_node("victim", f"--address={cluster.address}")  # its own, so that others keep theirs
    victim = _node_id(f"{cluster.marker}-victim")
    events = tmp_path / "events.jsonl"
    events.touch()
    # 18 trials (of 26 configs) over 3 nodes; -v: the tuner says which candidates it lost where.
    command = [sys.executable, *_tune_model(model_dir, events, log_url, 6, "-v")]
    tuner = subprocess.Popen(command, cwd=tmp_path, env=cluster.env, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        # Kill the victim once the run is under way, while it builds a candidate.
        deadline = time.monotonic() + _WAIT_S
        building = False
        while time.monotonic() < deadline and tuner.poll() is None and not building:
            if sum(len(names) for _, kind, names in _events(events) if kind == "done") >= 3:
                building = _building(f"{cluster.marker}-victim")
            time.sleep(0.02)
        assert building, "the run ended before the victim built anything: " + tuner.communicate()[1][-3000:]
        _kill(f"{cluster.marker}-victim")
        out, err = tuner.communicate(timeout=600)
    finally:
        if tuner.poll() is None:
            tuner.kill()
            tuner.communicate()
    assert tuner.returncode == 0, out[-2000:] + err[-3000:]

    # The run finished its budget, every trial in the log, none twice.
    assert "18 trials in" in out, out
    records = _records(log_url)
    trials = [r for r in records if r.kind == db.TRIAL]
    _check_trials(trials, 18)
    # Only candidates in flight on the victim were lost (at most one build, on its one CPU, and one
    # timing), each retried on another node (or, lost there too, a worker-crash trial).
    lost = re.findall(r"(build|run) of candidate (\d+) lost (?:on node|with actor) (\w+)", err)
    assert all(node == victim for *_, node in lost), (victim, lost)
    assert len(lost) <= 2, lost
    assert all(r.error_kind == "worker_crash" for r in records if r.error_kind), _failed(records)
    assert len(_failed(trials)) <= len(lost), (_failed(trials), lost)
    # The tuner says so in one warning, naming the node: at once where a build was lost there (Ray
    # reports the node died), else once Ray's health checks drop it (some seconds later, which
    # may come after the end of this short run).
    warned = re.findall(r"autotune: warning: Ray node (\w+) lost \(", err)
    if any(what == "build" for what, *_ in lost):
        assert warned == [victim], (warned, victim, lost, err[-3000:])
    else:
        assert warned in ([], [victim]), (warned, victim, lost, err[-3000:])
    # And on each node, before and after, one timing at a time.
    assert not _overlapping_timings(records)
