"""``Schedule.create_group`` as TVM defines it: the stages between some inputs and outputs
form a group, and ``compute_at`` of the group moves every member at the group's root into
the consumer's loop. Every kernel runs against numpy on random data, into poisoned outputs.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from helpers import build_and_check, random_array

import compiler as tvm
from compiler import te
from compiler.errors import ScheduleError


def _chain(m=10, n=6):
    """A -> B -> C -> D, elementwise (an injective chain), D the output."""
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j] + 1, name="B")
    C = te.compute((m, n), lambda i, j: B[i, j] * 2, name="C")
    D = te.compute((m, n), lambda i, j: C[i, j] - A[i, j], name="D")
    return A, B, C, D


def _want(a):
    return (a + 1) * 2 - a


def _loop_body_of(text: str, loop: str) -> str:
    """The lowered text from the loop over ``loop`` on (what it encloses, and what follows)."""
    start = text.index(f"for {loop} in")
    return text[start:]


def test_a_group_computed_at_a_consumer_axis_moves_all_its_stages(rng):
    A, B, C, D = _chain()
    s = te.create_schedule(D.op)
    g = s.create_group(outputs=C, inputs=A)
    assert set(g.stages) == {s[B], s[C]} and s.groups == [g]
    assert s[B].group is g and s[C].group is g and s[D].group is None
    xo, xi = s[D].split(D.op.axis[0], factor=4)  # 10 rows: the last tile is partial
    g.compute_at(s[D], xo)
    assert s[B].attach_stage is s[D] and s[C].attach_ivar is xo
    text = str(tvm.lower(s, [A, D]))
    inner = _loop_body_of(text, "i.outer")
    assert "B[" in inner and "C[" in inner, text
    a = random_array(rng, (10, 6), "float32")
    build_and_check(s, [A, D], [a], [_want(a)])


def test_members_may_be_computed_at_one_another_and_compute_root_returns_to_the_group(rng):
    A, B, C, D = _chain()
    s = te.create_schedule(D.op)
    g = s.create_group(outputs=C, inputs=A)
    s[B].compute_at(s[C], C.op.axis[0])
    xo, xi = s[D].split(D.op.axis[0], factor=3)
    g.compute_at(s[D], xo)
    assert s[B].attach_stage is s[C] and s[C].attach_stage is s[D]
    a = random_array(rng, (10, 6), "float32")
    build_and_check(s, [A, D], [a], [_want(a)])
    s[B].compute_root()  # the group's root: still inside D's loop
    assert s[B].attach_stage is s[D] and s[B].attach_ivar is xo
    build_and_check(s, [A, D], [a], [_want(a)])
    g.compute_root()
    assert s[B].attach_type == "root" and s[C].attach_type == "root"
    build_and_check(s, [A, D], [a], [_want(a)])


def test_a_group_with_an_inlined_member_and_its_inputs_included(rng):
    A = te.placeholder((8, 5), name="A")
    P = te.compute((8, 5), lambda i, j: A[i, j] * 3, name="P")
    B = te.compute((8, 5), lambda i, j: P[i, j] + 1, name="B")
    C = te.compute((8, 5), lambda i, j: B[i, j] * B[i, j], name="C")
    D = te.compute((8,), lambda i: C[i, 0] + C[i, 4], name="D")
    s = te.create_schedule(D.op)
    g = s.create_group(outputs=[C], inputs=[P], include_inputs=True)
    assert set(g.stages) == {s[P], s[B], s[C]}
    assert set(s.create_group(outputs=C, inputs=P).stages) == {s[B], s[C]}  # a group inside g
    s[B].compute_inline()
    g.compute_at(s[D], D.op.axis[0])
    a = random_array(rng, (8, 5), "float32")
    c = (a * 3 + 1) ** 2
    build_and_check(s, [A, D], [a], [c[:, 0] + c[:, 4]], rtol=1e-5)


def test_a_member_computed_outside_the_group_goes_back_to_its_root(rng, caplog):
    A, B, C, D = _chain()
    s = te.create_schedule(D.op)
    s[B].compute_at(s[D], D.op.axis[0])
    with caplog.at_level(logging.WARNING, logger="compiler.schedule.group"):
        g = s.create_group(outputs=C, inputs=A)
    assert "'B'" in caplog.text and "outside the group" in caplog.text
    assert s[B].attach_type == "root"
    g.compute_at(s[D], D.op.axis[1])
    a = random_array(rng, (10, 6), "float32")
    build_and_check(s, [A, D], [a], [_want(a)])


def test_group_errors_name_the_problem():
    A, B, C, D = _chain()
    s = te.create_schedule(D.op)
    with pytest.raises(ScheduleError, match="no stage lies on a path"):
        s.create_group(outputs=A, inputs=D)
    with pytest.raises(ScheduleError, match="outputs must be a tensor"):
        s.create_group(outputs="C", inputs=A)
    g = s.create_group(outputs=C, inputs=A)
    with pytest.raises(ScheduleError, match="its own stage 'C'"):
        g.compute_at(s[C], C.op.axis[0])
    with pytest.raises(ScheduleError, match="same group"):
        s[B].compute_at(s[D], D.op.axis[0])
    with pytest.raises(ScheduleError, match="cannot be inlined"):
        g.compute_inline()
    with pytest.raises(ScheduleError, match="part of an existing group"):
        s.create_group(outputs=D, inputs=B)
    whole = s.create_group(outputs=D, inputs=C)  # D alone, an output
    with pytest.raises(ScheduleError, match="'D' is an output"):
        whole.compute_at(s[C], C.op.axis[0])


def test_a_group_at_a_stage_that_reads_none_of_it_is_refused():
    A, B, C, D = _chain()
    E = te.compute((10, 6), lambda i, j: A[i, j] * 5, name="E")
    s = te.create_schedule([D.op, E.op])
    g = s.create_group(outputs=C, inputs=A)
    with pytest.raises(ScheduleError, match="reads none of the group's results"):
        g.compute_at(s[E], E.op.axis[0])
    np.testing.assert_equal(len(s.groups), 1)


def test_cache_and_rfactor_stages_join_the_group_of_their_stage(rng):
    A = te.placeholder((8, 16), name="A")
    B = te.compute((8, 16), lambda i, j: A[i, j] * 2, name="B")
    k = te.reduce_axis((0, 16), "k")
    R = te.compute((8,), lambda i: te.sum(B[i, k], axis=k), name="R")
    D = te.compute((8,), lambda i: R[i] + 1, name="D")
    s = te.create_schedule(D.op)
    g = s.create_group(outputs=R, inputs=A)
    BL = s.cache_read(B, "local", [R])
    ko, _ = s[R].split(R.op.reduce_axis[0], factor=4)
    RF = s.rfactor(R, ko)
    assert s[BL].group is g and s[RF].group is g
    s[BL].compute_at(s[RF], RF.op.axis[0])
    xo, _ = s[D].split(D.op.axis[0], factor=2)
    g.compute_at(s[D], xo)
    assert s[RF].attach_stage is s[D] and s[B].attach_stage is s[D]
    a = random_array(rng, (8, 16), "float32")
    build_and_check(s, [A, D], [a], [(2 * a).sum(axis=1) + 1], rtol=1e-5)
