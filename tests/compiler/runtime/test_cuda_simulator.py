"""The GPU simulator as the ``cuda`` device (``COMPILER_CUDA_SIMULATOR=1``): it never starts
unasked; asked for, ``compiler.build(..., target="cuda")`` gives a module that runs its
kernels on the simulator, ``compiler.cuda(0)`` holds arrays in host memory, the real PTX
is still generated, timings are marked simulated (and warn), tuning refuses them, and a
kernel with a data race raises an error naming the buffer and the threads."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from cuda_helpers import matmul_schedule, vector_add_schedule
from helpers import assert_written, poisoned, random_array

import autotune
import compiler
from autotune.errors import AutotuneError
from compiler.backends.cuda_simulator import SimulatedCUDAModule, SimulatedTimingWarning
from compiler.errors import CompilerError
from compiler.runtime.cuda import SIMULATOR_ENV, load_artifact
from compiler.tir import stmt as S
from compiler.tir.builtin import is_sync
from compiler.tir.functor import IRMutator
from compiler.tir.gpu_interpreter import DataRaceError
from measure import BuildReply, LocalRunner
from measure.artifact import build_artifact
from measure.errors import SimulatedDeviceError

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def simulator(monkeypatch):
    """The simulator, asked for in this process."""
    monkeypatch.setenv(SIMULATOR_ENV, "1")


def test_without_the_variable_nothing_is_simulated(monkeypatch):
    """In a fresh interpreter without the variable, a CUDA build is the GPU's module, the device
    is no simulator and the simulator's module is never even imported."""
    env = {k: v for k, v in os.environ.items() if k != SIMULATOR_ENV}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + str(ROOT / "tests")
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import compiler
        from cuda_helpers import vector_add_schedule
        s, args = vector_add_schedule()
        mod = compiler.build(s, args, target="cuda -arch=sm_80")
        a = np.ones(100, "float32")
        try:
            mod(a, a, np.empty(100, "float32"))
            outcome = "ran"
        except RuntimeError as e:  # no pycuda, driver or GPU: the error says which
            outcome = "refused: " + str(e)
        print(type(mod).__name__, compiler.cuda(0).simulated,
              "compiler.backends.cuda_simulator" in sys.modules)
        print(outcome)
    """)
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    first, outcome = p.stdout.strip().splitlines()[-2:]
    assert first == "CUDAModule False False"
    assert outcome == "ran" or any(w in outcome for w in ("pycuda", "driver", "GPU"))


def test_a_variable_that_is_not_a_yes_or_no_is_an_error(monkeypatch):
    monkeypatch.setenv(SIMULATOR_ENV, "maybe")
    with pytest.raises(RuntimeError, match="COMPILER_CUDA_SIMULATOR='maybe'"):
        assert compiler.cuda(0).simulated


def test_device_arrays_live_in_host_memory(simulator, rng):
    dev = compiler.cuda(0)
    assert dev.exist and dev.simulated
    assert not compiler.cpu(0).simulated
    x = random_array(rng, (3, 5), "float32")
    a = compiler.nd.array(x, dev)
    assert a.device == dev and a.shape == (3, 5) and a.dtype == "float32"
    np.testing.assert_array_equal(a.numpy(), x)
    a.copyfrom(2 * x)
    np.testing.assert_array_equal(a.numpy(), 2 * x)
    back = a.copyto(compiler.cpu(0))
    np.testing.assert_array_equal(back.numpy(), 2 * x)
    e = compiler.nd.empty((4,), "int32", dev)
    assert e.shape == (4,) and e.dtype == "int32"
    with pytest.raises(RuntimeError, match="one device, cuda\\(0\\)"):
        compiler.nd.empty((4,), "int32", compiler.cuda(1))


def test_build_runs_on_the_simulator_with_the_real_ptx(simulator, rng):
    s, args = vector_add_schedule()
    mod = compiler.build(s, args, target="cuda")
    assert isinstance(mod, SimulatedCUDAModule)
    ptx = mod.get_source("ptx")
    assert ".entry" in ptx and "ld.global" in ptx and "%tid.x" in ptx
    dev = compiler.cuda(0)
    a, b = random_array(rng, 1000, "float32"), random_array(rng, 1000, "float32")
    out = compiler.nd.array(poisoned(1000, "float32"), dev)
    mod(compiler.nd.array(a, dev), compiler.nd.array(b, dev), out)
    assert_written(out.numpy(), a + b)
    c = poisoned(1000, "float32")
    mod(a, b, c)  # numpy arrays: copied in, the written one copied back
    assert_written(c, a + b)


def test_shared_memory_matmul_with_barriers_on_the_simulator(simulator, rng):
    s, args = matmul_schedule(N=32, K=16, M=32, bn=16, vt=2, nt=4, kf=4)
    mod = compiler.build(s, args, target="cuda")
    a, b = random_array(rng, (32, 16), "float32"), random_array(rng, (16, 32), "float32")
    c = poisoned((32, 32), "float32")
    mod(a, b, c)
    assert_written(c, a @ b, rtol=1e-5, atol=1e-5)


def test_wrong_arguments_are_checked_as_on_a_gpu(simulator):
    s, args = vector_add_schedule()
    mod = compiler.build(s, args, target="cuda")
    with pytest.raises(Exception, match="dtype|shape|float32"):
        mod(np.ones(10, "float64"), np.ones(10, "float32"), np.ones(10, "float32"))
    with pytest.raises(Exception, match="cuda"):
        mod(compiler.nd.array(np.ones(10, "float32")), np.ones(10, "float32"), np.ones(10, "float32"))


def test_timings_are_marked_simulated_and_warn(simulator, rng):
    s, args = vector_add_schedule()
    mod = compiler.build(s, args, target="cuda")
    dev = compiler.cuda(0)
    arrays = [compiler.nd.array(random_array(rng, 256, "float32"), dev) for _ in range(2)]
    out = compiler.nd.empty((256,), "float32", dev)
    with pytest.warns(SimulatedTimingWarning, match="simulator"):
        result = mod.time_evaluator(mod.entry_name, dev, number=2, repeat=3)(*arrays, out)
    assert result.simulated and len(result.results) == 3 and result.median > 0
    assert "simulated" in repr(result)
    assert_written(out.numpy(), arrays[0].numpy() + arrays[1].numpy())


def test_a_module_from_an_artifact_cannot_be_simulated(simulator):
    s, args = vector_add_schedule()
    mod = compiler.build(s, args, target="cuda")
    from compiler import backends
    from compiler.backends.base import Artifact
    from compiler.target import Target

    artifact = Artifact.of_functions("ptx", mod.save_artifact(), Target("cuda -arch=sm_80"),
                                     {n: mod.function_info(n) for n in mod.function_names})
    loaded = backends.get("cuda").load_artifact(artifact)
    assert isinstance(loaded, SimulatedCUDAModule)
    assert loaded.get_source("ptx") == mod.get_source("ptx")
    with pytest.raises(CompilerError, match="loaded from an artifact.*PTX only"):
        loaded(np.ones(4, "float32"), np.ones(4, "float32"), np.ones(4, "float32"))
    assert not isinstance(load_artifact(mod.save_artifact()), SimulatedCUDAModule)


@pytest.fixture
def cuda_task():
    return autotune.create_task("matmul", (16, 8, 16, "float32"), target="cuda -arch=sm_80")


def test_tuning_refuses_the_simulator(simulator, cuda_task, tmp_path):
    db = tmp_path / "tuning.db"
    with pytest.raises(AutotuneError, match="simulator.*COMPILER_CUDA_SIMULATOR"):
        autotune.tune(cuda_task, trials=2, tuner="random", db=str(db))
    with pytest.raises(AutotuneError, match="simulator"):
        autotune.tune_tasks([cuda_task], trials=2, tuner="random", db=str(db))
    assert not db.exists()  # refused before the log was opened: nothing recorded


def test_the_runner_refuses_to_time_on_the_simulator(simulator, cuda_task):
    artifact = build_artifact(cuda_task, cuda_task.config_space.default_config)
    with pytest.raises(SimulatedDeviceError, match="simulator"):
        LocalRunner().request(cuda_task, BuildReply(artifact, None, 0.1))


def test_without_the_simulator_tuning_is_not_refused_for_it(monkeypatch, cuda_task):
    monkeypatch.delenv(SIMULATOR_ENV, raising=False)
    from autotune.tuning import check_measurable

    try:
        check_measurable([cuda_task])
    except AutotuneError as e:  # no GPU here: refused for that, not for the simulator
        assert "simulator" not in str(e)


class _DropFirstBarrier(IRMutator):
    def __init__(self):
        self.dropped = 0

    def visit_SeqStmt(self, st: S.SeqStmt):
        out = []
        for c in st.seq:
            if is_sync(c) and not self.dropped:
                self.dropped += 1
                continue
            out.append(self.visit(c))
        return S.seq(*out)


def test_a_racy_kernel_is_caught_on_the_device(simulator, rng):
    """The matmul without the barrier after its cooperative loads: threads read tiles of shared
    memory that others are still loading."""
    s, args = matmul_schedule(N=32, K=16, M=32, bn=16, vt=2, nt=4, kf=4)
    mod = compiler.build(s, args, target="cuda")
    device_module = mod.imported_modules[0]
    drop = _DropFirstBarrier()
    device_module.functions = [k.with_body(drop.visit(k.body)) for k in device_module.functions]
    assert drop.dropped == 1
    dev = compiler.cuda(0)
    a = compiler.nd.array(random_array(rng, (32, 16), "float32"), dev)
    b = compiler.nd.array(random_array(rng, (16, 32), "float32"), dev)
    c = compiler.nd.array(poisoned((32, 32), "float32"), dev)
    with pytest.raises(DataRaceError, match=r"data race \(read/write\) on shared buffer '[AB]\.shared', "
                                            r"element \d+: thread \(\d, \d, 0\) of block \(\d, \d, 0\) wrote "
                                            r"it, and thread \(\d, \d, 0\) of block \(\d, \d, 0\) reads it"):
        mod(a, b, c)


def test_an_autotvm_tuner_refuses_the_simulator(simulator, tmp_path):
    from autotune import autotvm

    task = autotvm.task.create("matmul", args=(16, 8, 16, "float32"), target="cuda -arch=sm_80")
    log = tmp_path / "matmul.log"
    tuner = autotvm.tuner.RandomTuner(task)
    with pytest.raises(AutotuneError, match="simulator"):
        tuner.tune(n_trial=2, measure_option=autotvm.measure_option(builder=autotvm.LocalBuilder(),
                                                                    runner=autotvm.LocalRunner(number=1)),
                   callbacks=[autotvm.callback.log_to_file(str(log))])
    assert not log.exists() or log.read_text() == ""
