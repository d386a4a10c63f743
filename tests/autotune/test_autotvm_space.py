"""AutoTVM config spaces, written as AutoTVM code with only the imports renamed.

The expected knob lists and index orders are worked out from AutoTVM's definitions
(``python/tvm/autotvm/task/space.py``): a split lists its inner factors depth-first with
the innermost size in the outermost loop, ``[-1, f1, f0]``; an annotation lists every
combination with at most one ``vec``, the first axis varying slowest; and
``space.get(index)`` takes ``index % len(knob)`` of each knob in definition order, then
``index //= len(knob)``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import compiler as tvm
from autotune import autotvm
from compiler import te
from search_spaces import SearchSpaceError, unregister_template


def _inner(knob):
    """AutoTVM's view of split entities: [-1, inner sizes...]."""
    return [[-1, *e.size[1:]] for e in knob.entities]


def test_split_factors_lists_the_innermost_size_slowest():
    cfg = autotvm.ConfigSpace()
    cfg.define_split("tile", 8, num_outputs=3)
    assert _inner(cfg.space_map["tile"]) == [
        [-1, 1, 1], [-1, 2, 1], [-1, 4, 1], [-1, 8, 1],
        [-1, 1, 2], [-1, 2, 2], [-1, 4, 2],
        [-1, 1, 4], [-1, 2, 4],
        [-1, 1, 8]]
    # sizes are complete here: the outermost is what AutoTVM leaves as -1
    assert [list(e.size) for e in cfg.space_map["tile"].entities][:3] == [[8, 1, 1], [4, 2, 1], [2, 4, 1]]


def test_split_power2_verbose_candidate_max_factor_filter():
    cfg = autotvm.ConfigSpace()
    cfg.define_split("p2", 10, policy="power2", num_outputs=2)
    cfg.define_split("vb", 100, policy="verbose", num_outputs=2)
    cfg.define_split("cand", 16, policy="candidate", num_outputs=3,
                     candidate=[[1, 4, 4], [4, 1, 4], [-1, 2, 2]])
    cfg.define_split("mf", 64, num_outputs=2, max_factor=8)
    cfg.define_split("fl", 64, num_outputs=2, filter=lambda x: x.size[-1] <= 4)
    assert _inner(cfg.space_map["p2"]) == [[-1, 1], [-1, 2], [-1, 4], [-1, 8]]
    assert [list(e.size) for e in cfg.space_map["p2"].entities] == [[10, 1], [5, 2], [3, 4], [2, 8]]
    # 'verbose' takes divisors and powers of two in the order AutoTVM's set of them iterates
    assert [e.size[-1] for e in cfg.space_map["vb"].entities] == [
        32, 1, 2, 64, 4, 5, 100, 8, 10, 16, 50, 20, 25]
    assert [list(e.size) for e in cfg.space_map["cand"].entities] == [[1, 4, 4], [4, 1, 4], [4, 2, 2]]
    assert [e.size[-1] for e in cfg.space_map["mf"].entities] == [1, 2, 4, 8]
    assert [e.size[-1] for e in cfg.space_map["fl"].entities] == [1, 2, 4]
    assert len(cfg) == 4 * 13 * 3 * 4 * 3


def test_get_follows_autotvms_index_order():
    cfg = autotvm.ConfigSpace()
    cfg.define_split("tile_y", 8, num_outputs=2)   # 4: [-1, 1], [-1, 2], [-1, 4], [-1, 8]
    cfg.define_split("tile_x", 8, num_outputs=3)   # 10, as above
    cfg.define_knob("u", [0, 1, 2])                # 3
    assert len(cfg) == 120 and cfg.range_length == 120
    # 37 % 4 = 1 -> tile_y [-1, 2]; 37 // 4 = 9, 9 % 10 = 9 -> tile_x [-1, 1, 8]; 9 // 10 = 0 -> u = 0
    c = cfg.get(37)
    assert c.index == 37 and cfg.is_index_valid(37)
    assert list(c["tile_y"].size[1:]) == [2] and list(c["tile_x"].size[1:]) == [1, 8] and c["u"].val == 0
    # 118 = 2 + 4 * (9 + 10 * 2): tile_y [-1, 4], tile_x [-1, 1, 8], u = 2
    c = cfg.get(118)
    assert list(c["tile_y"].size[1:]) == [4] and list(c["tile_x"].size[1:]) == [1, 8] and c["u"].val == 2
    assert str(c) == "[('tile_y', [-1, 4]), ('tile_x', [-1, 1, 8]), ('u', 2)],None,118"
    assert c.get_flatten_feature().tolist() == [-1, 4, -1, 1, 8, 2]
    assert c.get_other_option() == {"u": 2}
    for index in range(len(cfg)):  # the first knob varies fastest
        c = cfg.get(index)
        assert cfg.space_map["tile_y"].entities.index(c["tile_y"]) == index % 4
        assert cfg.space_map["tile_x"].entities.index(c["tile_x"]) == index // 4 % 10
        assert c["u"].val == index // 40


def test_reorder_and_annotate_policies():
    cfg = autotvm.ConfigSpace()
    a, b, c = cfg.axis(4), cfg.axis(8), cfg.reduce_axis(2)
    cfg.define_reorder("all", [a, b, c], policy="all")
    cfg.define_reorder("id", [a, b, c], policy="identity")
    cfg.define_reorder("iv", [a, b, c], policy="interval_all", interval=(1, 3))
    cfg.define_reorder("cand", [a, b, c], policy="candidate", candidate=[[c, b, a], [a, c, b]])
    cfg.define_annotate("ann", [a, b], policy="try_unroll_vec")
    cfg.define_annotate("vec", [a, b, c], policy="try_vec")
    cfg.define_annotate("loc", [a, b, c], policy="locate_cache", num_anchor=2)
    assert [list(e.perm) for e in cfg.space_map["all"].entities] == [
        [0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]]
    assert [list(e.perm) for e in cfg.space_map["id"].entities] == [[0, 1, 2]]
    assert [list(e.perm) for e in cfg.space_map["iv"].entities] == [[0, 1, 2], [0, 2, 1]]
    assert [list(e.perm) for e in cfg.space_map["cand"].entities] == [[2, 1, 0], [0, 2, 1]]
    assert [list(e.anns) for e in cfg.space_map["ann"].entities] == [
        ["none", "none"], ["none", "unroll"], ["none", "vec"], ["unroll", "none"], ["unroll", "unroll"],
        ["unroll", "vec"], ["vec", "none"], ["vec", "unroll"]]
    assert [list(e.anns) for e in cfg.space_map["vec"].entities] == [
        ["none", "none", "none"], ["none", "none", "vec"], ["none", "vec", "none"], ["vec", "none", "none"]]
    assert [list(e.anns) for e in cfg.space_map["loc"].entities] == [[0, 1], [0, 2], [1, 2]]
    # one-hot annotations as AutoTVM's get_flatten_feature: none=0, vec=1, unroll=2 of 11
    # knob sizes 6, 1, 2, 2, 8, ...: index 2 * (6 * 1 * 2 * 2) has the first of every knob but ann's 3rd
    c = cfg.get(2 * 6 * 1 * 2 * 2)
    assert list(c["all"].perm) == [0, 1, 2] and list(c["ann"].anns) == ["none", "vec"]
    feat = c.get_flatten_feature()
    hot = feat[3 + 3 + 3 + 3:3 + 3 + 3 + 3 + 22].reshape(2, 11)
    assert hot.argmax(axis=1).tolist() == [0, 1] and hot.sum() == 2


def test_bad_knobs_raise_clear_errors():
    cfg = autotvm.ConfigSpace()
    with pytest.raises(SearchSpaceError, match="candidate"):
        cfg.define_split("c", 16, policy="candidate", num_outputs=2, candidate=[[1, 2, 8]])
    with pytest.raises(SearchSpaceError, match="outermost size is 4"):
        cfg.define_split("c", 16, policy="candidate", num_outputs=2, candidate=[[3, 4]])
    with pytest.raises(SearchSpaceError, match="bind_gpu"):
        cfg.define_annotate("b", [cfg.axis(4)], policy="bind_gpu")
    with pytest.raises(SearchSpaceError, match="num_anchor"):
        cfg.define_annotate("l", [cfg.axis(4)], policy="locate_cache")
    with pytest.raises(SearchSpaceError, match="interleave"):
        cfg.define_reorder("r", [cfg.axis(4)], policy="interleave")
    # while the space is defined, raise_error only notes the error (the defaults may be rejected)
    assert cfg.valid()
    cfg.raise_error("too many threads")
    assert not cfg.valid() and cfg.errors == ["too many threads"]


@pytest.fixture(scope="module")
def task():
    @autotvm.template("test_autotvm_space/scale2d")
    def scale2d(n, m):
        A = te.placeholder((n, m), name="A")
        B = te.compute((n, m), lambda i, j: A[i, j] * 3.0 + 1.0, name="B")
        s = te.create_schedule(B.op)
        cfg = autotvm.get_config()
        y, x = s[B].op.axis
        cfg.define_split("tile_x", cfg.axis(x), num_outputs=2)
        cfg.define_reorder("order", [cfg.axis(y), cfg.axis(x)], policy="all")
        cfg.define_annotate("ann", [y, x], policy="try_unroll_vec")
        cfg.define_knob("auto_unroll", [0, 16])
        xo, xi = cfg["tile_x"].apply(s, B, x)
        cfg["order"].apply(s, B, [y, xo])
        cfg["ann"].apply(s, B, [xo, xi], axis_lens=[cfg["tile_x"].size[0], cfg["tile_x"].size[1]],
                         max_unroll=4, cfg=cfg)
        if cfg["auto_unroll"].val:
            s[B].pragma(y, "auto_unroll_max_step", cfg["auto_unroll"].val)
        return s, [A, B]

    yield autotvm.task.create("test_autotvm_space/scale2d", args=(4, 16), target="llvm")
    unregister_template("test_autotvm_space/scale2d")


def test_every_config_of_a_template_builds_and_computes(task):
    space = task.config_space
    assert len(space) == 5 * 2 * 8 * 2
    rng = np.random.default_rng(0)
    a = rng.random((4, 16)).astype("float32")
    seen = set()
    for index in range(0, len(space), 7):
        cfg = space.get(index)
        ann = list(cfg["ann"].anns)
        too_long = any(a == "unroll" and n > 4 for a, n in zip(ann, cfg["tile_x"].size))
        if too_long:  # the template rejects it with cfg.raise_error, as in AutoTVM
            with pytest.raises(autotvm.task.space.InstantiationError, match="Too large factor for unrolling"):
                task.instantiate(cfg)
            continue
        with tvm.target.Target("llvm"):
            s, args = task.instantiate(cfg)
            f = tvm.build(s, args)
        b = np.full((4, 16), np.nan, dtype="float32")
        f(a, b)
        np.testing.assert_allclose(b, a * 3.0 + 1.0, rtol=1e-6)
        seen.add(tuple(ann))
    assert ("vec", "none") in seen  # the outer axis vectorized, as AutoTVM may choose


def test_an_autotvm_record_names_the_config_of_its_index(task, tmp_path):
    space = task.config_space
    lines = []
    for index in (0, 37, 93, len(space) - 1):
        cfg = space.get(index)
        entity = [["tile_x", "sp", [-1, cfg["tile_x"].size[1]]], ["order", "re", list(cfg["order"].perm)],
                  ["ann", "an", list(cfg["ann"].anns)], ["auto_unroll", "ot", cfg["auto_unroll"].val]]
        lines.append(json.dumps({
            "input": ["llvm -keys=cpu", "test_autotvm_space/scale2d", [4, 16], {}],
            "config": {"index": index, "code_hash": None, "entity": entity},
            "result": [[1e-5 * (index + 1)], 0, 0.1, 1700000000.0], "version": 0.2, "tvm_version": "0.8.0"}))
    path = tmp_path / "tvm.log"
    path.write_text("\n".join(lines) + "\n")
    loaded = list(autotvm.record.load_from_file(str(path)))
    assert [inp.config.index for inp, _ in loaded] == [0, 37, 93, len(space) - 1]
    for inp, _ in loaded:
        assert inp.config.knob_values() == space.get(inp.config.index).knob_values()
