"""End to end: ``tune()`` and the ``autotune`` command on real logs, real workers and real
processes: a PostgreSQL log from tuning to a built ``.so``; a tuning process ended with
SIGTERM (recorded as interrupted), and one killed with SIGKILL (seen as dead) and run again;
three tuning processes sharing one SQLite file; and a CUDA task on a machine that cannot run
CUDA, refused before any work.

Runs of ``autotune tune`` record every trial and then, at the end, measure the best few
configs again (``FINAL_ROUNDS`` times each of the ``FINAL_TOP_K`` best, in up to
``FINAL_PASSES`` passes while configs not yet re-measured rise into them): in the log these
are the run's records of kind ``"remeasure"``, after its ``--trials`` search trials.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers import assert_written, poisoned
from sqlalchemy.engine import make_url

import autotune
import db
from autotune.errors import AutotuneError
from autotune.tuning import FINAL_DUELS, FINAL_PASSES, FINAL_ROUNDS, FINAL_TOP_K
from compiler.runtime.device import device_memory, register_device_type
from measure import Builder, LocalBuilder, LocalRunner, MeasureOptions

ARGS = "32,32,32,float32"
TASK_ARGS = (32, 32, 32, "float32")
# Generous limits for a loaded machine: they only stop a hung test, they time nothing.
CLI_TIMEOUT_S = 600
POLL_S = 0.2
# Tuning processes whose death a test waits to see beat often: a dead run shows within seconds.
HEARTBEAT_ENV = {**os.environ, db.HEARTBEAT_ENV: "0.2"}


@pytest.fixture
def task():
    return autotune.create_task("matmul", TASK_ARGS, "llvm")


def _autotune(*args: str, cwd: Path, timeout: float = CLI_TIMEOUT_S,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the ``autotune`` command line in a fresh interpreter."""
    return subprocess.run([sys.executable, "-m", "autotune", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)


def _tune_command(log: str, trials: int, seed: int) -> list[str]:
    return [sys.executable, "-m", "autotune", "tune", "matmul", "--args", ARGS, "--tuner", "random",
            "--seed", str(seed), "--trials", str(trials), "--batch-size", "2", "--db", log]


def _runs_and_records(log_path, task) -> tuple[dict, dict]:
    """The log's runs by id, and each run's records of ``task`` in the order they were stored."""
    with db.open(log_path) as log:
        runs = {r.run_id: r for r in log.runs()}
        per_run: dict[str, list] = {rid: [] for rid in runs}
        for r in log.records(task):
            per_run[r.run_id].append(r)
    return runs, per_run


def _check_run(records: list, trials: int, earlier: set, others: set = frozenset()) -> None:
    """A finished run: ``trials`` search records of distinct configs, none of them among the
    ``earlier`` configs (measured before it started), then the re-measurements of at most
    FINAL_TOP_K configs per pass (FINAL_PASSES at most) and of the default config, measured
    before (by it, earlier, or by ``others`` running alongside), FINAL_ROUNDS times each pass
    they are in (the winner and the default in up to FINAL_DUELS more)."""
    search, final = records[:trials], records[trials:]
    assert {r.kind for r in search} == {db.TRIAL} and {r.kind for r in final} == {db.REMEASURE}
    keys = [db.canonical_json(r.config) for r in search]
    assert len(search) == trials
    assert len(set(keys)) == trials, "a config was measured twice in one run"
    assert not set(keys) & earlier, "a config of an earlier run was measured again"
    again = Counter(db.canonical_json(r.config) for r in final)
    passes = {FINAL_ROUNDS * k for k in range(1, FINAL_PASSES + FINAL_DUELS + 1)}
    assert 1 <= len(again) <= FINAL_TOP_K * FINAL_PASSES + 1 and set(again.values()) <= passes, again
    assert set(again) <= set(keys) | earlier | others


# ---------------------------------------------------------------------------- PostgreSQL


def test_tune_best_and_build_on_postgres(task, postgres_url, tmp_path, rng):
    options = MeasureOptions(LocalBuilder(), LocalRunner(number=2, repeat=2, min_repeat_ms=1))
    with options:
        result = autotune.tune(task, trials=6, tuner="random", db=postgres_url, measure_option=options,
                               batch_size=3, seed=0, progress=False)
    assert result.trials == 6 and result.best_config is not None
    with db.open(postgres_url) as log:
        assert log.backend == "postgresql"
        runs = log.runs()
        records = log.records(task)
    assert [r.status for r in runs] == ["budget"]
    assert all(r.run_id == runs[0].run_id for r in records)
    _check_run(records, 6, set())
    assert {t.config.index for t in result.history} == {r.config_index for r in records[:6]}

    best = _autotune("best", "--db", postgres_url, "--configs", cwd=tmp_path)
    assert best.returncode == 0, best.stderr
    row = next(line for line in best.stdout.splitlines() if line.startswith("matmul(32,32,32,float32)"))
    assert row.split()[-2:] == ["6", "0"], row  # 6 trials, no error: the re-measurements are no trials
    logged = autotune.apply_history_best(postgres_url).lookup(task.target, task)
    assert logged is not None
    printed = best.stdout.split("matmul(32,32,32,float32) on llvm", 1)[1]
    for knob, value in logged.knob_values().items():
        assert any(line.split(None, 1) == [knob, repr(value)] for line in printed.splitlines()), \
            (knob, value, printed)

    so = tmp_path / "mm.so"
    built = _autotune("build", "matmul", "--args", ARGS, "--db", postgres_url, "-o", str(so), cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert "with the best config of" in built.stdout and "untuned default" not in built.stdout, built.stdout
    password = f":{make_url(postgres_url).password}@"
    assert password not in best.stdout + best.stderr + built.stdout + built.stderr
    import compiler

    f = compiler.runtime.load_module(str(so))
    a = rng.standard_normal((32, 32)).astype("float32")
    b = rng.standard_normal((32, 32)).astype("float32")
    c = poisoned((32, 32), "float32")
    f(a, b, c)
    assert_written(c, a @ b, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------- SIGKILL and rerun


def _proc_table() -> dict[int, tuple]:
    """Every process: pid -> (ppid, session id, state, start time), from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        table[int(entry)] = (int(fields[1]), int(fields[3]), fields[0], fields[19])
    return table


def _family(root: int) -> dict[int, str]:
    """The processes of ``root``'s session and its descendants: pid -> start time."""
    table = _proc_table()
    found = {pid for pid, (_, sid, _, _) in table.items() if sid == root} | {root}
    grew = True
    while grew:
        more = {pid for pid, (ppid, _, _, _) in table.items() if ppid in found} - found
        found |= more
        grew = bool(more)
    return {pid: table[pid][3] for pid in found if pid in table}


def _alive(family: dict[int, str], root: int) -> list[int]:
    """Those of ``family`` still running (not ended, not a zombie), and any process still in
    ``root``'s session."""
    table = _proc_table()
    return sorted(pid for pid, (_, sid, state, start) in table.items() if state != "Z" and (
        family.get(pid) == start or sid == root))


def _wait_for_records(log_path: Path, task, proc: subprocess.Popen, count: int, out: Path) -> None:
    deadline = time.monotonic() + CLI_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"autotune tune ended early:\n{out.read_text()}"
        if log_path.exists():
            with db.open(log_path) as log:
                if log.count(task) >= count:
                    return
        time.sleep(POLL_S)
    pytest.fail(f"autotune tune wrote fewer than {count} records:\n{out.read_text()}")


def _wait_until_gone(family: dict[int, str], root: int) -> None:
    deadline = time.monotonic() + 60
    while _alive(family, root) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    assert _alive(family, root) == [], "processes of the autotune tune that ended are still running"


def _wait_for_status(log_path: Path, status: str) -> list:
    """The log's runs, once one of them reads as ``status`` (polled: it may take a few heartbeats)."""
    deadline = time.monotonic() + CLI_TIMEOUT_S
    while time.monotonic() < deadline:
        with db.open(log_path) as log:
            runs = log.runs()
        if any(r.status == status for r in runs):
            return runs
        time.sleep(POLL_S)
    pytest.fail(f"no run reads as {status!r}: {[r.status for r in runs]}")


def _start_long_tuning(log_path: Path, out: Path, seed: int) -> subprocess.Popen:
    """`autotune tune` with a budget it will not finish, in a session (process group) of its own,
    its output in ``out``, writing heartbeats often."""
    with open(out, "w") as sink:
        return subprocess.Popen(_tune_command(str(log_path), 1000, seed=seed), cwd=log_path.parent,
                                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
                                env=HEARTBEAT_ENV)


def _family_once_measuring(log_path: Path, task, proc: subprocess.Popen, out: Path) -> dict[int, str]:
    """The tuning process and its workers, once it has written three records."""
    _wait_for_records(log_path, task, proc, 3, out)
    family = _family(proc.pid)
    assert len(family) > 1, "autotune tune measured without worker processes?"
    return family


@pytest.mark.slow
def test_sigterm_ends_a_run_as_ctrl_c_does(task, tmp_path):
    log_path = tmp_path / "t.db"
    out = tmp_path / "terminated.out"
    proc = _start_long_tuning(log_path, out, seed=4)
    try:
        family = _family_once_measuring(log_path, task, proc, out)
        proc.send_signal(signal.SIGTERM)  # to the tuning process alone, as `kill PID` does
        code = proc.wait(timeout=CLI_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = out.read_text()
    assert code == 130, text
    assert "stopped: interrupted" in text and "Traceback" not in text, text
    _wait_until_gone(family, proc.pid)  # its workers were stopped
    runs, per_run = _runs_and_records(log_path, task)
    (run,) = runs.values()
    assert run.status == "interrupted" and run.ended is not None
    records = per_run[run.run_id]
    keys = [db.canonical_json(r.config) for r in records]
    assert len(records) >= 3 and len(set(keys)) == len(keys)  # every finished trial, no re-measurement


@pytest.mark.slow
def test_sigkill_then_rerun_loses_nothing_and_repeats_nothing(task, tmp_path):
    log_path = tmp_path / "t.db"
    out = tmp_path / "killed.out"
    proc = _start_long_tuning(log_path, out, seed=3)
    try:
        family = _family_once_measuring(log_path, task, proc, out)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    _wait_until_gone(family, proc.pid)
    # its heartbeat stopped: the run that never ended reads as dead, in the log and in `autotune best`
    (killed_run,) = _wait_for_status(log_path, "dead")
    best = _autotune("best", "--db", str(log_path), cwd=tmp_path)
    assert best.returncode == 0, best.stderr
    assert "runs: 1 (1 dead)" in best.stdout and f"dead     {killed_run.run_id[:12]}" in best.stdout, \
        best.stdout

    with db.open(log_path) as log:
        before = {r.uid: r for r in log.records(task)}
    assert len(before) >= 3

    rerun = _autotune(*_tune_command(str(log_path), 4, seed=3)[3:], cwd=tmp_path, env=HEARTBEAT_ENV)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "trials    4 this run" in rerun.stdout, rerun.stdout

    with db.open(log_path) as log:
        after = {r.uid: r for r in log.records(task)}
    assert set(before) <= set(after), "records present before the kill are gone"
    runs, per_run = _runs_and_records(log_path, task)
    assert sorted(r.status for r in runs.values()) == ["budget", "dead"]  # the killed one never ended
    killed = next(rid for rid, r in runs.items() if r.status == "dead")
    finished = next(rid for rid, r in runs.items() if r.status == "budget")
    assert {r.uid for r in per_run[killed]} == set(before)
    killed_configs = [db.canonical_json(r.config) for r in per_run[killed]]
    assert len(set(killed_configs)) == len(killed_configs), "the killed run measured a config twice"
    _check_run(per_run[finished], 4, set(killed_configs))


# ---------------------------------------------------------------------------- concurrent processes


@pytest.mark.slow
def test_three_tuning_processes_share_one_sqlite_log(task, tmp_path):
    log_path = tmp_path / "shared.db"  # not created yet: the three also race to create it
    procs = []
    for seed in (1, 2, 3):
        procs.append(subprocess.Popen(_tune_command(str(log_path), 4, seed), cwd=tmp_path, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outputs = [p.communicate(timeout=CLI_TIMEOUT_S) for p in procs]
    for p, (stdout, stderr) in zip(procs, outputs):
        assert p.returncode == 0, stdout + stderr
        assert "locked" not in stdout + stderr
        assert "trials    4 this run, 0 errors" in stdout, stdout

    runs, per_run = _runs_and_records(log_path, task)
    assert len(runs) == 3 and all(r.status == "budget" for r in runs.values())
    with db.open(log_path) as log:
        total = log.count()
        assert log.count(errors=True) == 0
    assert total == sum(len(records) for records in per_run.values())
    everything = {db.canonical_json(r.config) for rs in per_run.values() for r in rs}
    for records in per_run.values():
        # each process: its 4 trials, then its re-measurements, among which may be configs
        # that the others measured meanwhile (and may have measured too: they ran at once)
        _check_run(records, 4, set(), everything)


# ---------------------------------------------------------------------------- CUDA without a GPU


class _NoBuild(Builder):
    """A builder that fails the test if anything reaches it."""

    def build(self, inputs, gates):
        raise AssertionError("tuning reached the builder")


@pytest.fixture
def no_gpu():
    """The CUDA device type says that no GPU can run code here, whatever this machine has."""
    memory = device_memory("cuda")
    no_gpu = dataclasses.replace(memory, unavailable_reason=lambda: "no GPU in this test")
    register_device_type("cuda", no_gpu)
    yield
    register_device_type("cuda", memory)


def test_cuda_tuning_without_a_gpu_stops_before_any_work(tmp_path, no_gpu):
    task = autotune.create_task("matmul", TASK_ARGS, "cuda")
    for options in (MeasureOptions(_NoBuild(), LocalRunner()), None):
        with pytest.raises(AutotuneError, match="CUDA code cannot run here: no GPU in this test"):
            autotune.tune(task, trials=4, tuner="random", db=tmp_path / "c.db", measure_option=options,
                          progress=False)
        assert not (tmp_path / "c.db").exists()  # not even a run was recorded
    with pytest.raises(AutotuneError, match="no GPU in this test"):
        autotune.tune_tasks([autotune.create_task("matmul", TASK_ARGS, "llvm"), task], trials=4,
                            db=tmp_path / "c.db", measure_option=MeasureOptions(_NoBuild(), LocalRunner()),
                            progress=False)
    assert not (tmp_path / "c.db").exists()


def test_cuda_tuning_on_a_ray_cluster_is_not_refused_here(tmp_path, no_gpu):
    """The cluster may have GPUs: the runner, not this machine, says whether CUDA runs."""
    from measure.ray import RayRunner

    class NoRayRunner(RayRunner):
        """A Ray runner that starts no Ray: reaching it is all this test asks."""

        def run(self, jobs, gates):
            raise AssertionError("tuning reached the runner")

    task = autotune.create_task("matmul", TASK_ARGS, "cuda")
    with MeasureOptions(_NoBuild(), NoRayRunner(gpu=True)) as options, \
            pytest.raises(AssertionError, match="tuning reached the (builder|runner)"):
        autotune.tune(task, trials=4, tuner="random", db=tmp_path / "c.db", measure_option=options,
                      progress=False)


def test_autotune_tune_cuda_without_a_gpu_fails_at_once(tmp_path):
    from compiler.runtime.cuda import unavailable_reason

    reason = unavailable_reason()
    if reason is None:
        pytest.skip("this machine can run CUDA code")
    proc = _autotune("tune", "matmul", "--args", ARGS, "--target", "cuda", "--trials", "4",
                     "--db", str(tmp_path / "c.db"), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "CUDA code cannot run here" in proc.stderr and reason in proc.stderr, proc.stderr
    assert "Tuning" not in proc.stdout, "the header printed before the refusal"
    assert not (tmp_path / "c.db").exists(), "the log was opened before the refusal"

