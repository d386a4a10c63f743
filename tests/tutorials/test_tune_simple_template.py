"""AutoTVM's ``tune_simple_template`` tutorial (TVM v0.8-v0.12), run as a user runs it.

The script below is the tutorial's code with only names mapped: ``tvm`` is ``compiler``,
``tvm.autotvm`` is ``autotune.autotvm`` and ``tvm.testing.assert_allclose`` is numpy's;
its matrices are 64x64 instead of 512x512 (a smaller space, the same code). It runs in a
fresh interpreter, so its template lives in ``__main__`` and reaches the measurement
workers by value, as it does for a user; its own numerical check must pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TUTORIAL = '''
import logging
import sys

import numpy as np
import compiler as tvm
from compiler import te

# the module is called `autotvm`
from autotune import autotvm


@autotvm.template("tutorial/matmul")
def matmul(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)

    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)

    # schedule
    y, x = s[C].op.axis
    k = s[C].op.reduce_axis[0]

    ##### define space begin #####
    cfg = autotvm.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    ##### define space end #####

    # schedule according to config
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)

    s[C].reorder(yo, xo, k, yi, xi)

    return s, [A, B, C]


N, L, M = 64, 64, 64
task = autotvm.task.create("tutorial/matmul", args=(N, L, M, "float32"), target="llvm")
print(task.config_space)

# logging config (for printing tuning log to the screen)
logging.getLogger("autotvm").setLevel(logging.DEBUG)
logging.getLogger("autotvm").addHandler(logging.StreamHandler(sys.stdout))

# There are two steps for measuring a config: build and run.
# By default, we use all CPU cores to compile program. Then measure them sequentially.
# We measure 5 times and take average to reduce variance.
measure_option = autotvm.measure_option(builder="local", runner=autotvm.LocalRunner(number=5))

# Begin tuning with RandomTuner, log records to file `matmul.log`
# You can use alternatives like XGBTuner.
tuner = autotvm.tuner.RandomTuner(task)
tuner.tune(
    n_trial=10,
    measure_option=measure_option,
    callbacks=[autotvm.callback.log_to_file("matmul.log")],
)

# apply history best from log file
with autotvm.apply_history_best("matmul.log"):
    with tvm.target.Target("llvm"):
        s, arg_bufs = matmul(N, L, M, "float32")
        func = tvm.build(s, arg_bufs)

# check correctness
a_np = np.random.uniform(size=(N, L)).astype(np.float32)
b_np = np.random.uniform(size=(L, M)).astype(np.float32)
c_np = a_np.dot(b_np)

c_tvm = tvm.nd.empty(c_np.shape)
func(tvm.nd.array(a_np), tvm.nd.array(b_np), c_tvm)

np.testing.assert_allclose(c_np, c_tvm.numpy(), rtol=1e-4)
'''

# Poison the output first, so that an element the kernel never writes fails the check.
_POISON = ("c_tvm = tvm.nd.empty(c_np.shape)\n",
           "c_tvm = tvm.nd.array(np.full(c_np.shape, np.nan, dtype=np.float32))\n")


def test_tune_simple_template_runs_to_the_end(tmp_path):
    assert _POISON[0] in TUTORIAL
    script = tmp_path / "tune_simple_template.py"
    script.write_text(TUTORIAL.replace(*_POISON))
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "tile_y: split, 7 choices" in p.stdout  # print(task.config_space)
    assert "No: 10\tGFLOPS: " in p.stdout  # the "autotvm" logger it configures reports each trial
    # n_trial trials in the log, in AutoTVM's format, each a distinct config of the task.
    rows = [json.loads(line) for line in (tmp_path / "matmul.log").read_text().splitlines()]
    assert len(rows) == 10
    assert {(r["input"][1], *r["input"][2]) for r in rows} == {("tutorial/matmul", 64, 64, 64, "float32")}
    assert len({r["config"]["index"] for r in rows}) == 10
    assert all(r["result"][1] == 0 for r in rows)
