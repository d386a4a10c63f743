"""A compiled model: its executor runs the kernels on the planned buffers and matches the
interpreter; the exported library runs alone, from Python and from C."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from graph_models import residual_cnn, weights
from helpers import CPUS, assert_written, poisoned

import compiler
from compiler.errors import RuntimeArgumentError
from compiler.graph import GraphBuilder, GraphError, build_graph, evaluate, model_info, profile, run


@pytest.fixture(scope="module")
def network():
    rng = np.random.default_rng(3)
    graph = residual_cnn(rng, channels=6)  # no whole vector of channels: plain NCHW on any host
    return graph, build_graph(graph, "llvm")


def _input(seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (1, 3, 12, 12)).astype("float32")


def test_the_executor_matches_the_interpreter(network):
    graph, module = network
    x = _input()
    out = poisoned((1, 10), "float32")
    module(x, out)
    np.testing.assert_allclose(out, evaluate(graph, [x])[0], rtol=1e-4, atol=1e-6)
    info = model_info(module)
    # 10 kernels, but the flatten before the dense layer is its input's memory: no call
    assert sum(k["calls"] for k in info["kernels"]) == 9
    assert len(info["kernels"]) == 7  # the second residual block reuses the first one's kernels
    assert not any("reshape" in k["name"] for k in info["kernels"])
    assert info["inputs"] == [{"name": "x", "shape": [1, 3, 12, 12], "dtype": "float32"}]
    assert 0 < info["workspace_bytes"] < info["unshared_bytes"]


def test_each_run_starts_from_its_inputs(network):
    graph, module = network
    for seed in (1, 2):
        x = _input(seed)
        np.testing.assert_allclose(run(module, x)[0], evaluate(graph, [x])[0], rtol=1e-4, atol=1e-6)


def test_wrong_inputs_are_refused_before_any_code_runs(network):
    _, module = network
    out = np.empty((1, 10), "float32")
    with pytest.raises(RuntimeArgumentError, match="dimension 3 is 13"):
        module(np.ones((1, 3, 12, 13), "float32"), out)
    with pytest.raises(RuntimeArgumentError, match="dtype"):
        module(np.ones((1, 3, 12, 12), "float64"), out)
    with pytest.raises(RuntimeArgumentError):
        module(_input())


def test_the_exported_library_runs_alone(network, tmp_path):
    graph, module = network
    path = tmp_path / "net.so"
    module.export_library(path)
    loaded = compiler.runtime.load_module(path)
    assert model_info(loaded) == model_info(module)
    x = _input(4)
    np.testing.assert_allclose(run(loaded, x)[0], evaluate(graph, [x])[0], rtol=1e-4, atol=1e-6)
    for cache_flush in (False, True):
        times = profile(loaded, repeat=1, min_repeat_ms=1, cache_flush=cache_flush)
        assert set(times) == {k["name"] for k in model_info(loaded)["kernels"]}
        assert all(calls >= 1 and seconds > 0 for calls, seconds in times.values())


def test_timed_as_in_the_model_a_kernel_keeps_what_other_kernels_wrote_warm(network, monkeypatch):
    # the second convolution of each residual block adds the block's input: written by the
    # kernels before, it is in the caches inside the model, where the weights and the bias are not
    _, module = network
    warm = {k["name"]: k["warm"] for k in model_info(module)["kernels"]}
    residual = [name for name in warm if "add_add" in name]
    assert len(residual) == 1 and warm[residual[0]] == [3]  # (input, weights, bias, residual, out)
    assert all(positions == [] for name, positions in warm.items() if name not in residual)
    seen = {}
    real = type(module).time_evaluator

    def spy(self, name, *args, **kwargs):
        seen.setdefault(kwargs.get("cache_flush"), {})[name] = tuple(kwargs.get("warm", ()))
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(type(module), "time_evaluator", spy)
    for cache_flush in ("model", "weights"):
        times = profile(module, repeat=1, min_repeat_ms=1, cache_flush=cache_flush)
        assert all(seconds > 0 for _, seconds in times.values())
    assert seen["model"] == {name: tuple(positions) for name, positions in warm.items()}
    assert all(positions == () for positions in seen["weights"].values())  # as the tuner's "weights"


def test_the_profiling_entry_runs_the_model_and_stamps_each_call(network, tmp_path):
    graph, module = network
    module.export_library(tmp_path / "net.so")
    loaded = compiler.runtime.load_module(tmp_path / "net.so")
    for m in (module, loaded):  # JIT-compiled, and the library with clock_gettime linked from libc
        info = model_info(m)
        x = _input(6)
        out = poisoned((1, 10), "float32")
        stamps = np.full(len(info["calls"]) + 1, -1, dtype=np.int64)
        m.get_function(info["profile_entry"])(x, out, stamps)
        np.testing.assert_allclose(out, evaluate(graph, [x])[0], rtol=1e-4, atol=1e-6)
        assert stamps[0] > 0 and np.all(np.diff(stamps) >= 0)  # written, in order
        assert sorted(set(info["calls"])) == sorted(k["name"] for k in info["kernels"])
        assert all(info["calls"].count(k["name"]) == k["calls"] for k in info["kernels"])
        times = profile(m, repeat=3, min_repeat_ms=1, in_model=True)
        calls = {name: calls for name, (calls, _) in times.items()}
        assert calls == {k["name"]: k["calls"] for k in info["kernels"]}
        assert all(seconds > 0 for _, seconds in times.values())
    with pytest.raises(RuntimeArgumentError, match="stamps"):
        module.get_function(model_info(module)["profile_entry"])(x, out, np.zeros(3, np.int64))
    del loaded.attrs["model"]["profile_entry"]  # as a library built before the entry existed says
    with pytest.raises(GraphError, match="no profiling entry"):
        profile(loaded, in_model=True)


def test_profiling_runs_for_its_wall_time_not_for_that_much_model_time(network, monkeypatch):
    """``min_repeat_ms`` bounds the wall time of the runs, the Python between them included: on a
    clock that moves 10 ms a reading, 50 ms take a handful of runs, not the thousands of this
    model's microsecond runs that 50 ms of its own time would be."""
    from compiler.graph import profile_runs, runner

    class Clock:
        now = 0.0

        def perf_counter(self):
            self.now += 0.01
            return self.now

    _, module = network
    monkeypatch.setattr(runner, "time", Clock())
    runs = profile_runs(module, repeat=2, min_repeat_ms=50)
    assert 5 <= runs.shape[0] <= 7 and runs.shape[1] == len(model_info(module)["calls"]) and np.all(runs > 0)
    assert profile_runs(module, repeat=7, min_repeat_ms=0).shape[0] == 7  # at least repeat runs


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_a_c_program_calls_the_library(network, tmp_path):
    graph, module = network
    lib = tmp_path / "net.so"
    module.export_library(lib)
    x = _input(5)
    x.tofile(tmp_path / "x.bin")
    source = tmp_path / "main.c"
    source.write_text(textwrap.dedent("""
        #include <dlfcn.h>
        #include <stdint.h>
        #include <stdio.h>
        #include <stdlib.h>
        typedef void (*entry_fn)(void **, int64_t *);
        int main(int argc, char **argv) {
            void *lib = dlopen(argv[1], RTLD_NOW);
            if (!lib) { fprintf(stderr, "%s\\n", dlerror()); return 2; }
            entry_fn run = (entry_fn)dlsym(lib, "run");
            float *x = aligned_alloc(64, 448 * sizeof(float)), *y = aligned_alloc(64, 64);
            FILE *f = fopen(argv[2], "rb");
            if (fread(x, sizeof(float), 432, f) != 432) return 3;
            void *buffers[2] = {x, y};
            run(buffers, NULL);
            for (int i = 0; i < 10; i++) printf("%.9g\\n", y[i]);
            return 0;
        }
    """))
    exe = tmp_path / "main"
    subprocess.run(["cc", "-O1", "-o", str(exe), str(source), "-ldl"], check=True)
    env = dict(os.environ, OMP_NUM_THREADS="2")
    out = subprocess.run([str(exe), str(lib), str(tmp_path / "x.bin")], capture_output=True, text=True,
                         env=env, check=True).stdout.split()
    np.testing.assert_allclose(np.array(out, dtype="float32"), evaluate(graph, [x])[0][0],
                               rtol=1e-4, atol=1e-6)


def test_outputs_that_are_inputs_or_constants_are_copied(rng):
    b = GraphBuilder("copies")
    x = b.input("x", (4, 8))
    c = b.const("c", weights(rng, 4, 8))
    y = b.op("add", x, c)
    graph = b.finish(y, x, c, y)
    module = build_graph(graph)
    data = rng.uniform(-1, 1, (4, 8)).astype("float32")
    outs = [poisoned((4, 8), "float32") for _ in range(4)]
    module(data, *outs)
    for got, want in zip(outs, evaluate(graph, [data])):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_an_output_that_reshapes_an_intermediate_is_computed_in_place(rng):
    # the dense layer writes the first output's array; the second, the same reshape, is copied from
    # it and the third, the input reshaped, is a kernel; the tanh reads h where the dense layer wrote it
    b = GraphBuilder("reshaped_outputs")
    x = b.input("x", (4, 8))
    h = b.op("nn.dense", x, b.const("w", weights(rng, 6, 8)))
    flat = b.op("reshape", h, newshape=(24,))
    graph = b.finish(flat, b.op("reshape", h, newshape=(24,)), b.op("reshape", x, newshape=(32,)),
                     b.op("tanh", flat))
    module = build_graph(graph)
    assert model_info(module)["calls"][0].startswith("k0_dense")
    assert len(model_info(module)["calls"]) == 3  # the dense layer, the input's reshape, the tanh
    data = rng.uniform(-1, 1, (4, 8)).astype("float32")
    outs = [poisoned(v.shape, "float32") for v in graph.outputs]
    module(data, *outs)
    for got, want in zip(outs, evaluate(graph, [data])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_model_with_two_inputs_and_an_injective_chain(rng):
    b = GraphBuilder("attention_scores")
    q, k = b.input("q", (2, 5, 8)), b.input("k", (2, 5, 8))
    kt = b.op("transpose", k, axes=(0, 2, 1))
    scores = b.op("nn.batch_matmul", q, kt)
    scores = b.op("divide", scores, b.const("scale", np.float32(np.sqrt(8.0))))
    graph = b.finish(b.op("nn.softmax", scores, axis=2))
    module = build_graph(graph)
    assert len(model_info(module)["kernels"]) == 3
    data = [rng.uniform(-1, 1, (2, 5, 8)).astype("float32") for _ in range(2)]
    np.testing.assert_allclose(run(module, *data)[0], evaluate(graph, data)[0], rtol=1e-5, atol=1e-6)
    # by name, in any order, as ONNX Runtime takes them
    np.testing.assert_allclose(run(module, {"k": data[1], "q": data[0]})[0], evaluate(graph, data)[0],
                               rtol=1e-5, atol=1e-6)
    wrong_name = r"takes inputs \['q', 'k'\]; missing \['k'\], not its own \['key'\]"
    with pytest.raises(compiler.graph.GraphError, match=wrong_name):
        run(module, {"q": data[0], "key": data[1]})


def test_random_inputs_are_floats_of_the_seed_and_zero_indices(rng):
    b = GraphBuilder("lookup")
    x, ids = b.input("x", (2, 4)), b.input("ids", (3,), "int64")
    rows = b.op("take", b.const("table", weights(rng, 5, 4)), ids, axis=0)
    graph = b.finish(b.op("add", b.op("sum", rows, axis=(0,), keepdims=True), x))
    module = build_graph(graph)
    floats, indices = compiler.graph.random_inputs(module, np.random.default_rng(7))
    np.testing.assert_array_equal(floats, np.random.default_rng(7).uniform(-1, 1, (2, 4)).astype("float32"))
    assert indices.dtype == np.int64 and indices.shape == (3,) and not indices.any()
    np.testing.assert_allclose(run(module, floats, indices)[0], evaluate(graph, [floats, indices])[0],
                               rtol=1e-5, atol=1e-6)


def test_models_compile_for_cpus_only(rng):
    b = GraphBuilder()
    x = b.input("x", (4,))
    with pytest.raises(compiler.graph.GraphError, match="llvm"):
        build_graph(b.finish(b.op("nn.relu", x)), target="cuda")


def test_the_library_loads_without_the_tuner_the_log_onnx_or_llvm(network, tmp_path):
    graph, module = network
    lib = tmp_path / "net.so"
    module.export_library(lib)
    x = _input(6)
    np.save(tmp_path / "x.npy", x)
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import compiler.runtime
        m = compiler.runtime.load_module({str(lib)!r})
        out = np.empty(m.attrs["model"]["outputs"][0]["shape"], "float32")
        m(np.load({str(tmp_path / "x.npy")!r}), out)
        np.save({str(tmp_path / "out.npy")!r}, out)
        loaded = [name for name in ("autotune", "search_spaces", "db", "measure", "onnx", "llvmlite", "torch")
                  if name in sys.modules]
        print(",".join(loaded))
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert p.stdout.strip() == ""
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), evaluate(graph, [x])[0], rtol=1e-4, atol=1e-6)


def test_a_default_scheduled_row_reduction_accumulates_in_vector_lanes(rng):
    from compiler import te
    from compiler.graph import default_schedule
    from compiler.target import Target

    # A row's mean (a layer norm's first statistic, after the add that a fused kernel holds):
    # 8 partial sums a row, each over every 8th element, then those 8 added; not 48 dependent
    # additions one element at a time.
    with Target("llvm -mcpu=haswell"):
        a = te.placeholder((5, 48), name="a")
        b = te.placeholder((5, 48), name="b")
        k = te.reduce_axis((0, 48), name="k")
        total = te.compute((5,), lambda i: te.sum(a[i, k] + b[i, k], axis=k), name="total")
        s = default_schedule([total])
        text = str(compiler.lower(s, [a, b, total]))
        f = compiler.build(s, [a, b, total])
    assert ".rf<x8>[ramp(" in text and "a<x8>[ramp(" in text, text
    x, y = (rng.uniform(-1, 1, (5, 48)).astype("float32") for _ in range(2))
    out = poisoned((5,), "float32")
    f(x, y, out)
    np.testing.assert_allclose(out, (x + y).sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("length, partials", [(32, 16), (37, 8)])
def test_a_default_scheduled_softmax_runs_row_by_row(rng, length, partials):
    from compiler import te, topi
    from compiler.graph import default_schedule
    from compiler.target import Target

    # An attention layer's softmax, scaled and masked first (no template tunes that kernel): one
    # loop over the rows, each row's max and sum taken inside it and its exp computed once, not
    # a pass over every row for each statistic with the exp computed twice. A row that vectors
    # do not tile (a ViT's 197) runs in vectors too, its last one partial (masked).
    with Target("llvm -mcpu=haswell"):
        x = te.placeholder((2, 3, 4, length), name="x")
        mask = te.placeholder((2, 1, 1, length), name="mask")
        scores = te.compute(x.shape, lambda b, h, i, j: x[b, h, i, j] * 0.25 + mask[b, 0, 0, j],
                            name="scores")
        y = topi.nn.softmax(scores, axis=3)
        s = default_schedule([y])
        text = str(compiler.lower(s, [x, mask, y]))
        f = compiler.build(s, [x, mask, y])
    top = [line for line in text.splitlines() if line.startswith("  ") and not line.startswith("   ")]
    assert len(top) == 1 and top[0].lstrip().startswith("for "), text
    assert f".rf<x{partials}>" in text and "T_softmax_norm[ramp(" in text, text
    assert text.count("exp(") == (1 if length % 8 == 0 else 2), text  # (and once for the last vector)
    # a row's exps are multiplied by one reciprocal of their sum: no vector division
    assert not re.search(r"\bvdivp[sd]\b", f.get_source("asm"))
    a = rng.uniform(-3, 3, (2, 3, 4, length)).astype("float32")
    m = rng.uniform(-3, 3, (2, 1, 1, length)).astype("float32")
    out = poisoned((2, 3, 4, length), "float32")
    f(a, m, out)
    z = a * 0.25 + m
    want = np.exp(z - z.max(axis=3, keepdims=True))
    np.testing.assert_allclose(out, want / want.sum(axis=3, keepdims=True), rtol=1e-5, atol=1e-6)


def test_a_default_scheduled_winograd_convolution_computes_its_input_transform_once(rng):
    from compiler import te, topi
    from compiler.graph import default_schedule
    from compiler.target import Target
    from compiler.topi.nn.winograd import conv2d_winograd_nchwc_numpy

    # The input transform (36 positions, each a sum over six rows of six terms) and its rows are
    # computed at the root, once each: inlined into the products, they were computed again for
    # every output channel. The tile of the padded input, a few dozen nodes, is still inlined,
    # as a convolution's padding is.
    with Target("llvm -mcpu=haswell"):
        x = te.placeholder((1, 2, 10, 9, 8), name="x")
        u = te.placeholder((36, 2, 16, 8), name="u")
        y = topi.nn.conv2d_winograd_nchwc(x, u, (1, 1, 1, 1), 4, 8)
        s = default_schedule([y])
        text = str(compiler.lower(s, [x, u, y]))
        f = compiler.build(s, [x, u, y])
    allocated = set(re.findall(r"allocate (\w+)", text))
    assert {"winograd_V", "winograd_V_rows"} <= allocated and "winograd_V_tile" not in allocated, text
    data = rng.uniform(-1, 1, (1, 2, 10, 9, 8)).astype("float32")
    weights = rng.uniform(-1, 1, (36, 2, 16, 8)).astype("float32")
    out = poisoned((1, 2, 10, 9, 8), "float32")
    f(data, weights, out)
    want = conv2d_winograd_nchwc_numpy(data, weights, (1, 1, 1, 1), 4, 8)
    assert_written(out, want.astype("float32"), rtol=1e-4, atol=1e-4)

    # a padded convolution's padding stays inlined into its reduction
    with Target("llvm -mcpu=haswell"):
        a = te.placeholder((1, 3, 10, 9), name="a")
        w = te.placeholder((4, 3, 3, 3), name="w")
        c = topi.nn.conv2d_nchw(a, w, 1, 1, 1)
        text = str(compiler.lower(default_schedule([c]), [a, w, c]))
    assert not re.findall(r"allocate (\w+)", text), text


def test_a_default_scheduled_transpose_copies_tiles_in_vector_registers(rng):
    from compiler.graph import default_schedule, kernel_tensors, prepare
    from compiler.graph.kernels import keeps_last_axis
    from compiler.target import Target

    # an attention layer's keys as torch exports them: taken from one projection by index, split
    # into heads, moved to (heads, dim, sequence) and scaled. Each vector of the output holds one
    # element of each of 8 rows of the input: the tiles gather them in registers, where a
    # vectorized copy would gather a lane at a time
    seq, heads, dim = 16, 2, 16
    b = GraphBuilder()
    x = b.op("reshape", b.input("qkv", (seq, 3 * heads * dim)), newshape=(1, seq, 1, 3, heads * dim))
    x = b.op("reshape", b.op("transpose", x, axes=(3, 1, 2, 0, 4)), newshape=(3, seq, 1, heads * dim))
    keys = b.op("take", x, b.const("which", np.array(1, "int64")), axis=0)
    keys = b.op("transpose", b.op("reshape", keys, newshape=(seq, heads, dim)), axes=(1, 0, 2))
    keys = b.op("transpose", b.op("reshape", keys, newshape=(1, heads, seq, dim)), axes=(0, 1, 3, 2))
    scaled = b.op("multiply", keys, b.const("scale", np.array([0.25], "float32")))
    graph = b.finish(b.op("reshape", scaled, newshape=(heads, dim, seq)))
    with Target("llvm -mcpu=haswell"):  # 8 float lanes: 8 x 8 tiles
        (kernel,) = prepare(graph).nodes
        params, (out,) = kernel_tensors(kernel)
        s = default_schedule([out], keeps_last_axis(kernel))  # as the model's build calls it
        text = str(compiler.lower(s, [*params, out]))
        module = build_graph(graph)
    assert text.count("call_extern('autotune_transpose'") == 1, text
    data = rng.uniform(-1, 1, (seq, 3 * heads * dim)).astype("float32")
    y = poisoned((heads, dim, seq), "float32")
    module(data, y)
    want = data[:, heads * dim:2 * heads * dim].reshape(seq, heads, dim).transpose(1, 2, 0) * 0.25
    np.testing.assert_array_equal(y, want)


def test_an_injective_kernel_on_channel_blocks_loads_whole_vectors(rng):
    from compiler import te
    from compiler.graph import default_schedule
    from compiler.target import Target

    with Target("llvm -mcpu=haswell"):  # 8 float lanes: a block of 16 channels is two vectors
        x = te.placeholder((1, 2, 6, 6, 16), name="x")
        y = te.compute((1, 2, 3, 3, 16), lambda n, c, h, w, b: x[n, c, 2 * h, 2 * w, b], name="y")
        s = default_schedule([y])
        text = str(compiler.lower(s, [x, y]))
        f = compiler.build(s, [x, y])
    # every other pixel, each pixel's block in two contiguous vector loads, not a gather of 16
    assert "x<x8>[ramp(" in text and ", 1, 8)]" in text
    data = rng.uniform(-1, 1, (1, 2, 6, 6, 16)).astype("float32")
    out = poisoned((1, 2, 3, 3, 16), "float32")
    f(data, out)
    np.testing.assert_array_equal(out, data[:, :, ::2, ::2, :])


def test_blocks_narrower_than_a_vector_are_copied_a_short_vector_each(rng):
    from compiler import te
    from compiler.graph import default_schedule
    from compiler.graph.op import get_op
    from compiler.graph.ops.layout import to_blocks
    from compiler.target import Target

    # From blocks of 16 channels to blocks of 4 (a grouped convolution's input) on 16 lanes: a
    # vector of 16 would take four blocks from four places; each block is one vector of 4.
    cpu = next(c for c in CPUS if "avx512f" in c.features)
    with Target(cpu.target):
        x = te.placeholder((1, 2, 5, 6, 16), name="x")
        (y,) = get_op("layout_transform").compute([x], {"src_layout": "NCHW16c", "dst_layout": "NCHW4c"})
        s = default_schedule([y])
        text = str(compiler.lower(s, [x, y]))
        f = compiler.build(s, [x, y])
    assert ", 1, 4)]" in text and ", 1, 16)]" not in text, text
    if cpu.runs_here():
        data = rng.uniform(-1, 1, (1, 32, 5, 6)).astype("float32")
        out = poisoned((1, 8, 5, 6, 4), "float32")
        f(to_blocks(data, 16), out)
        np.testing.assert_array_equal(out, to_blocks(data, 4))


def _vector_loads(mod) -> dict[str, list]:
    """The vector loads of a lowered kernel (an IRModule) by buffer: ``{name: [index, ...]}``."""
    from compiler.tir.analysis import collect
    from compiler.tir.expr import BufferLoad

    loads: dict[str, list] = {}
    for _, func in mod.items():
        for load in collect(func.body, lambda n: isinstance(n, BufferLoad) and n.lanes > 1):
            loads.setdefault(load.buffer.name, []).extend(load.indices)
    return loads


@pytest.mark.parametrize("channels, size, threads_take", [(58, 28, 58), (6, 7, None), (2, 100, 2 * 1250)],
                         ids=["58 channels at 28x28", "6 at 7x7", "2 at 100x100"])
def test_a_channel_shuffle_is_copied_plane_by_plane_in_whole_vectors(rng, channels, size, threads_take):
    from compiler.graph import default_schedule, kernel_tensors, prepare
    from compiler.target import Target
    from compiler.tir.analysis import collect
    from compiler.tir.expr import Ramp
    from compiler.tir.stmt import For, ForKind

    # ShuffleNetV2's glue: two halves joined, their channels interleaved, and the second half
    # taken. Each output plane is one input plane: its pixels, fused, are whole vectors loaded
    # at one address, where vectors across planes would gather a lane at a time
    b = GraphBuilder()
    kept, branch = b.input("kept", (1, channels, size, size)), b.input("branch", (1, channels, size, size))
    joined = b.op("concatenate", kept, branch, axis=1)
    pairs = b.op("reshape", joined, newshape=(1, 2, channels, size, size))
    shuffled = b.op("reshape", b.op("transpose", pairs, axes=(0, 2, 1, 3, 4)),
                    newshape=(1, 2 * channels, size, size))
    half = b.op("strided_slice", shuffled, begin=(0, channels, 0, 0), end=(1, 2 * channels, size, size),
                strides=(1, 1, 1, 1))
    graph = b.finish(half)
    with Target("llvm -mcpu=haswell"):  # 8 float lanes: a 7x7 plane is 6 vectors and a masked one
        (kernel,) = prepare(graph).nodes
        params, (out,) = kernel_tensors(kernel)
        s = default_schedule([out])
        func = compiler.lower(s, [*params, out])
        module = build_graph(graph)
    loads = _vector_loads(func)
    assert set(loads) == {"p0", "p1"}, func
    assert all(isinstance(i, Ramp) and i.stride.value == 1 for i in loads["p0"] + loads["p1"]), func
    # threads take planes, or where the planes are few, pieces of planes (vectors of 8 here)
    parallel = [loop.extent.value for _, f in func.items()
                for loop in collect(f.body, lambda n: isinstance(n, For) and n.kind == ForKind.PARALLEL)]
    assert parallel == ([threads_take] if threads_take else []), func
    a, c = (rng.uniform(-1, 1, (1, channels, size, size)).astype("float32") for _ in range(2))
    y = poisoned((1, channels, size, size), "float32")
    module(a, c, y)
    both = np.concatenate([a, c], axis=1).reshape(1, 2, channels, size, size)
    want = both.transpose(0, 2, 1, 3, 4).reshape(1, 2 * channels, size, size)[:, channels:]
    np.testing.assert_array_equal(y, want)


def test_a_kernel_reading_blocks_into_nchw_reads_them_at_a_stride(rng):
    from compiler import te
    from compiler.graph import default_schedule
    from compiler.target import Target
    from compiler.tir.expr import Ramp

    # Blocks of 4 channels joined to NCHW data (a concatenation after a layer that ran on
    # blocks): along a 7x7 plane, the NCHW input is read at consecutive addresses and the
    # blocked one 4 apart, each address a multiply-add, not divisions of each lane's own
    with Target("llvm -mcpu=haswell"):
        x = te.placeholder((1, 2, 7, 7, 4), name="x")
        z = te.placeholder((1, 5, 7, 7), name="z")
        y = te.compute((1, 13, 7, 7), lambda n, c, h, w: te.if_then_else(
            c < 8, x[n, te.min(c, 7) // 4, h, w, te.min(c, 7) % 4], z[n, te.max(c - 8, 0), h, w]), name="y")
        s = default_schedule([y])
        func = compiler.lower(s, [x, z, y])
        f = compiler.build(s, [x, z, y])
    loads = _vector_loads(func)
    assert {i.stride.value for i in loads["x"] if isinstance(i, Ramp)} == {4}, func
    assert all(isinstance(i, Ramp) for i in loads["x"]), func
    assert all(isinstance(i, Ramp) and i.stride.value == 1 for i in loads["z"]), func
    blocks = rng.uniform(-1, 1, (1, 2, 7, 7, 4)).astype("float32")
    plain = rng.uniform(-1, 1, (1, 5, 7, 7)).astype("float32")
    out = poisoned((1, 13, 7, 7), "float32")
    f(blocks, plain, out)
    np.testing.assert_array_equal(out, np.concatenate([blocks.transpose(0, 1, 4, 2, 3).reshape(1, 8, 7, 7),
                                                      plain], axis=1))


@pytest.mark.parametrize("block, width, height", [(16, 12, 3), (8, 40, 3), (32, 7, 3), (8, 14, 14)])
@pytest.mark.parametrize("into_blocks", [False, True], ids=["blocks to NCHW", "NCHW to blocks"])
def test_layout_transforms_between_nchw_and_blocks_copy_transposed_tiles(rng, block, width, height,
                                                                          into_blocks):
    from compiler import te
    from compiler.graph import default_schedule
    from compiler.graph.op import get_op
    from compiler.graph.ops.layout import to_blocks
    from compiler.target import Target

    # A feature map leaving the blocked region (a model's output), or entering it where a
    # layer's channels were no whole number of blocks (ShuffleNetV2's 232): each block's row of
    # pixels is a tile of channels by columns, transposed in registers, not gathered a lane at a
    # time. 14 rows of 232 channels at 14x14 make enough work for the threads.
    cpu = next(c for c in CPUS if "avx512f" in c.features)
    channels = 29 * block if height == 14 else 2 * block
    plain_shape = (1, channels, height, width)
    blocked_shape = (1, channels // block, height, width, block)
    layouts = ["NCHW", f"NCHW{block}c"] if into_blocks else [f"NCHW{block}c", "NCHW"]
    with Target(cpu.target):
        x = te.placeholder(plain_shape if into_blocks else blocked_shape, name="x")
        (y,) = get_op("layout_transform").compute([x], {"src_layout": layouts[0], "dst_layout": layouts[1]})
        s = default_schedule([y])
        text = str(compiler.lower(s, [x, y]))
        f = compiler.build(s, [x, y])
    assert "call_extern('autotune_transpose'" in text, text
    assert ("parallel" in text) == (height == 14), text
    if cpu.runs_here():
        data = rng.uniform(-1, 1, plain_shape).astype("float32")
        out = poisoned(blocked_shape if into_blocks else plain_shape, "float32")
        f(data if into_blocks else to_blocks(data, block), out)
        np.testing.assert_array_equal(out, to_blocks(data, block) if into_blocks else data)


# (image, output size, antialias, the source rows each output row mixes): a segmentation head's
# classes upsampled 8x; an image shrunk 4x with antialiasing, its stretched triangle reaching 4
# source rows either side, a window of 9
_RESIZED_ROWS = {"up": ((1, 10, 6, 7), (48, 56), 0, 2), "antialiased": ((1, 16, 96, 112), (24, 28), 1, 9)}


@pytest.mark.parametrize("block", [None, 8], ids=["NCHW", "from blocks of 8"])
@pytest.mark.parametrize("case", list(_RESIZED_ROWS))
def test_a_bilinear_resize_mixes_each_output_rows_source_rows_once(rng, block, case):
    from compiler import te, topi
    from compiler.graph import default_schedule
    from compiler.graph.op import get_op
    from compiler.graph.ops.layout import to_blocks
    from compiler.target import Target

    # Each output row's source rows are mixed once, inside the parallel loop over the output's
    # rows (and, from blocks, written NCHW in the same kernel), each output pixel mixing its
    # pixels of those, not every pixel of the input; the tables of first pixels and weights are
    # computed once, before.
    (n, c, h, w), size, antialias, mixed = _RESIZED_ROWS[case]
    cpu = next(c for c in CPUS if "avx512f" in c.features)
    shape = (n, c, h, w) if block is None else (n, c // block + (c % block > 0), h, w, block)
    plain = (n, shape[1] * (block or 1), h, w)
    with Target(cpu.target):
        x = te.placeholder(shape, name="x")
        layout = "NCHW" if block is None else f"NCHW{block}c"
        (y,) = get_op("image.resize2d").compute([x], {"size": size, "layout": layout, "antialias": antialias})
        if block is not None:
            (y,) = get_op("layout_transform").compute([y], {"src_layout": layout, "dst_layout": "NCHW"})
        s = default_schedule([y])
        text = str(compiler.lower(s, [x, y]))
        f = compiler.build(s, [x, y])
    parallel = text.index(f"in range({plain[1] * size[0]}) parallel:")  # channels x output rows
    assert text.index("T_resize2d_yw[") < parallel < text.index("T_resize2d_rows["), text
    assert text.count("x[") == mixed, text  # the source rows, each read once
    if cpu.runs_here():
        data = rng.uniform(-1, 1, plain).astype("float32")
        out = poisoned((*plain[:2], *size), "float32")
        f(data if block is None else to_blocks(data, block), out)
        expected = topi.testing.resize2d_python(data, size, antialias=bool(antialias))
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduce", [False, True], ids=["injective", "blocked pooling"])
def test_a_channel_blocked_output_is_split_over_the_threads_by_its_rows(rng, reduce):
    from compiler import te
    from compiler.graph import default_schedule
    from compiler.target import Target

    # The threads take ranges of rows of every channel block, as a convolution split by height
    # writes its output and its readers split by height read it; not ranges of channel blocks.
    with Target("llvm -mcpu=haswell"):
        x = te.placeholder((1, 4, 12, 12, 8), name="x")
        if reduce:
            k = te.reduce_axis((0, 2), name="k")
            y = te.compute((1, 4, 6, 6, 8),
                           lambda n, c, h, w, b: te.max(x[n, c, 2 * h + k, 2 * w, b], axis=k), name="y")
        else:
            y = te.compute((1, 4, 6, 6, 8), lambda n, c, h, w, b: x[n, c, 2 * h, 2 * w, b], name="y")
        s = default_schedule([y], vector_last=reduce)
        text = str(compiler.lower(s, [x, y]))
        f = compiler.build(s, [x, y])
    assert "for n.h.fused.c.fused.w.fused" in text, text
    data = rng.uniform(-1, 1, (1, 4, 12, 12, 8)).astype("float32")
    out = poisoned((1, 4, 6, 6, 8), "float32")
    f(data, out)
    expected = np.maximum(data[:, :, 0::2, ::2], data[:, :, 1::2, ::2]) if reduce else data[:, :, ::2, ::2]
    np.testing.assert_array_equal(out, expected)


@pytest.fixture(scope="module")
def cnn_with_scratch():
    """A residual CNN whose kernels have scratch (padded inputs) and parallel loops, compiled: the
    graph and its module."""
    graph = residual_cnn(np.random.default_rng(4), channels=16, size=40)
    return graph, build_graph(graph, "llvm")


@pytest.mark.xdist_group("cnn_with_scratch")  # one worker builds the model for both
def test_the_kernels_take_their_scratch_from_the_workspace(tmp_path, cnn_with_scratch):
    """A kernel's blocks outside its parallel loops (padded inputs, here) come from the planned
    workspace: a C program whose ``aligned_alloc`` counts the calls made outside parallel
    regions sees none while the model runs, and the model still computes the graph."""
    graph, module = cnn_with_scratch
    assert module.get_source("ll").count("__autotune_scratch_alloc") > 0  # the graph has scratch
    assert any(k["scratch_bytes"] > 0 for k in model_info(module)["kernels"])
    lib = tmp_path / "net.so"
    module.export_library(lib)
    (x_value,), (y_value,) = graph.inputs, graph.outputs
    x = np.random.default_rng(6).uniform(-1, 1, x_value.shape).astype("float32")
    x.tofile(tmp_path / "x.bin")
    source = tmp_path / "main.c"
    source.write_text(textwrap.dedent("""
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <omp.h>
        #include <stdint.h>
        #include <stdio.h>
        #include <stdlib.h>
        static long outside;
        void *aligned_alloc(size_t align, size_t size) {
            static void *(*real)(size_t, size_t);
            if (!real) real = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
            if (!omp_in_parallel()) __atomic_add_fetch(&outside, 1, __ATOMIC_RELAXED);
            return real(align, size);
        }
        typedef void (*entry_fn)(void **, int64_t *);
        int main(int argc, char **argv) {
            void *lib = dlopen(argv[1], RTLD_NOW);
            if (!lib) { fprintf(stderr, "%s\\n", dlerror()); return 2; }
            entry_fn run = (entry_fn)dlsym(lib, "run");
            long n_in = atol(argv[3]), n_out = atol(argv[4]);
            float *x, *y;
            if (posix_memalign((void **)&x, 64, n_in * 4)) return 3;
            if (posix_memalign((void **)&y, 64, n_out * 4)) return 3;
            FILE *f = fopen(argv[2], "rb");
            if (fread(x, sizeof(float), n_in, f) != (size_t)n_in) return 4;
            void *buffers[2] = {x, y};
            outside = 0;
            run(buffers, NULL);
            run(buffers, NULL);
            printf("%ld\\n", outside);
            for (long i = 0; i < n_out; i++) printf("%.9g\\n", y[i]);
            return 0;
        }
    """))
    exe = tmp_path / "main"
    subprocess.run(["cc", "-O1", "-fopenmp", "-rdynamic", "-o", str(exe), str(source), "-ldl"], check=True)
    env = dict(os.environ, OMP_NUM_THREADS="2")
    command = [str(exe), str(lib), str(tmp_path / "x.bin"), str(x.size), str(y_value.type.size)]
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout.split()
    assert out[0] == "0", f"{out[0]} blocks allocated outside parallel regions while the model ran"
    np.testing.assert_allclose(np.array(out[1:], dtype="float32"), evaluate(graph, [x])[0].ravel(),
                               rtol=1e-4, atol=1e-6)


@pytest.mark.xdist_group("cnn_with_scratch")  # one worker builds the model for both
def test_calls_from_two_threads_take_turns(cnn_with_scratch):
    """A model's workspace and its kernels' scratch are the library's own, one set per loaded
    module: calls from two Python threads at once (ctypes lets go of the GIL) take turns rather
    than overwrite each other's intermediates."""
    import threading

    graph, module = cnn_with_scratch
    (x_value,), (y_value,) = graph.inputs, graph.outputs
    inputs = [np.random.default_rng(seed).uniform(-1, 1, x_value.shape).astype("float32") for seed in (1, 2)]
    expected = [evaluate(graph, [x])[0] for x in inputs]
    wrong = []

    def calls(k: int) -> None:
        out = np.empty(y_value.shape, y_value.dtype)
        for _ in range(150):
            out.fill(np.nan)
            module(inputs[k], out)
            if not np.allclose(out, expected[k], rtol=1e-4, atol=1e-6):
                wrong.append(k)

    threads = [threading.Thread(target=calls, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, f"{len(wrong)} of 300 calls computed another call's intermediates"
