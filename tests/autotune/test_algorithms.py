"""How a model's 3x3 layers run (direct or by Winograd): chosen by the caller, or timed inside the model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from graph_models import assert_computes_graph, residual_cnn

import autotune
from autotune.algorithms import layers_to_choose
from compiler.graph import GraphError, model_info, optimize, prepare
from compiler.graph.layout import DIRECT, algorithm_options

TARGET = "llvm -mcpu=haswell"  # 8 float lanes: blocks of 16 channels, whatever the host


@pytest.fixture(scope="module")
def graph():
    # 16x16 planes of 16 channels: every 3x3 layer after the stem can run by F(4x4), F(2x2) or direct
    return residual_cnn(np.random.default_rng(3), channels=16, size=16)


@pytest.fixture(scope="module")
def options(graph):
    from compiler.target import Target

    with Target(TARGET):
        return algorithm_options(optimize(graph))


def _templates(module):
    """Each fused node's template, from the model's description of its kernels."""
    return {node: k["schedule"].split(":")[0] for k in model_info(module)["kernels"] if "workload" in k
            for node in k["nodes"]}


def _fused_node_of(graph, layer, algorithms=None):
    """The name of the fused node that runs ``layer`` when ``graph`` is built with ``algorithms``."""
    (node,) = [n.name for n in prepare(graph, TARGET, algorithms=algorithms).nodes
               if any(inner.name == layer for inner in n.attrs["body"].nodes)]
    return node


def test_the_model_description_names_the_nodes_each_kernel_runs(graph, options):
    assert len(options) == 4
    assert layers_to_choose(graph, TARGET) == list(options)  # what tune-model's last line points to
    # 3 channels (the stem's input): no whole vector, so no layer of this model has a choice
    assert layers_to_choose(residual_cnn(np.random.default_rng(3), channels=3, size=16), TARGET) == []
    assert all(rule == 4 and sizes == [4, 2, DIRECT] for rule, sizes in options.values())
    module = autotune.build_model(graph, TARGET)
    info = model_info(module)
    runs = [node for k in info["kernels"] for node in k["nodes"]]
    assert len(runs) == len(set(runs)) == len(info["calls"])
    assert [len(k["nodes"]) for k in info["kernels"]] == [k["calls"] for k in info["kernels"]]
    templates = _templates(module)
    assert list(templates.values()).count("conv2d_nchwc_winograd") == 4
    assert all(templates[_fused_node_of(graph, layer)] == "conv2d_nchwc_winograd" for layer in options)


def test_a_layer_told_how_to_run_is_built_so_and_computes_the_same(graph, options):
    first, second, *_ = options
    plan = {first: DIRECT, second: 2}
    module = autotune.build_model(graph, TARGET, algorithms=plan)
    templates = _templates(module)
    assert list(templates.values()).count("conv2d_nchwc_winograd") == 3
    assert list(templates.values()).count("conv2d_nchwc") == 2  # the stem and the layer told to run direct
    assert templates[_fused_node_of(graph, first, plan)] == "conv2d_nchwc"
    assert templates[_fused_node_of(graph, second, plan)] == "conv2d_nchwc_winograd"
    assert_computes_graph(module, graph, 1)
    tasks = autotune.extract_tasks(graph, TARGET, algorithms=plan)
    names = [t.task.workload_name.split("@")[0] for t in tasks]
    assert "conv2d_nchwc(1,16,16,16,16,3,3,1,1,1,16,16,float32,(bias,relu))" in names  # the tasks built
    assert "conv2d_nchwc_winograd(1,16,16,16,16,1,2,16,16,16,float32,(bias,add,relu))" in names
    with pytest.raises(GraphError, match="no 3x3 convolution that can run by Winograd is named 'nope'"):
        autotune.build_model(graph, TARGET, algorithms={"nope": DIRECT})
    with pytest.raises(autotune.AutotuneError, match="'fastest'"):
        autotune.build_model(graph, TARGET, algorithms="fastest")


@pytest.mark.slow
def test_each_layer_gets_its_fastest_algorithm_timed_inside_the_model(graph, options):
    choices = autotune.choose_algorithms(graph, TARGET, rounds=1, repeat=2, min_repeat_ms=1)
    assert [c.layer for c in choices.layers] == list(options)
    for c in choices.layers:
        rule, sizes = options[c.layer]
        assert c.rule == rule and sorted(c.seconds) == sorted(sizes)  # every way it can run, timed
        assert all(0 < s < 1 for s in c.seconds.values())
        assert c.seconds[c.chosen] == min(c.seconds.values())
    changed = {c.layer: c.chosen for c in choices.layers if c.chosen != c.rule}
    assert [c.layer for c in choices.changed] == list(changed)
    if changed:  # the plan stands only if the model ran faster with it
        assert choices.rule_latency > 0 and choices.chosen_latency > 0
        assert choices.algorithms == (changed if choices.chosen_latency < choices.rule_latency else {})
        assert "ran faster in the model by another algorithm" in choices.report()
    else:
        assert math.isnan(choices.rule_latency) and choices.algorithms == {}
        assert "ran fastest in the model by the rule's algorithm" in choices.report()
    assert_computes_graph(autotune.build_model(graph, TARGET, algorithms=choices.algorithms), graph, 2)


def test_build_model_measures_then_builds_with_the_choices():
    """``algorithms="measure"`` chooses (here: nothing to choose, the planes too small for
    Winograd's tiles and no log to split threads by) and builds a model that computes the graph."""
    small = residual_cnn(np.random.default_rng(4), channels=16, size=6)
    assert_computes_graph(autotune.build_model(small, TARGET, algorithms="measure"), small, 3)
