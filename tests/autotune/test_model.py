"""Models through the tuner: the tasks of a graph, and the graph built with the log's configs."""

from __future__ import annotations

import logging
import sqlite3

import numpy as np
import pytest
from graph_models import assert_computes_graph, conv, residual_cnn, weights
from helpers import poisoned

import autotune
import compiler
import db
from autotune.model import MODEL_TIMING, duration_text, model_timing
from autotune.selection import workload_label
from autotune.tuning import MODEL_INPUT
from compiler.graph import GraphBuilder, evaluate, model_info
from compiler.graph.layout import panel_width
from compiler.simd import vector_lanes
from measure import LocalRunner, MeasureOptions


def _panel(units: int) -> int:
    """The width a dense layer's weight is packed at on this host (in the tasks' arguments)."""
    return panel_width(units, vector_lanes("float32"))


@pytest.fixture(scope="module")
def graph():
    # 6 channels: no whole vector on any CPU, so the convolutions stay in NCHW whatever the host
    return residual_cnn(np.random.default_rng(11), channels=6, size=12)


def test_a_batched_matmul_with_transposed_operands_is_a_tuning_task(rng):
    # TVM's batch_matmul takes B transposed: such a product is the template's task all the same,
    # its operand moved by a transpose (folded into a constant one)
    b = GraphBuilder()
    x = b.input("x", (2, 8, 5))
    w = b.const("w", rng.uniform(-1, 1, (2, 16, 8)).astype("float32"))
    y = b.op("nn.batch_matmul", x, w, transpose_a=True, transpose_b=True)
    graph = b.finish(b.op("nn.batch_matmul", b.op("tanh", y), y, transpose_b=True))
    tasks = autotune.extract_tasks(graph, "llvm")
    assert sorted(t.task.workload_name.split("@")[0] for t in tasks) == [
        "batch_matmul(2,5,16,5,float32)", "batch_matmul(2,5,8,16,float32)"]
    module = autotune.build_model(graph, "llvm")
    data = rng.uniform(-1, 1, (2, 8, 5)).astype("float32")
    y = np.einsum("bkm,bnk->bmn", data, w.data)
    want = np.tanh(y) @ y.transpose(0, 2, 1)
    np.testing.assert_allclose(compiler.graph.run(module, data)[0], want, rtol=1e-5, atol=1e-5)


def test_a_batched_matmul_by_a_shared_operand_is_one_product_of_the_batches_rows(rng):
    b = GraphBuilder()
    x, shared = b.input("x", (3, 4, 8)), b.input("shared", (1, 8, 16))
    graph = b.finish(b.op("nn.batch_matmul", x, shared))
    tasks = autotune.extract_tasks(graph, "llvm")
    assert [t.task.workload_name.split("@")[0] for t in tasks] == ["batch_matmul(1,12,8,16,float32)"]
    module = autotune.build_model(graph, "llvm")
    data = [rng.uniform(-1, 1, (3, 4, 8)).astype("float32"), rng.uniform(-1, 1, (1, 8, 16)).astype("float32")]
    np.testing.assert_allclose(compiler.graph.run(module, *data)[0], data[0] @ data[1], rtol=1e-5, atol=1e-5)


def test_tasks_are_the_deployed_kernels_with_their_weights(graph):
    tasks = autotune.extract_tasks(graph, "llvm")
    by_name = {t.task.workload_name.split("@")[0]: t.weight for t in tasks}
    assert by_name == {
        "conv2d_nchw(1,3,12,12,6,3,3,1,1,1,float32,(bias,relu))": 1,
        "conv2d_nchw(1,6,12,12,6,3,3,1,1,1,float32,(bias,relu))": 2,
        "conv2d_nchw(1,6,12,12,6,3,3,1,1,1,float32,(bias,add,relu))": 2,
        "pool2d(1,6,12,12,2,2,2,0,max,float32)": 1,
        f"dense_pack(1,6,10,{_panel(10)},float32,(bias))": 1,
        "softmax(1,10,float32)": 1,
    }
    assert [u.split(" ")[1] for u in tasks.untemplated] == ["(nn.global_avg_pool2d)"]
    # the flatten before the dense layer is a view of the pooled image: the build runs no kernel for it
    assert len(tasks.views) == 1 and tasks.views[0].startswith("fused_reshape")
    report = tasks.report()
    assert ("9 kernels: 8 run 6 tuning tasks, 1 has no template (default schedule); 1 reshape is a view"
            in report)
    assert "default schedule: " in report
    # the count the report gives is the count of kernel calls the built model makes
    assert len(model_info(autotune.build_model(graph, "llvm"))["calls"]) == tasks.kernels == 9


def test_blocked_convolutions_are_tasks_of_the_blocked_template():
    graph = residual_cnn(np.random.default_rng(11), channels=16, size=12)
    tasks = autotune.extract_tasks(graph, "llvm -mcpu=haswell")  # 8 float lanes: blocks of 16
    names = [t.task.workload_name.split("@")[0] for t in tasks]
    # the image's 3 channels stay direct; the 16-channel 3x3 layers run by Winograd's F(2x2, 3x3)
    # (F(4x4) would leave 9 tiles of 12x12)
    assert names[:3] == ["conv2d_nchwc(1,3,12,12,16,3,3,1,1,1,1,16,float32,(bias,relu))",
                         "conv2d_nchwc_winograd(1,16,12,12,16,1,2,16,16,16,float32,(bias,relu))",
                         "conv2d_nchwc_winograd(1,16,12,12,16,1,2,16,16,16,float32,(bias,add,relu))"]
    assert [t.weight for t in tasks][:3] == [1, 2, 2]
    untemplated = " ".join(tasks.untemplated)
    assert "layout_transform" in untemplated and "nn.pool2d_nchwc" in untemplated


def test_a_pointwise_convolution_is_tuned_and_built_as_one_row_of_its_plane():
    rng = np.random.default_rng(5)
    b = GraphBuilder("bottleneck")
    x = b.input("x", (1, 16, 6, 8))
    h = b.op("nn.relu", conv(b, rng, x, 16))
    y = b.op("nn.relu", b.op("add", conv(b, rng, h, 32, k=1, pad=0), conv(b, rng, x, 32, k=1, pad=0)))
    graph = b.finish(conv(b, rng, y, 16, k=1, stride=2, pad=0))  # strided: a pointwise one after a subsample
    target = "llvm -mcpu=haswell"  # 8 float lanes: blocks of 16
    names = [t.task.workload_name.split("@")[0] for t in autotune.extract_tasks(graph, target)]
    # the 6x8 plane is one row of 48 columns (the same memory); the strided one reads its 3x4 pixels
    assert names == ["conv2d_nchwc(1,16,6,8,16,3,3,1,1,1,8,16,float32,(relu))",  # a 3x3 one keeps its rows
                     "conv2d_nchwc(1,16,1,48,32,1,1,1,0,1,8,16,float32)",
                     "conv2d_nchwc(1,16,1,48,32,1,1,1,0,1,16,16,float32,(add,relu))",
                     "conv2d_nchwc(1,32,1,12,16,1,1,1,0,1,16,16,float32)"]
    module = autotune.build_model(graph, target)
    data = rng.uniform(-1, 1, (1, 16, 6, 8)).astype("float32")
    out = poisoned((1, 16, 3, 4), "float32")
    module(data, out)
    np.testing.assert_allclose(out, evaluate(graph, [data])[0], rtol=1e-4, atol=1e-5)


def test_an_untuned_build_uses_default_configs_and_says_so(graph, caplog):
    with caplog.at_level(logging.WARNING, logger="autotune.model"):
        module = autotune.build_model(graph, "llvm")
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "6 kernel(s)" in warnings[0] and "(no log)" in warnings[0]
    sources = sorted({k["schedule"] for k in model_info(module)["kernels"]})
    assert sources == ["conv2d_nchw: default config", "default schedule", "dense_pack: default config",
                       "pool2d: default config", "softmax: default config"]
    assert_computes_graph(module, graph, 0)


def test_a_tuned_kernel_is_built_with_its_logged_config(graph, tmp_path):
    tasks = autotune.extract_tasks(graph, "llvm")
    target = next(t for t in tasks if "add" in t.task.workload_name)
    log = tmp_path / "model.db"
    with MeasureOptions() as options:
        result = autotune.tune(target.task, trials=4, tuner="random", db=log, measure_option=options,
                               batch_size=4, seed=1, progress=False)
    assert result.best_config is not None
    module = autotune.build_model(graph, "llvm", db=log, transfer=False)
    kernels = model_info(module)["kernels"]
    assert [k["schedule"] for k in kernels].count("conv2d_nchw: tuned") == 1
    (tuned,) = [k for k in kernels if k["schedule"] == "conv2d_nchw: tuned"]
    assert tuned["workload"] == target.task.workload_key  # the log's key of the kernel's figures
    assert {k["workload"] for k in kernels if "workload" in k} == {t.task.workload_key for t in tasks}
    assert all("workload" not in k for k in kernels if k["schedule"] == "default schedule")
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 12, 12)).astype("float32")
    np.testing.assert_allclose(compiler.graph.run(module, x)[0], evaluate(graph, [x])[0],
                               rtol=1e-4, atol=1e-6)


def test_a_model_build_says_which_configs_figures_of_other_code_chose(graph, tmp_path, caplog):
    task = next(t.task for t in autotune.extract_tasks(graph, "llvm") if "add" in t.task.workload_name)
    log = tmp_path / "model.db"
    with MeasureOptions() as options:
        autotune.tune(task, trials=2, tuner="random", db=log, measure_option=options, batch_size=2, seed=1,
                      remeasure=False, progress=False)
    with db.open(log) as today:  # its measurements, as an earlier version of the code made them
        older = [db.Record(**{**r.to_dict(), "code_version": "0.0.9+older"}) for r in today.records()]
    with db.open(tmp_path / "older.db") as earlier:
        earlier.add(older)

    def stale_warnings(where):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="autotune.model"):
            module = autotune.build_model(graph, "llvm", db=where, transfer=False)
        assert [k["schedule"] for k in model_info(module)["kernels"]].count("conv2d_nchw: tuned") == 1
        return [r.getMessage() for r in caplog.records if "other code" in r.getMessage()]

    assert stale_warnings(log) == []
    (warning,) = stale_warnings(tmp_path / "older.db")
    assert warning.startswith("1 kernel(s) of ") and "(code version '0.0.9+older'; today " in warning


def test_a_model_build_names_its_borrowed_configs_in_one_warning(graph, tmp_path, caplog):
    tasks = autotune.extract_tasks(graph, "llvm")
    tuned = next(t.task for t in tasks if t.task.workload_name.startswith("conv2d_nchw(1,6,12,12,6,3,3,1,1,1,"
                                                                         "float32,(bias,relu))"))
    log = tmp_path / "model.db"
    with MeasureOptions() as options:
        autotune.tune(tuned, trials=2, tuner="random", db=log, measure_option=options, batch_size=2,
                      seed=1, progress=False)
    with caplog.at_level(logging.INFO):
        module = autotune.build_model(graph, "llvm", db=log)
    # the 3-channel layer, of the same template and epilogue, borrows the config; the log's own
    # lookup says so at INFO, and the build names it once, in its one warning
    schedules = [k["schedule"] for k in model_info(module)["kernels"]]
    assert sum("borrowed from" in s for s in schedules) == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
                and r.name in ("autotune.model", "autotune.transfer")]
    assert len(warnings) == 1 and warnings[0].count("(borrowed from") == 1, warnings
    assert f"(borrowed from {workload_label(tuned.name, tuned.args)}" in warnings[0]
    assert sum("has no tuning record" in r.getMessage() for r in caplog.records
               if r.levelno == logging.INFO) == 1
    assert_computes_graph(module, graph, 0)


def test_tune_model_spends_one_budget_over_every_task_and_a_rerun_finishes_it(graph, tmp_path):
    log = tmp_path / "model.db"
    tasks = autotune.extract_tasks(graph, "llvm")
    with MeasureOptions() as options:
        result = autotune.tune_model(tasks, trials=2 * len(tasks), tuner="random", db=log,
                                     measure_option=options, seed=1, progress=False, warm_start=0)
        assert [r.trials for r in result.results] == [2] * len(tasks)  # one batch of the share each
        want = sum(t.weight * r.best_cost for t, r in zip(tasks, result.results))
        assert result.estimated_latency == pytest.approx(want) and not result.missing
        report = result.report()
        assert all(t.task.workload_name in report for t in tasks)
        assert f"estimated latency of the tuned kernels {duration_text(want)}" in report
        # The budget counts the log's trials: the same call again has nothing left to do.
        again = autotune.tune_model(graph, "llvm", trials=2 * len(tasks), tuner="random", db=log,
                                    measure_option=options, seed=1, progress=False)
    assert sum(r.trials for r in again.results) == 0
    assert again.estimated_latency == pytest.approx(result.estimated_latency, rel=0.5)
    module = autotune.build_model(graph, "llvm", db=log)
    assert autotune.measure_latency(module, repeat=3, min_repeat_ms=1) > 0
    for bad in ("model.onnx", None):  # a path is not a graph: the error says how to make one
        with pytest.raises(autotune.AutotuneError, match="from_onnx"):
            autotune.tune_model(bad, "llvm", trials=2, db=None)
        with pytest.raises(autotune.AutotuneError, match="from_onnx"):
            autotune.build_model(bad, "llvm")
    with pytest.raises(autotune.AutotuneError, match="no kernel with a template"):
        b = GraphBuilder("relu only")
        autotune.tune_model(b.finish(b.op("nn.relu", b.input("x", (4,)))), "llvm", trials=2, db=None)


def test_trials_another_run_made_count_up_to_each_tasks_share_of_the_budget(graph, tmp_path):
    log = tmp_path / "model.db"
    tasks = autotune.extract_tasks(graph, "llvm")
    share = 1
    with MeasureOptions() as options:
        # One task tuned on its own first (as for another model): 3 shares of trials
        alone = autotune.tune(tasks.tasks[0], trials=3 * share, tuner="random", db=log,
                              measure_option=options, seed=1, progress=False)
        assert alone.trials == 3 * share
        result = autotune.tune_model(tasks, trials=share * len(tasks), tuner="random", db=log,
                                     measure_option=options, seed=1, progress=False, warm_start=0)
        # Its trials count as its share, not more: the other tasks still get theirs
        assert sum(r.trials for r in result.results) == share * (len(tasks) - 1)
        assert result.results[0].resumed == 3 * share
        # The same call again: the runs of this model's tasks count whole, the budget is spent
        again = autotune.tune_model(tasks, trials=share * len(tasks), tuner="random", db=log,
                                    measure_option=options, seed=1, progress=False, warm_start=0)
    assert sum(r.trials for r in again.results) == 0


def test_trials_of_a_run_logged_without_its_task_set_count_whole(graph, tmp_path):
    import sqlite3

    log = tmp_path / "model.db"
    tasks = autotune.extract_tasks(graph, "llvm")
    with MeasureOptions() as options:
        autotune.tune(tasks.tasks[0], trials=3, tuner="random", db=log, measure_option=options, seed=1,
                      progress=False)
        with sqlite3.connect(log) as conn:  # as a run logged before runs recorded their set of tasks
            conn.execute("UPDATE tuning_runs SET options = json_remove(options, '$.task_set')")
        result = autotune.tune_model(tasks, trials=len(tasks), tuner="random", db=log,
                                     measure_option=options, seed=1, progress=False, warm_start=0)
    assert sum(r.trials for r in result.results) == len(tasks) - 3


def test_tune_model_times_weights_cold_and_a_log_is_never_resumed_timed_the_other_way(graph, tmp_path):
    import db

    # two of the model's tasks: what is checked is how each run timed its tasks, not the model
    every = autotune.extract_tasks(graph, "llvm")
    tasks = autotune.ModelTasks(every[:2], every.untemplated, every.kernels)
    cold, hot = tmp_path / "cold.db", tmp_path / "hot.db"
    autotune.tune_model(tasks, trials=len(tasks), tuner="random", db=cold, seed=1, progress=False,
                        warm_start=0)
    with db.open(cold) as log:
        runs = {t.task.workload_key: log.runs_of(t.task.workload_key) for t in tasks}
        before = (log.count(), len(log.runs()))
    assert all(len(r) == 1 and r[0].options["cache_flush"] == "model" for r in runs.values())
    assert all(r[0].options["model_input"] == MODEL_INPUT for r in runs.values())
    first = tasks.tasks[0]
    # A hot run (tune's default runner) on a workload the log timed cold: refused before any record or run
    with MeasureOptions() as options, pytest.raises(autotune.AutotuneError, match="do not compare") as err:
        autotune.tune(first, trials=1, tuner="random", db=cold, measure_option=options, progress=False)
    assert workload_label(first.name, first.args) in str(err.value)
    assert "cache_flush='model'" in str(err.value)
    with db.open(cold) as log:
        assert (log.count(), len(log.runs())) == before
    # A log timed with only the weights evicted (the default before "model") is not resumed by
    # the default either, and the error says how to go on as it was timed.
    weights = tmp_path / "weights.db"
    runner = LocalRunner(number=1, repeat=10, cache_flush="weights")
    with MeasureOptions(runner=runner) as options:
        autotune.tune_model(tasks, trials=len(tasks), tuner="random", db=weights, measure_option=options,
                            seed=1, progress=False, warm_start=0)
    with pytest.raises(autotune.AutotuneError, match="cache_flush='weights'") as err:
        autotune.tune_model(tasks, trials=2 * len(tasks), tuner="random", db=weights, progress=False)
    assert "measure.LocalRunner(number=1, repeat=10, cache_flush='weights')" in str(err.value)
    with MeasureOptions() as options:  # a log tuned hot resumes hot, and refuses the model's default
        autotune.tune_model(tasks, trials=len(tasks), tuner="random", db=hot, measure_option=options,
                            seed=1, progress=False, warm_start=0)
    with pytest.raises(autotune.AutotuneError, match="--no-cache-flush"):
        autotune.tune_model(tasks, trials=2 * len(tasks), tuner="random", db=hot, progress=False)
    # A log timed "model" before its input was written by the rows of each channel block (its
    # runs do not say how) is not resumed: its figures do not compare with this timer's.
    old_model = tmp_path / "old_model.db"
    old_model.write_bytes(cold.read_bytes())
    conn = sqlite3.connect(old_model)
    with conn:
        conn.execute("UPDATE tuning_runs SET options = json_remove(options, '$.model_input')")
    conn.close()
    with pytest.raises(autotune.AutotuneError, match="equal shares of the whole buffer") as err:
        autotune.tune_model(tasks, trials=2 * len(tasks), tuner="random", db=old_model, progress=False)
    assert "tune into another log" in str(err.value)
    # Nor one timed "model" before the kernels' scratch was evicted with their weights.
    conn = sqlite3.connect(old_model)
    with conn:
        conn.execute("UPDATE tuning_runs SET options = json_set(options, '$.model_input', 2)")
    conn.close()
    with pytest.raises(autotune.AutotuneError, match="scratch .* left in the caches"):
        autotune.tune_model(tasks, trials=2 * len(tasks), tuner="random", db=old_model, progress=False)
    assert model_timing("llvm") == MODEL_TIMING and MODEL_TIMING["cache_flush"] == "model"
    assert model_timing("llvm", cache_flush=False) == {} and model_timing("cuda") == {}


def test_a_deployed_model_s_latency_splits_into_templated_kernels_the_others_and_the_executor(graph):
    module = autotune.build_model(graph, "llvm")  # no log: default configs; kernels still name their tasks
    kernels = model_info(module)["kernels"]
    times = {k["name"]: (k["calls"], 1e-6 * (i + 1)) for i, k in enumerate(kernels)}
    templated, untemplated, others = compiler.graph.split_by_template(module, times)
    # the reshape is a view of its input in the built model: the average pool is the one kernel left
    assert others == [k["name"] for k in kernels if k["schedule"] == "default schedule"] and len(others) == 1
    assert templated == pytest.approx(sum(c * s for name, (c, s) in times.items() if name not in others))
    assert untemplated == pytest.approx(sum(c * s for name, (c, s) in times.items() if name in others))
    with pytest.raises(compiler.graph.GraphError, match=f"no time for kernel '{others[0]}'"):
        compiler.graph.split_by_template(module, {k: v for k, v in times.items() if k != others[0]})

    # Runs through the profiling entry: a column per call. Per run, the sums over the kernels with
    # a template and over the others; their medians over the runs (not the sums of medians).
    calls = model_info(module)["calls"]
    runs = compiler.graph.profile_runs(module, repeat=4, min_repeat_ms=0)
    assert runs.shape[1] == len(calls) and runs.shape[0] >= 4 and (runs > 0).all()
    synthetic = np.arange(1, 3 * len(calls) + 1, dtype=np.float64).reshape(3, len(calls)) ** 2
    mine = np.array([name in others for name in calls])
    assert compiler.graph.split_runs_by_template(module, synthetic) == (
        pytest.approx(np.median(synthetic[:, ~mine].sum(axis=1))),
        pytest.approx(np.median(synthetic[:, mine].sum(axis=1))), others)
    medians = compiler.graph.kernel_medians(module, synthetic)
    for k in kernels:
        sites = [i for i, name in enumerate(calls) if name == k["name"]]
        per_call = np.median(synthetic[:, sites].sum(axis=1)) / k["calls"]
        assert medians[k["name"]] == (k["calls"], pytest.approx(per_call))
    with pytest.raises(compiler.graph.GraphError, match=f"a column per call \\({len(calls)}\\)"):
        compiler.graph.kernel_medians(module, synthetic[:, 1:])

    deployed = autotune.measure_deployed(module, repeat=3, min_repeat_ms=1)
    assert deployed.untemplated_kernels == 1 and deployed.templated > 0 and deployed.untemplated > 0
    assert deployed.measured > 0 and deployed.profiled > 0
    # the executor is the latency beyond the kernels run back to back, not beyond the parts' sum
    assert deployed.executor == pytest.approx(deployed.measured - deployed.profiled)
    line = deployed.against(deployed.templated)
    assert "(1.00x their log figures), the 1 without one " in line and "the executor " in line


def test_a_layer_norm_of_another_epsilon_is_a_task_of_its_own():
    rng = np.random.default_rng(6)
    b = GraphBuilder("norms")
    x = b.input("x", (16, 32))
    params = [b.const(name, weights(rng, 32) + 1) for name in ("g", "beta")]
    torch_s = b.op("nn.layer_norm", x, *params, axis=1, epsilon=1e-5)
    vit_s = b.op("nn.layer_norm", x, *params, axis=1, epsilon=1e-6)
    graph = b.finish(torch_s, vit_s)
    names = [t.task.workload_name.split("@")[0] for t in autotune.extract_tasks(graph, "llvm")]
    # torch's default keeps the key the template's logs have always had
    assert names == ["layer_norm(16,32,float32)", "layer_norm(16,32,float32,1e-06)"]
    module = autotune.build_model(graph, "llvm")
    data = rng.uniform(-1, 1, (16, 32)).astype("float32") * 1e-3  # small: epsilon shows
    for got, want in zip(compiler.graph.run(module, data), evaluate(graph, [data])):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_transformer_block_s_dense_layers_take_their_gelu():
    rng = np.random.default_rng(5)
    b = GraphBuilder("ffn")
    x = b.input("x", (16, 32))
    h = b.op("nn.dense", x, b.const("w1", weights(rng, 64, 32)))
    h = b.op("nn.gelu", b.op("add", h, b.const("b1", weights(rng, 64))), approximate="none")
    h = b.op("nn.dense", h, b.const("w2", weights(rng, 32, 64)))
    y = b.op("nn.layer_norm", b.op("add", b.op("add", h, b.const("b2", weights(rng, 32))), x),
             b.const("g", weights(rng, 32) + 1), b.const("beta", weights(rng, 32)), axis=1, epsilon=1e-5)
    graph = b.finish(y)
    tasks = autotune.extract_tasks(graph, "llvm")
    names = [t.task.workload_name.split("@")[0] for t in tasks]
    assert names == [f"dense_pack(16,32,64,{_panel(64)},float32,(bias,gelu))",
                     f"dense_pack(16,64,32,{_panel(32)},float32,(bias,add))",
                     "layer_norm(16,32,float32)"]
    module = autotune.build_model(graph, "llvm")
    data = rng.uniform(-1, 1, (16, 32)).astype("float32")
    np.testing.assert_allclose(compiler.graph.run(module, data)[0], evaluate(graph, [data])[0], rtol=1e-4,
                               atol=1e-5)
