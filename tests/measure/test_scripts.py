"""Tuning from a user's script as written: at the top level, without an
``if __name__ == "__main__":`` guard, as a file, as ``python -c`` and from stdin; and
measurement workers that never outlive the tuner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import children_running

import db
from search_spaces import create_task

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH")) if p)}

# What a new user writes: everything at the top level of the script.
TUNE_MATMUL = """
import autotune
task = autotune.create_task("matmul", (32, 32, 32, "float32"), target="llvm")
result = autotune.tune(task, trials=4, tuner="random", db={db!r}, progress=False)
print("best", result.best_cost)
"""

TUNE_MAIN_TEMPLATE = """
import numpy as np
import autotune
from compiler import te

def reference(n, rng=None):
    a = rng.standard_normal(n).astype("float32")
    return [a], [a * 3.0]

@autotune.template("script_scale", reference=reference)
def script_scale(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotune.get_config()
    cfg.define_split("x", n, num_outputs=3)
    cfg["x"].apply(s, B, B.op.axis[0])
    return s, [A, B]

task = autotune.create_task("script_scale", (256,), target="llvm")
result = autotune.tune(task, trials=4, tuner="random", db={db!r}, progress=False)
print("best", result.best_cost)
"""

# The same template with the xgb tuner, its features sent to worker processes from the start;
# the count of features computed in the script's own process is printed.
TUNE_MAIN_TEMPLATE_XGB = TUNE_MAIN_TEMPLATE.replace(
    'result = autotune.tune(task, trials=4, tuner="random", db={db!r}, progress=False)', """
from autotune.tuner import features as F
from autotune.tuner.xgb_tuner import XGBTuner
F.PARALLEL_AFTER_S = F.PARALLEL_MIN_S = 0.0
here = []
compute = F.config_features
def counted(task, config, kind):
    if kind != "knob":  # lowered features only: the knob surrogate's cost nothing, made here
        here.append(1)
    return compute(task, config, kind)
F.config_features = counted
tuner = XGBTuner(task, seed=0, min_train=4, feature_workers=2)
result = autotune.tune(task, trials=12, tuner=tuner, db={db!r}, progress=False, batch_size=4)
print("features", len(tuner.model.features), "here", len(here))""")


def _run_script(code: str, how: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``code`` as a file, with ``-c`` or from stdin, in ``tmp_path``."""
    if how == "file":
        # From a directory with a module of the user that is called like ours: the workers
        # must not import it (the script's own directory is elsewhere).
        (tmp_path / "measure.py").write_text("raise SystemExit('the user module measure.py was imported')\n")
        script = tmp_path / "scripts" / "user_script.py"
        script.parent.mkdir()
        script.write_text(code)
        args, stdin = [str(script)], None
    elif how == "-c":
        args, stdin = ["-c", code], None
    else:
        args, stdin = ["-"], code
    return subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env=ENV)


def _records(path: Path, template: str) -> list:
    with db.open(str(path)) as log:
        return [r for r in log.records() if r.template == template]


@pytest.mark.parametrize("how", ["file", pytest.param("-c", marks=pytest.mark.slow),
                                 pytest.param("stdin", marks=pytest.mark.slow)])
def test_unguarded_script_tunes(how, tmp_path):
    path = tmp_path / "t.db"
    p = _run_script(TUNE_MATMUL.format(db=str(path)), how, tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "best" in p.stdout
    records = _records(path, "matmul")
    assert len(records) >= 4
    for r in records:
        assert r.error_kind is None, r.error_msg
        assert r.costs and all(c > 0 for c in r.costs)
    task = create_task("matmul", (32, 32, 32, "float32"), "llvm")
    assert {r.workload_key for r in records} == {task.workload_key}


def test_template_defined_in_an_unguarded_main_travels_by_value(tmp_path):
    path = tmp_path / "t.db"
    p = _run_script(TUNE_MAIN_TEMPLATE.format(db=str(path)), "file", tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    records = _records(path, "script_scale")
    assert len(records) >= 4
    assert all(r.error_kind is None and r.costs for r in records), [r.error_msg for r in records]
    assert len({r.config_index for r in records}) > 1


def test_unguarded_script_computes_features_in_workers(tmp_path):
    p = _run_script(TUNE_MAIN_TEMPLATE_XGB.format(db=str(tmp_path / "t.db")), "file", tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "feature worker" not in p.stderr, p.stderr[-3000:]  # none failed, all could start
    line = next(x for x in p.stdout.splitlines() if x.startswith("features"))
    cached, here = int(line.split()[1]), int(line.split()[3])
    assert cached >= 8 and here < cached // 2, line  # the workers computed most of the features


# ---------------------------------------------------------------------------- no worker left behind

# Starts a build and a run worker, then leaves the run worker hung in a candidate.
HANG = """
import threading
from measure import LocalBuilder, LocalRunner, MeasureOptions, measure_batch
from measure_faults import inputs_for, register_faulty

task = register_faulty("orphan_faulty")
options = MeasureOptions(LocalBuilder(n_parallel=1, timeout=60), LocalRunner(number=1, repeat=1, timeout=600))
print(measure_batch(inputs_for(task, ["none"]), options)[0].error_kind, flush=True)
measure_batch(inputs_for(task, ["hang"]), options)
"""


def _workers_of(pid: int) -> list[int]:
    """Process ids of the measurement workers whose parent is ``pid``."""
    return children_running(pid, "measure.worker_main")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_for_hang(pids: list[int], within: float) -> None:
    """Wait until one of ``pids`` sleeps in the hung candidate (not in a read of its pipe);
    kernels that hide where processes wait get no wait."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        where = []
        for pid in pids:
            try:
                where.append(Path(f"/proc/{pid}/wchan").read_text())
            except OSError:
                where.append("")
        if any("sleep" in w for w in where) or not any(w.strip("0") for w in where):
            return
        time.sleep(0.2)
    raise AssertionError(f"no worker of {pids} runs the hung candidate: {where}")


def _wait_until_gone(pids: list[int], within: float) -> list[int]:
    end = time.monotonic() + within
    while time.monotonic() < end:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
@pytest.mark.parametrize("kill", ["parent", "process group"])
def test_workers_end_with_the_tuner(kill, tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HANG)], stdout=subprocess.PIPE, text=True,
                            cwd=tmp_path, env=ENV, start_new_session=True)
    workers: list[int] = []
    try:
        assert proc.stdout.readline().strip() == "None"
        workers = _workers_of(proc.pid)
        assert len(workers) == 2, workers  # one build worker, one run worker
        _wait_for_hang(workers, within=120)  # the run worker is busy: it does not read its pipe
        if kill == "parent":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        # Generous: the workers notice within a second or two, however loaded the machine.
        assert _wait_until_gone(workers, within=60) == []
    finally:
        for pid in [proc.pid, *workers]:  # whatever the outcome, leave nothing behind
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
