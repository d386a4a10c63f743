"""TVM's ``tune_conv2d_cuda`` tutorial ("Tuning High Performance Convolution on NVIDIA GPUs",
v0.8-v0.12), with TVM's names mapped to ours:

    tvm, tvm.te, tvm.topi, tvm.testing -> compiler, compiler.te, compiler.topi, compiler.testing
    tvm.topi.testing.conv2d_nchw_python -> compiler.topi.testing.conv2d_nchw_python
    tvm.autotvm                         -> autotune.autotvm

The template below is the tutorial's, unchanged (its ``tile_rx``/``tile_ry`` swap included).
Tuning measures every config on a GPU, which this machine may not have, so the tutorial is
split: the test marked ``cuda`` runs the whole script as a user would (20 XGBTuner trials logged
to ``conv2d.log``, ``apply_history_best``, the build, its ``rtol=1e-2`` check and the timing).
Without a GPU, the same code runs up to where it needs one:

- task creation at the tutorial's shape (resnet's last layer), its config space, workload and
  ``measure_option``, and the tuner's construction;
- configs of that space built for CUDA, the PTX of each through ptxas (a config that needs
  more shared memory than a block has is refused at build time, as
  ``tests/compiler/transform/test_cuda_lowering.py`` checks);
- on a tiny shape (4x4 image, 4 -> 8 channels), configs built, assembled and run on the GPU
  simulator against ``conv2d_nchw_python`` with the tutorial's check, outputs poisoned (NaN);
- the tutorial's last part, ``apply_history_best(log).query(task.target, task.workload)`` and
  the build under ``apply_history_best``, on an AutoTVM JSON log of the tiny task written with
  ``autotvm.record.encode`` (its costs set by the test: nothing can be timed without a GPU).
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cuda_helpers import assemble, simulate
from helpers import poisoned

import compiler as tvm
from autotune import autotvm
from compiler import te, testing, topi
from compiler.topi.testing import conv2d_nchw_python
from measure.records import ErrorKind
from measure.records import MeasureResult as RawResult

ROOT = Path(__file__).resolve().parents[2]

# the last layer in resnet, as in the tutorial
N, H, W, CO, CI, KH, KW, strides, padding = 1, 7, 7, 512, 512, 3, 3, (1, 1), (1, 1)
TINY = (1, 4, 4, 8, 4, 3, 3, (1, 1), (1, 1))


@autotvm.template("tutorial/conv2d_no_batching")
def conv2d_no_batching(N, H, W, CO, CI, KH, KW, stride, padding):
    assert N == 1, "Only consider batch_size = 1 in this template"
    data = te.placeholder((N, CI, H, W), name="data")
    kernel = te.placeholder((CO, CI, KH, KW), name="kernel")
    conv = topi.nn.conv2d_nchw(data, kernel, stride, padding, dilation=1, out_dtype="float32")
    s = te.create_schedule([conv.op])
    n, f, y, x = s[conv].op.axis
    rc, ry, rx = s[conv].op.reduce_axis
    cfg = autotvm.get_config()
    cfg.define_split("tile_f", f, num_outputs=4)
    cfg.define_split("tile_y", y, num_outputs=4)
    cfg.define_split("tile_x", x, num_outputs=4)
    cfg.define_split("tile_rc", rc, num_outputs=3)
    cfg.define_split("tile_ry", ry, num_outputs=3)
    cfg.define_split("tile_rx", rx, num_outputs=3)
    cfg.define_knob("auto_unroll_max_step", [0, 512, 1500])
    cfg.define_knob("unroll_explicit", [0, 1])
    pad_data = s[conv].op.input_tensors[0]
    s[pad_data].compute_inline()
    data, raw_data = pad_data, data
    output = conv
    OL = s.cache_write(conv, "local")
    AA = s.cache_read(data, "shared", [OL])
    WW = s.cache_read(kernel, "shared", [OL])
    AL = s.cache_read(AA, "local", [OL])
    WL = s.cache_read(WW, "local", [OL])
    n, f, y, x = s[output].op.axis
    bf, vf, tf, fi = cfg["tile_f"].apply(s, output, f)
    by, vy, ty, yi = cfg["tile_y"].apply(s, output, y)
    bx, vx, tx, xi = cfg["tile_x"].apply(s, output, x)
    kernel_scope = n
    s[output].bind(bf, te.thread_axis("blockIdx.z"))
    s[output].bind(by, te.thread_axis("blockIdx.y"))
    s[output].bind(bx, te.thread_axis("blockIdx.x"))
    s[output].bind(vf, te.thread_axis("vthread"))
    s[output].bind(vy, te.thread_axis("vthread"))
    s[output].bind(vx, te.thread_axis("vthread"))
    s[output].bind(tf, te.thread_axis("threadIdx.z"))
    s[output].bind(ty, te.thread_axis("threadIdx.y"))
    s[output].bind(tx, te.thread_axis("threadIdx.x"))
    s[output].reorder(n, bf, by, bx, vf, vy, vx, tf, ty, tx, fi, yi, xi)
    s[OL].compute_at(s[output], tx)
    n, f, y, x = s[OL].op.axis
    rc, ry, rx = s[OL].op.reduce_axis
    rco, rcm, rci = cfg["tile_rc"].apply(s, OL, rc)
    ryo, rym, ryi = cfg["tile_rx"].apply(s, OL, ry)
    rxo, rxm, rxi = cfg["tile_ry"].apply(s, OL, rx)
    s[OL].reorder(rco, ryo, rxo, rcm, rym, rxm, rci, ryi, rxi, n, f, y, x)
    s[AA].compute_at(s[OL], rxo)
    s[WW].compute_at(s[OL], rxo)
    s[AL].compute_at(s[OL], rxm)
    s[WL].compute_at(s[OL], rxm)
    for load in [AA, WW]:
        n, f, y, x = s[load].op.axis
        fused = s[load].fuse(n, f, y, x)
        tz, fused = s[load].split(fused, nparts=cfg["tile_f"].size[2])
        ty, fused = s[load].split(fused, nparts=cfg["tile_y"].size[2])
        tx, fused = s[load].split(fused, nparts=cfg["tile_x"].size[2])
        s[load].bind(tz, te.thread_axis("threadIdx.z"))
        s[load].bind(ty, te.thread_axis("threadIdx.y"))
        s[load].bind(tx, te.thread_axis("threadIdx.x"))
    s[output].pragma(kernel_scope, "auto_unroll_max_step", cfg["auto_unroll_max_step"].val)
    s[output].pragma(kernel_scope, "unroll_explicit", cfg["unroll_explicit"].val)
    return s, [raw_data, kernel, conv]


def _build(task, config, args):
    """Instantiate the template with ``config`` and build it for CUDA, as the builder does."""
    with autotvm.ApplyConfig(config):
        with tvm.target.Target("cuda"):
            s, arg_bufs = conv2d_no_batching(*args)
            func = tvm.build(s, arg_bufs)
    assemble(func.get_source("ptx"), func.imported_modules[0].arch)
    return s, arg_bufs, func


def _check_on_the_simulator(s, arg_bufs, args):
    n, h, w, co, ci, kh, kw, stride, pad = args
    a_np = np.random.uniform(size=(n, ci, h, w)).astype(np.float32)
    w_np = np.random.uniform(size=(co, ci, kh, kw)).astype(np.float32)
    c_np = conv2d_nchw_python(a_np, w_np, stride, pad)
    c_sim = poisoned(c_np.shape, "float32")
    simulate(s, arg_bufs, [a_np, w_np, c_sim])
    testing.assert_allclose(c_np, c_sim, rtol=1e-2)


def test_task_and_search_space():
    task = autotvm.task.create(
        "tutorial/conv2d_no_batching", args=(N, H, W, CO, CI, KH, KW, strides, padding), target="cuda"
    )
    print(task.config_space)
    # ordered factorizations: 512 into 4 (220), 7 into 4 (4) twice, 512 into 3 (55), 3 into 3 (3)
    # twice, then the 3 x 2 unroll knobs
    assert len(task.config_space) == 220 * 4 * 4 * 55 * 3 * 3 * 3 * 2
    assert task.workload == ("tutorial/conv2d_no_batching", N, H, W, CO, CI, KH, KW, strides, padding)
    measure_option = autotvm.measure_option(
        builder=autotvm.LocalBuilder(),
        runner=autotvm.LocalRunner(repeat=3, min_repeat_ms=100, timeout=4),
    )
    assert measure_option is not None
    tuner = autotvm.tuner.XGBTuner(task)
    assert tuner.task is task


# Two configs of the tutorial's space (drawn at random once) that the hardware can run. Fixed,
# since some configs take minutes to build here.
BUILDS = (6341996, 3133307)


@pytest.mark.parametrize("index", BUILDS)
def test_configs_build_at_the_tutorial_shape(index):
    task = autotvm.task.create(
        "tutorial/conv2d_no_batching", args=(N, H, W, CO, CI, KH, KW, strides, padding), target="cuda"
    )
    config = task.config_space.get(index)
    _, _, func = _build(task, config, task.args)
    ptx = func.get_source("ptx")
    assert "bar.sync" in ptx  # the cooperative fetches into shared memory are fenced


def test_configs_check_on_the_simulator():
    task = autotvm.task.create("tutorial/conv2d_no_batching", args=TINY, target="cuda")
    rng = np.random.default_rng(11)
    for index in rng.choice(len(task.config_space), 3, replace=False):
        config = task.config_space.get(int(index))
        s, arg_bufs, _ = _build(task, config, TINY)
        _check_on_the_simulator(s, arg_bufs, TINY)


def _write_log(path, task, costs):
    """An AutoTVM JSON log with one record per ``config: cost`` (None: a failed build)."""
    lines = []
    for config, cost in costs.items():
        ok = cost is not None
        result = RawResult(costs=(cost,) if ok else (), error_kind=None if ok else ErrorKind.COMPILE_ERROR,
                           error_msg="" if ok else "too much shared memory", build_time=0.5,
                           run_time=0.1 if ok else 0.0, timestamp=time.time(), worker="test")
        lines.append(autotvm.record.encode(autotvm.MeasureInput(task.target, task, config), result))
    Path(path).write_text("\n".join(lines) + "\n")


def test_apply_history_best(tmp_path):
    task = autotvm.task.create("tutorial/conv2d_no_batching", args=TINY, target="cuda")
    configs = [task.config_space.get(i) for i in (5, 1234, 40000, 77777)]
    log = tmp_path / "conv2d.log"
    _write_log(log, task, {configs[0]: 3e-5, configs[1]: 1e-5, configs[2]: None, configs[3]: 2e-5})

    # inspect the best config
    dispatch_context = autotvm.apply_history_best(str(log))
    best_config = dispatch_context.query(task.target, task.workload)
    print("\nBest config:")
    print(best_config)
    assert best_config.index == configs[1].index  # the fastest; the failed one never counts

    # apply history best from log file
    with autotvm.apply_history_best(str(log)):
        with tvm.target.Target("cuda"):
            s, arg_bufs = conv2d_no_batching(*TINY)
            func = tvm.build(s, arg_bufs)
    assemble(func.get_source("ptx"), func.imported_modules[0].arch)
    _check_on_the_simulator(s, arg_bufs, TINY)


TUNING = """
import logging
import sys

import numpy as np

import compiler as tvm
from compiler import te, topi, testing
from compiler.topi.testing import conv2d_nchw_python
import compiler.testing

from autotune import autotvm

{template}

logging.getLogger("autotvm").setLevel(logging.DEBUG)
logging.getLogger("autotvm").addHandler(logging.StreamHandler(sys.stdout))

N, H, W, CO, CI, KH, KW, strides, padding = 1, 7, 7, 512, 512, 3, 3, (1, 1), (1, 1)
task = autotvm.task.create(
    "tutorial/conv2d_no_batching", args=(N, H, W, CO, CI, KH, KW, strides, padding), target="cuda"
)
print(task.config_space)

measure_option = autotvm.measure_option(
    builder=autotvm.LocalBuilder(),
    runner=autotvm.LocalRunner(repeat=3, min_repeat_ms=100, timeout=4),
)

tuner = autotvm.tuner.XGBTuner(task)
tuner.tune(
    n_trial=20,
    measure_option=measure_option,
    callbacks=[autotvm.callback.log_to_file("conv2d.log")],
)

dispatch_context = autotvm.apply_history_best("conv2d.log")
best_config = dispatch_context.query(task.target, task.workload)
print("\\nBest config:")
print(best_config)

with autotvm.apply_history_best("conv2d.log"):
    with tvm.target.Target("cuda"):
        s, arg_bufs = conv2d_no_batching(N, H, W, CO, CI, KH, KW, strides, padding)
        func = tvm.build(s, arg_bufs)

a_np = np.random.uniform(size=(N, CI, H, W)).astype(np.float32)
w_np = np.random.uniform(size=(CO, CI, KH, KW)).astype(np.float32)
c_np = conv2d_nchw_python(a_np, w_np, strides, padding)

dev = tvm.cuda()
a_tvm = tvm.nd.array(a_np, device=dev)
w_tvm = tvm.nd.array(w_np, device=dev)
c_tvm = tvm.nd.array(np.full(c_np.shape, np.nan, dtype=np.float32), device=dev)  # poisoned
func(a_tvm, w_tvm, c_tvm)

tvm.testing.assert_allclose(c_np, c_tvm.numpy(), rtol=1e-2)

evaluator = func.time_evaluator(func.entry_name, dev, number=400)
print("Time cost of this operator: %f" % evaluator(a_tvm, w_tvm, c_tvm).mean)
"""


def _tuning_script() -> str:
    return TUNING.format(template=inspect.getsource(conv2d_no_batching.impl("cuda").func))


def test_tuning_script_compiles():
    """The script the GPU test runs is valid Python holding the template (checked without a GPU)."""
    code = compile(_tuning_script(), "tune_conv2d_cuda.py", "exec")
    assert "conv2d_no_batching" in code.co_names


@pytest.mark.cuda
@pytest.mark.cuda_hardware(reason="tunes, and tuning refuses timings taken on the simulator")
@pytest.mark.slow
def test_tuning_runs_to_the_end_on_a_gpu(tmp_path):
    script = tmp_path / "tune_conv2d_cuda.py"
    script.write_text(_tuning_script())
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=1800)
    assert p.returncode == 0, p.stdout + p.stderr
    assert len((tmp_path / "conv2d.log").read_text().splitlines()) == 20
