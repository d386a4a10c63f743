"""The memory plan: tensors alive at once never share bytes, and dead ones are reused."""

from __future__ import annotations

import numpy as np
import pytest
from graph_models import residual_cnn, weights

from compiler.graph import GraphBuilder, fuse, optimize, plan_memory
from compiler.graph.memory import ALIGN, aliases


def _check_no_overlap(fused, plan, scratch=None):
    """Simulate the run: at each kernel, the workspace ranges of every live tensor, and of the
    kernel's scratch (``scratch``: bytes by kernel name), are disjoint (a reshape's output is its
    input's memory: one tensor, live until the last reader of either)."""
    scratch = scratch or {}
    alias = aliases(fused)

    def owner(v):
        return alias.get(v.uid, v)

    last = {}
    for i, node in enumerate(fused.nodes):
        for v in node.inputs:
            last[owner(v).uid] = i
    live = {}
    for i, node in enumerate(fused.nodes):
        for v in node.outputs:
            p = plan.place(v)
            assert p == plan.place(owner(v))
            if p.region == "workspace":
                live[owner(v).uid] = (p.index, p.index + owner(v).type.nbytes)
        spans = sorted(live.values())
        if scratch.get(node.name):
            offset = plan.scratch[node.name]
            spans = sorted([*spans, (offset, offset + scratch[node.name])])
            assert offset + scratch[node.name] <= plan.workspace_bytes
        for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
            assert a1 <= b0, f"kernel {i}: workspace ranges {a0}-{a1} and {b0}-{b1} overlap"
        assert all(s[0] % ALIGN == 0 for s in spans)
        for uid in [u for u in live if last.get(u, i) <= i]:
            del live[uid]


def _dense_chain(rng, layers=4, width=64):
    b = GraphBuilder()
    h = b.input("x", (8, width))
    for k in range(layers):
        h = b.op("nn.dense", h, b.const(f"w{k}", weights(rng, width, width)))
    return b.finish(h)


def test_a_chain_ping_pongs_between_two_buffers(rng):
    fused = fuse(_dense_chain(rng))
    plan = plan_memory(fused)
    size = 8 * 64 * 4
    assert plan.unshared_bytes == 3 * size
    assert plan.workspace_bytes == 2 * size
    offsets = [plan.place(n.outputs[0]).index for n in fused.nodes[:3]]
    assert offsets[0] == offsets[2] != offsets[1]
    assert plan.place(fused.outputs[0]).region == "output"
    assert plan.place(fused.inputs[0]).region == "input"
    assert plan.constant_bytes == 4 * 64 * 64 * 4
    _check_no_overlap(fused, plan)
    assert "33% saved" in plan.report()


def _dense_widths(rng, widths):
    b = GraphBuilder()
    h = b.input("x", (8, widths[0]))
    for k, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
        h = b.op("nn.dense", h, b.const(f"w{k}", weights(rng, n_out, n_in)))
    return fuse(b.finish(h))


def test_an_output_takes_the_memory_used_last(rng):
    # outputs of 2048, 2048, 512, 2048 and 2048 bytes. When the fourth is placed, the first's
    # bytes (free since the second kernel, bar the 512 the third took) and the second's (free
    # since the third) are free: first fit would take them together from byte 512, but the
    # second's, just read, are the likelier in the caches
    fused = _dense_widths(rng, [16, 64, 64, 16, 64, 64, 16])
    plan = plan_memory(fused)
    offsets = [plan.place(n.outputs[0]).index for n in fused.nodes[:5]]
    assert offsets == [0, 2048, 0, 2048, 0]
    assert plan.warm and plan.workspace_bytes == 4096  # and tighter than first fit's 4608 here
    assert "outputs in the memory used last" in plan.report()
    _check_no_overlap(fused, plan)


def test_the_plan_packs_first_fit_where_the_memory_used_last_would_take_more(rng):
    # outputs of 512, 512, 1024, 512 and 2048 bytes: placed where used last, the fourth takes the
    # second's bytes and leaves the 2048 no run of free bytes but from 1024 (3072 in all); first
    # fit puts the fourth at 0 and the fifth at 512, 2560 in all
    fused = _dense_widths(rng, [16, 16, 16, 32, 16, 64, 16])
    plan = plan_memory(fused)
    assert not plan.warm and plan.workspace_bytes == 2560
    assert [plan.place(n.outputs[0]).index for n in fused.nodes[:5]] == [0, 512, 1024, 0, 512]
    assert "outputs first fit" in plan.report()
    _check_no_overlap(fused, plan)


@pytest.mark.parametrize("seed", range(12))
def test_plans_of_random_chains_keep_live_tensors_and_scratch_apart(seed):
    # widths that make free ranges of every size, some adjacent, some apart: whichever way the
    # outputs are placed, no live tensor or scratch shares a byte with another
    rng = np.random.default_rng(seed)
    fused = _dense_widths(rng, [int(w) for w in rng.choice([8, 16, 32, 64, 128], size=9)])
    scratch = {n.name: int(rng.integers(1, 4096)) for n in fused.nodes if rng.random() < 0.4}
    for plan in (plan_memory(fused), plan_memory(fused, scratch)):
        _check_no_overlap(fused, plan, scratch if plan.scratch else None)
        assert plan.workspace_bytes <= plan.unshared_bytes


def test_a_network_s_plan_keeps_live_tensors_apart(rng):
    fused = fuse(optimize(residual_cnn(rng)))
    plan = plan_memory(fused)
    _check_no_overlap(fused, plan)
    assert plan.workspace_bytes < plan.unshared_bytes
    block = np.frombuffer(plan.constant_block(), dtype=np.uint8)
    for v, offset in plan.constants:
        assert offset % ALIGN == 0
        np.testing.assert_array_equal(block[offset:offset + v.type.nbytes],
                                      np.frombuffer(v.data.tobytes(), np.uint8))


def test_each_kernel_s_scratch_is_planned_apart_from_its_tensors_and_reused(rng):
    fused = fuse(optimize(residual_cnn(rng)))
    runs = [n for n in fused.nodes if n.output.uid not in aliases(fused)]  # a reshape runs nothing
    scratch = {n.name: 1000 + 64 * k for k, n in enumerate(runs) if k % 2}
    plan = plan_memory(fused, scratch)
    assert set(plan.scratch) == set(scratch)
    _check_no_overlap(fused, plan, scratch)
    plain = plan_memory(fused)
    assert plan.unshared_bytes == plain.unshared_bytes + sum(-(-b // ALIGN) * ALIGN for b in scratch.values())
    assert plain.workspace_bytes <= plan.workspace_bytes < plan.unshared_bytes  # scratch shares bytes too
    assert not plain.scratch and "scratch" not in plain.report()
    assert plan.largest_scratch == max(scratch.values()) and "the largest kernel's scratch" in plan.report()


def test_outputs_that_are_not_computed_are_copied(rng):
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    c = b.const("c", weights(rng, 4, 8))
    y = b.op("add", x, c)
    fused = fuse(b.finish(y, x, c, y))
    plan = plan_memory(fused)
    assert plan.place(y).region == "output" and plan.place(y).index == 0
    sources = [(p.region, k) for p, k, _ in plan.copies]
    assert sources == [("input", 1), ("constant", 2), ("output", 3)]


def test_a_reshape_is_its_input_s_memory(rng):
    b = GraphBuilder()
    x = b.input("x", (4, 16))
    h = b.op("nn.dense", x, b.const("w1", weights(rng, 16, 16)))
    flat = b.op("reshape", h, newshape=(64,))
    y = b.op("nn.dense", b.op("reshape", flat, newshape=(8, 8)), b.const("w2", weights(rng, 8, 8)))
    graph = b.finish(b.op("add", b.op("reshape", y, newshape=(64,)), flat))  # flat is read last
    fused = fuse(graph)
    plan = plan_memory(fused)
    alias = aliases(fused)
    square = fused.nodes[3].inputs[0]  # flat as 8 x 8
    assert set(alias) == {flat.uid, square.uid} and alias[flat.uid] is h and alias[square.uid] is h
    assert plan.place(flat) == plan.place(square) == plan.place(h)
    _check_no_overlap(fused, plan)


def test_an_output_that_reshapes_an_intermediate_is_its_memory(rng):
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    h = b.op("nn.dense", x, b.const("w", weights(rng, 6, 8)))
    flat, again = b.op("reshape", h, newshape=(24,)), b.op("reshape", h, newshape=(3, 8))
    from_input = b.op("reshape", x, newshape=(32,))
    fused = fuse(b.finish(b.op("tanh", flat), flat, again, from_input))
    plan, alias = plan_memory(fused), aliases(fused)
    # h is computed in the second output's array; the third output and the input's reshape need
    # memory of their own (h is in one output already; x is the caller's input)
    assert alias == {flat.uid: h}
    assert plan.place(h) == plan.place(flat) == plan.place(fused.outputs[1])
    assert plan.place(h).region == "output" and plan.place(h).index == 1
    assert plan.place(again).region == plan.place(from_input).region == "output"
    assert plan.workspace_bytes == 0
    _check_no_overlap(fused, plan)
