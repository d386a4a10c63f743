"""LocalBuilder + LocalRunner with real worker processes: costs, and every kind of failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from measure_faults import costs_ok, inputs_for

from measure import (
    ErrorKind,
    LocalBuilder,
    LocalRunner,
    MeasureInput,
    MeasureOptions,
    measure_batch,
    measure_stream,
)
from measure.pool import TIMING_BINDING


def test_matmul_candidates_get_positive_costs(matmul_task, local_options):
    configs = matmul_task.config_space.sample(4, rng=11)
    results = measure_batch([MeasureInput(matmul_task, c) for c in configs], local_options)
    assert len(results) == 4
    for r in results:
        assert costs_ok(r), r
        assert len(r.costs) == 2 and r.build_time > 0 and r.run_time > 0 and r.timestamp > 0
        assert r.worker.endswith(tuple("0123456789")) and ":" in r.worker


def test_crash_hang_and_wrong_answer_leave_the_batch_intact(faulty_task, local_options):
    faults = ["none", "abort", "none", "hang", "wrong", "raise", "none"]
    results = measure_batch(inputs_for(faulty_task, faults), local_options)
    kinds = [r.error_kind for r in results]
    assert kinds == [None, ErrorKind.RUNTIME_ERROR, None, ErrorKind.RUN_TIMEOUT, ErrorKind.WRONG_ANSWER,
                     ErrorKind.INSTANTIATION_ERROR, None], [(r.error_kind, r.error_msg) for r in results]
    assert "SIGABRT" in results[1].error_msg
    assert "C:" in results[4].error_msg
    assert all(costs_ok(results[i]) for i in (0, 2, 6))
    assert all(r.costs == () for r in results if not r.ok)
    # The pool goes on after its run worker was killed twice.
    again = measure_batch(inputs_for(faulty_task, ["none"]), local_options)
    assert costs_ok(again[0])


def test_wrong_answer_against_the_default_config_without_a_reference(faulty_task_no_reference, local_options):
    results = measure_batch(inputs_for(faulty_task_no_reference, ["none", "wrong"]), local_options)
    assert costs_ok(results[0]), results[0]
    assert results[1].error_kind is ErrorKind.WRONG_ANSWER


def test_build_timeout_kills_the_build_and_the_pool_goes_on(faulty_task):
    with MeasureOptions(LocalBuilder(n_parallel=2, timeout=2),
                        LocalRunner(number=1, repeat=1, min_repeat_ms=1)) as options:
        results = measure_batch(inputs_for(faulty_task, ["slow_build", "none", "none"]), options)
    assert results[0].error_kind is ErrorKind.BUILD_TIMEOUT
    assert costs_ok(results[1]) and costs_ok(results[2])


def test_stream_yields_every_input_once(matmul_task, local_options):
    configs = matmul_task.config_space.sample(3, rng=12)
    inputs = [MeasureInput(matmul_task, c) for c in configs]
    seen = list(measure_stream(inputs, local_options))
    assert sorted(id(inp) for inp, _ in seen) == sorted(id(inp) for inp in inputs)
    assert all(costs_ok(r) for _, r in seen)


def test_prints_of_a_template_do_not_disturb_the_workers(local_options):
    # The workers' stdout is where their replies went once; a template that prints must not
    # corrupt them.
    import os

    from compiler import te
    from search_spaces import create_task, get_config, template

    def noisy(n):
        print("template output " * 1000)
        os.write(1, b"\x00\x00\x00\x10raw bytes on fd 1")
        cfg = get_config()
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
        s = te.create_schedule(B.op)
        cfg.define_split("x", n, num_outputs=2)
        cfg["x"].apply(s, B, B.op.axis[0])
        return s, [A, B]

    template("measure_noisy")(noisy)
    task = create_task("measure_noisy", (64,), "llvm")
    inputs = [MeasureInput(task, c) for c in task.config_space.sample(2, rng=1)]
    results = measure_batch(inputs, local_options)
    assert all(costs_ok(r) for r in results), [(r.error_kind, r.error_msg) for r in results]


_RUN_WORKER_THREADS = textwrap.dedent("""
    import json, os
    from measure import LocalBuilder, LocalRunner, MeasureInput, MeasureOptions, measure_batch
    from measure.local import usable_cpus
    from search_spaces import create_task
    task = create_task("matmul", (32, 32, 32, "float32"), "llvm")
    with MeasureOptions(LocalBuilder(n_parallel=1), LocalRunner(number=1, repeat=1)) as options:
        (result,) = measure_batch([MeasureInput(task, task.config_space.get(0))], options)
        pid = int(result.worker.rsplit(":", 1)[1])  # the run worker, its kernel's threads still up
        pairs = open(f"/proc/{pid}/environ").read().split("\\0")
        env = dict(kv.split("=", 1) for kv in pairs if "=" in kv)
        pinned = [sorted(os.sched_getaffinity(int(t))) for t in os.listdir(f"/proc/{pid}/task")]
    binding = [env.get("OMP_PROC_BIND"), env.get("OMP_PLACES")]
    print(json.dumps([usable_cpus(), *binding, pinned, result.error_msg]))
""")


def _run_worker_threads(tmp_path, **env_vars):
    env = {k: v for k, v in os.environ.items()
           if k not in ("AUTOTUNE_NUM_THREADS", "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES")}
    proc = subprocess.run([sys.executable, "-c", _RUN_WORKER_THREADS], capture_output=True, text=True,
                          timeout=300, env={**env, **env_vars}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_run_worker_binds_its_threads_one_to_each_cpu(tmp_path):
    # A pool thread woken after the worker idled between candidates would otherwise often share
    # the waking thread's CPU, and a kernel on every core then timed 3-4x slower.
    usable, bind, places, pinned, error = _run_worker_threads(tmp_path)
    assert error == ""
    assert (bind, places) == (TIMING_BINDING["OMP_PROC_BIND"], TIMING_BINDING["OMP_PLACES"])
    # The kernel's threads, bound; with one usable CPU every thread of the worker counts here.
    one_cpu = [cpus[0] for cpus in pinned if len(cpus) == 1]
    assert sorted(set(one_cpu)) == usable and len(one_cpu) >= len(usable)


def test_a_binding_of_the_user_s_own_is_left_to_the_run_worker(tmp_path):
    _, bind, places, _, error = _run_worker_threads(tmp_path, OMP_PROC_BIND="spread")
    assert error == "" and bind == "spread" and places is None


def test_workers_keep_every_cpu_after_openmp_bound_the_tuner(tmp_path):
    # With OMP_PROC_BIND=true an OpenMP runtime pins the initial thread to one CPU at its first
    # parallel region: here XGBoost's, as a learning tuner's model fitting does. Workers started
    # afterwards must not inherit that one CPU, nor count the machine's CPUs from it: the run
    # worker's threads (bound too, one per CPU) cover every CPU.
    script = textwrap.dedent("""
        import json, os
        import numpy as np
        before = sorted(os.sched_getaffinity(0))
        from measure import LocalBuilder, LocalRunner, MeasureInput, MeasureOptions, measure_batch
        from measure.local import usable_cpus
        from search_spaces import create_task
        import xgboost as xgb
        xgb.train({"nthread": 2}, xgb.DMatrix(np.random.rand(500, 4), label=np.random.rand(500)), 2)
        bound = sorted(os.sched_getaffinity(0))
        task = create_task("matmul", (32, 32, 32, "float32"), "llvm")
        with MeasureOptions(LocalBuilder(n_parallel=1), LocalRunner(number=1, repeat=1)) as options:
            (result,) = measure_batch([MeasureInput(task, task.config_space.get(0))], options)
            pid = int(result.worker.rsplit(":", 1)[1])  # the run worker, its kernel's threads still up
            threads = os.listdir(f"/proc/{pid}/task")
            worker = sorted(set().union(*(os.sched_getaffinity(int(t)) for t in threads)))
        print(json.dumps([before, bound, usable_cpus(), worker, result.error_msg]))
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOTUNE_NUM_THREADS", "OMP_NUM_THREADS")}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**env, "OMP_PROC_BIND": "true"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    before, bound, usable, worker, error = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(bound) == 1  # the binding did narrow the tuner's thread: the case this test is about
    assert error == "" and usable == before and worker == before
