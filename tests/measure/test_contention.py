"""Timing beside other work: what the CPU accounting says of it, how the run worker times again,
and how the tuner keeps its own search off the cores while a candidate is timed."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time

import pytest

import autotune
from measure import LocalBuilder, LocalRunner, MeasureInput, MeasureOptions, MeasureSession
from measure.contention import BUSY_SHARE, CpuSample
from measure.gate import CoreGate

linux_only = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads Linux's /proc/stat")


def test_others_busy_is_what_others_took_beyond_the_cores_left_free():
    before = CpuSample(wall=10.0, busy=100.0, own=5.0, cpus=2)
    later = CpuSample(wall=11.0, busy=102.0, own=5.6, cpus=2)  # 2 s busy, 0.6 of them ours
    assert later.wall - before.wall == 1.0
    assert before.others_busy(later, threads=2) == pytest.approx(1.4)  # no core left free
    assert before.others_busy(later, threads=1) == pytest.approx(0.4)  # one core was free for them
    assert before.others_busy(CpuSample(11.0, 101.0, 6.0, 2), threads=2) == 0.0  # ours alone
    assert before.others_busy(CpuSample(10.05, 101.0, 5.0, 2), threads=2) == 0.0  # too short to tell
    assert CpuSample(10.0, None, 5.0, 2).others_busy(CpuSample(11.0, None, 6.0, 2), threads=2) == 0.0


def _hog(seconds: float) -> subprocess.Popen:
    """A process spinning on one of this process's CPUs for ``seconds``."""
    cpu = min(os.sched_getaffinity(0))
    code = (f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\n"
            f"end = time.time() + {seconds}\nwhile time.time() < end: pass")
    return subprocess.Popen([sys.executable, "-c", code])


@linux_only
def test_a_process_spinning_on_our_cpus_is_seen_busy():
    hog = _hog(3.0)
    try:
        time.sleep(0.3)  # it has started spinning
        before = CpuSample.now()
        time.sleep(0.5)
        busy = before.others_busy(CpuSample.now(), threads=len(os.sched_getaffinity(0)))
    finally:
        hog.kill()
        hog.wait()
    assert busy > 0.6  # one core's worth, less the accounting's 10 ms ticks


def test_a_held_gate_keeps_timing_waiting_and_waits_for_timing():
    gate = CoreGate()
    gate.acquire_timing()
    held = threading.Event()

    def work():
        gate.acquire_build()  # waits: a candidate is being timed
        held.set()

    worker = threading.Thread(target=work)
    worker.start()
    assert not held.wait(0.2)
    gate.release_timing()
    assert held.wait(5)
    gate.request_timing()
    assert not gate.try_timing()  # the work holds the cores
    gate.build_done()
    assert gate.try_timing()
    gate.release_timing()
    worker.join()


def test_no_candidate_is_timed_while_the_tuner_holds_the_cores(matmul_task):
    options = MeasureOptions(LocalBuilder(n_parallel=1), LocalRunner(number=2, repeat=1, min_repeat_ms=5))
    with options, MeasureSession(options) as session:
        if not options._plan():
            pytest.skip("builds and timing have cores of their own here (AUTOTUNE_NUM_THREADS < CPUs)")
        session.submit([MeasureInput(matmul_task, matmul_task.config_space.get(0))])
        with session.holding_cores():  # before the candidate is built: its timing must wait
            time.sleep(2.0)
            released = time.time()
        (_, result), = session.results()
    assert result.error_kind is None and result.timestamp > released


@linux_only
def test_tuning_beside_a_busy_process_says_so(matmul_task, tmp_path, caplog):
    hog = _hog(60.0)
    try:
        with caplog.at_level(logging.WARNING, logger="autotune.tuning"):
            result = autotune.tune(matmul_task, trials=3, tuner="grid", db=str(tmp_path / "log.db"),
                                   progress=False, remeasure=False)
    finally:
        hog.kill()
        hog.wait()
    assert all(t.result.busy > BUSY_SHARE for t in result.history)
    assert "other work on the machine took" in caplog.text and "3 results were timed beside" in caplog.text
