"""Tasks: identity, FLOP counts, JSON and pickle round trips, rebuilding in a fresh process."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import compiler
from compiler import te
from search_spaces import SearchSpaceError, Task, count_flops, create_task, workload_key

ROOT = Path(__file__).resolve().parents[2]


def _ir(task: Task, config) -> str:
    s, args = task.instantiate(config)
    return str(compiler.lower(s, args, name="kernel"))


# ---------------------------------------------------------------------------- identity, FLOPs


def test_task_fields_and_workload_key():
    task = create_task("matmul", (16, 24, 32, "float32"), "llvm")
    assert task.template == task.name == "matmul"
    assert task.args == (16, 24, 32, "float32") and task.target == "llvm"
    model = compiler.Target("llvm").model
    assert task.workload_name == f"matmul(16,24,32,float32)@llvm:{model}"
    assert len(task.workload_key) == 40
    assert task.workload_key == workload_key("matmul", [16, 24, 32, "float32"], "llvm")
    assert task.workload_key != create_task("matmul", (16, 24, 16, "float32"), "llvm").workload_key
    # The key names the CPU model: another model is another workload.
    other = create_task("matmul", (16, 24, 32, "float32"), "llvm -mcpu=skylake")
    assert other.workload_key != task.workload_key
    assert len(task.config_space) > 10


def test_flops_match_hand_counts():
    N, L, M = 16, 24, 32
    assert create_task("matmul", (N, L, M, "float32"), "llvm").flop == 2 * N * L * M
    assert create_task("matmul", (1024, 1024, 1024, "float32"), "llvm").flop == 2 * 1024 ** 3
    assert create_task("batch_matmul", (3, N, L, M, "float32"), "llvm").flop == 3 * 2 * N * L * M
    assert create_task("dense", (4, 8, 16, "float32"), "llvm").flop == 2 * 4 * 8 * 16
    assert create_task("dense", (4, 8, 16, "float32", True), "llvm").flop == 2 * 4 * 8 * 16 + 4 * 16
    # conv2d: 2 * N * F * Ho * Wo * C * KH * KW; padding is bookkeeping, not arithmetic.
    n, c, h, w, f, k = 1, 4, 8, 8, 4, 3
    conv = create_task("conv2d_nchw", (n, c, h, w, f, k, k, 1, 1, 1, "float32"), "llvm")
    assert conv.flop == 2 * n * f * h * w * c * k * k
    strided = create_task("conv2d_nchw", (2, 3, 9, 7, 6, 3, 2, 2, 0, 1, "float32"), "llvm")
    ho, wo = (9 - 3) // 2 + 1, (7 - 2) // 2 + 1
    assert strided.flop == 2 * 2 * 6 * ho * wo * 3 * 3 * 2
    nhwc = create_task("conv2d_nhwc", (n, h, w, c, f, k, k, 1, 1, 1, "float32"), "llvm")
    assert nhwc.flop == conv.flop


def test_count_flops_rules():
    A = te.placeholder((10, 20), name="A")
    k = te.reduce_axis((0, 20), name="k")
    S = te.compute((10,), lambda i: te.sum(A[i, k] * 2.0 + 1.0, axis=k), name="S")
    assert count_flops(S) == 10 * 20 * 3  # mul, add, and the reduction's add
    M = te.compute((10,), lambda i: te.max(A[i, k], axis=k), name="M")
    assert count_flops([M]) == 10 * 20
    E = te.compute((10, 20), lambda i, j: te.exp(A[i, j] - M[i]), name="E")
    assert count_flops(E) == 10 * 20 * 2 + 10 * 20
    idx = te.compute((10, 20), lambda i, j: A[(i + 1) % 10, j] + (i * 3).astype("float32"), name="I")
    assert count_flops(idx) == 10 * 20  # index arithmetic does not count
    n = te.var("n")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    with pytest.raises(SearchSpaceError, match="not a constant"):
        count_flops(C)


def test_declared_flops_replace_the_count_and_add_up():
    """``cfg.add_flop`` (AutoTVM's): a te.extern GEMM has no arithmetic the count can see, so the
    template declares it; declarations add up; a config instantiating the template accepts the
    call; and a bad amount is refused by name."""
    import numpy as np

    import autotune
    from compiler.contrib import cblas
    from search_spaces import unregister_template

    @autotune.template("test_blas_gemm_declared")
    def blas_gemm(n, declare_twice=False):
        A = te.placeholder((n, n), name="A")
        B = te.placeholder((n, n), name="B")
        C = cblas.matmul(A, B)
        cfg = autotune.get_config()
        cfg.define_knob("unused", [0, 1])
        cfg.add_flop(n * n * n)
        cfg.add_flop(n * n * n if declare_twice else 0)
        return te.create_schedule(C.op), [A, B, C]

    try:
        assert count_flops(cblas.matmul(te.placeholder((8, 8)), te.placeholder((8, 8)))) == 0
        assert create_task("test_blas_gemm_declared", (8,), "llvm").flop == 8 ** 3
        task = create_task("test_blas_gemm_declared", (8, True), "llvm")
        assert task.flop == 2 * 8 ** 3
        s, args = task.instantiate(task.config_space.get(1))
        f = compiler.build(s, args, target="llvm")
        rng = np.random.default_rng(0)
        a, b = rng.random((8, 8), dtype=np.float32), rng.random((8, 8), dtype=np.float32)
        c = np.full((8, 8), np.nan, np.float32)
        f(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    finally:
        unregister_template("test_blas_gemm_declared")
    space = create_task("matmul", (8, 8, 8, "float32"), "llvm").config_space
    for bad in (-1, float("nan"), "64", True):
        with pytest.raises(SearchSpaceError, match="add_flop"):
            space.add_flop(bad)
        with pytest.raises(SearchSpaceError, match="add_flop"):
            space.get(0).add_flop(bad)


# ---------------------------------------------------------------------------- transport


def test_json_round_trip_rebuilds_the_same_space():
    task = create_task("conv2d_nchw", (1, 4, 8, 8, 4, 3, 3, 1, (1, 1), 1, "float32"), "llvm")
    data = json.loads(json.dumps(task.to_json()))
    assert data == {"template": "conv2d_nchw", "args": [1, 4, 8, 8, 4, 3, 3, 1, [1, 1], 1, "float32"],
                    "target": "llvm"}
    back = Task.from_json(data)
    assert back == task and back.workload_key == task.workload_key
    assert back.config_space.raw_size == task.config_space.raw_size
    cfg = task.config_space.sample(1, 3)[0]
    assert _ir(back, back.config_space.from_json(cfg.to_json())) == _ir(task, cfg)
    with pytest.raises(SearchSpaceError, match="a task is"):
        Task.from_json({"template": "matmul"})


def test_pickle_round_trip_in_process():
    task = create_task("softmax", (9, 33, "float32"), "llvm")
    back = pickle.loads(pickle.dumps(task))
    assert back == task and back.flop == task.flop
    cfg = task.config_space.get(5)
    assert _ir(back, cfg) == _ir(task, cfg)
    assert pickle.loads(pickle.dumps(cfg)) == cfg


_LOAD_AND_PRINT = """
import pickle, sys
import compiler
task = pickle.load(open(sys.argv[1], "rb"))
cfg = task.config_space.from_json(__import__("json").loads(sys.argv[2]))
s, args = task.instantiate(cfg)
print(task.workload_key)
print(compiler.lower(s, args, name="kernel"))
"""


def _run(code: str, *args: str, cwd: Path = ROOT) -> str:
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_builtin_task_rebuilds_the_same_schedule_in_a_fresh_process(tmp_path):
    task = create_task("matmul", (16, 24, 32, "float32"), "llvm")
    cfg = task.config_space.sample(1, 11)[0]
    path = tmp_path / "task.pkl"
    path.write_bytes(pickle.dumps(task))
    out = _run(_LOAD_AND_PRINT, str(path), json.dumps(cfg.to_json()))
    assert out == f"{task.workload_key}\n{_ir(task, cfg)}\n"


_MAIN_TEMPLATE = textwrap.dedent("""
    import pickle, sys
    from compiler import te
    import autotune

    @autotune.template("main_only_scale")
    def main_only_scale(n, factor):
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] * factor, name="B")
        s = te.create_schedule(B.op)
        cfg = autotune.get_config()
        cfg.define_split("tile", n, num_outputs=2)
        cfg["tile"].apply(s, B, B.op.axis[0])
        return s, [A, B]

    task = autotune.create_task("main_only_scale", (24, 3.0), "llvm")
    open(sys.argv[1], "wb").write(pickle.dumps(task))
""")


def test_main_template_travels_by_value(tmp_path):
    path = tmp_path / "main_task.pkl"
    script = tmp_path / "define.py"
    script.write_text(_MAIN_TEMPLATE)
    p = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True,
                       cwd=ROOT, timeout=120, env=_env())
    assert p.returncode == 0, p.stderr
    cfg = {"knobs": {"tile": [4, 6]}}
    out = _run(_LOAD_AND_PRINT, str(path), json.dumps(cfg))
    assert "A[" in out and "* 3.0" in out.replace("3.0f", "3.0")
    # This process never saw the template, yet the pickle brings it along.
    task = pickle.loads(path.read_bytes())
    assert task.template == "main_only_scale" and len(task.config_space) == 8
    from search_spaces import unregister_template

    unregister_template("main_only_scale")


def _env() -> dict:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_workload_is_the_name_and_the_args_as_autotvm_writes_it():
    task = create_task("matmul", (16, 16, 16), "llvm")
    assert task.workload == ("matmul", 16, 16, 16, "float32")
    assert task.workload == (task.name, *task.args)
    assert isinstance(task.workload, tuple)
