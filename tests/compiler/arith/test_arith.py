"""compiler.arith: simplification, proofs, constant bounds, intervals, evaluation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import tir
from compiler.arith import Analyzer, evaluate, simplify
from compiler.tir.analysis import substitute


def s(e) -> str:
    return str(simplify(e))


x, y, z, i, j, n, a = (tir.Var(name) for name in ("x", "y", "z", "i", "j", "n", "a"))


# ----------------------------------------------------------------------------- folding


@pytest.mark.parametrize("op, va, vb", [
    (tir.FloorDiv, 7, 2), (tir.FloorDiv, -7, 2), (tir.FloorDiv, 7, -2), (tir.FloorDiv, -7, -2),
    (tir.FloorMod, 7, 3), (tir.FloorMod, -7, 3), (tir.FloorMod, 7, -3), (tir.FloorMod, -7, -3),
    (tir.Div, 7, 2), (tir.Div, -7, 2), (tir.Div, 7, -2), (tir.Div, -7, -2),
    (tir.Add, 2**31 - 1, 1), (tir.Mul, 65536, 65536), (tir.Sub, -(2**31), 1),
    (tir.Min, 3, -4), (tir.Max, 3, -4),
])
def test_int_constant_folding_matches_c_and_floor_semantics(op, va, vb):
    got = simplify(op(tir.const(va), tir.const(vb), "int32"))
    assert isinstance(got, tir.IntImm) and got.dtype == "int32"
    if op is tir.Div:
        want = int(va / vb)  # truncation towards zero
    else:
        want = {tir.FloorDiv: va // vb, tir.FloorMod: va % vb, tir.Add: va + vb, tir.Mul: va * vb,
                tir.Sub: va - vb, tir.Min: min(va, vb), tir.Max: max(va, vb)}[op]
        want = (want + 2**31) % 2**32 - 2**31  # int32 wraps
    assert got.value == want


def test_division_by_zero_is_not_folded():
    e = tir.FloorDiv(tir.const(1), tir.const(0), "int32")
    assert isinstance(simplify(e), tir.FloorDiv)


def test_float_folding_and_identities_only():
    f = tir.Var("f", "float32")
    assert s(tir.const(2.5) * 2.0) == "5.0f"
    got = simplify(tir.const(1.0) / tir.const(3.0))
    assert got.value == float(np.float32(1.0) / np.float32(3.0))
    assert s(f * 1.0) == "f" and s(f + 0.0) == "f" and s(0.0 + f) == "f"
    # never reassociated: (f + 1) - 1 is not f for floats
    assert s((f + 1.0) - 1.0) == "f + 1.0f - 1.0f"


def test_casts_comparisons_logic_select_fold():
    assert s(tir.const(3.7).astype("int32")) == "3"
    assert s(tir.const(-3.7).astype("int32")) == "-3"
    assert s(tir.const(300).astype("int8")) == "44i8"
    assert s(tir.const(5) < tir.const(7)) == "True"
    assert s(tir.const(2.0) >= tir.const(3.0)) == "False"
    t, f = tir.const(True), tir.const(False)
    assert s(t & (x < y)) == "x < y"
    assert s(f & (x < y)) == "False"
    assert s((x < y) | t) == "True"
    assert s(~(x < y)) == "y <= x"
    assert s(~~(x < y)) == "x < y"
    assert s(tir.Select(tir.const(True), x, y, "int32")) == "x"
    assert s(tir.Select(x < y, z + 1, 1 + z, "int32")) == "z + 1"
    assert s(x.astype("int64").astype("int32")) == "x"


# ----------------------------------------------------------------------------- canonical form


def test_canonical_cancellations():
    xo = tir.Var("xo")
    assert s((xo * 8 + 7) - xo * 8 + 1) == "8"
    assert s(i * 4 + j - (j + i * 4)) == "0"
    assert s((x * 8 + y) // 8) == "x + y // 8"
    assert s((a * 16) // 4) == "a * 4"
    assert s(x * 1) == "x" and s(x + 0) == "x"
    assert s(tir.Min(x, x + 3, "int32")) == "x"
    assert s(tir.Max(x, x + 3, "int32")) == "x + 3"
    assert s(x < x + 1) == "True"
    assert s(x * 8 + y < x * 8 + 5) == "y < 5"
    assert s((i // 4) * 4 + i % 4) == "i"
    assert s((n // 8) * 8 - n) == "0 - n % 8"
    assert s((x // 4) // 2) == "x // 8"
    assert s((x * 6 + y * 4) // 2) == "x * 3 + y * 2"
    assert s((x * 8 + 3) % 8) == "3"


def test_divmod_recombines():
    f = tir.Var("f")
    assert s((x // 8) * 8 + x % 8) == "x"
    assert s(x % 8 + (x // 8) * 8) == "x"
    assert s((f // 10) * 10 + f % 10 + 3) == "f + 3"
    assert s((f // 10) * 10 + y + f % 10) == "y + f"
    assert s(((x + y) // 4) * 4 + (x + y) % 4) == "x + y"  # a sum as the numerator
    assert s((x // 8) * 16 + (x % 8) * 2) == "x * 2"  # scaled together
    assert s((x // 4) * 5 + x % 4) == "x // 4 + x"  # a leftover multiple of the quotient
    assert s((f // 10) * 10 + f % 10 - f) == "0"
    assert s((x // 8) * 8 + x % 4) == "x // 8 * 8 + x % 4"  # different divisors: no identity


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 64), st.integers(-9, 9), st.integers(-50, 50),
       st.lists(st.tuples(st.integers(-10**6, 10**6), st.integers(-10**6, 10**6)), min_size=1, max_size=8))
def test_divmod_recombination_preserves_value(c, k, offset, points):
    """``k*((A//c)*c + A%c) + offset`` for a sum ``A``, also with an extra quotient term."""
    num = x * 3 + y - 7
    e = ((num // c) * c + num % c) * k + tir.const(offset)
    extra = e + num // c
    for expr in (e, extra):
        simple = simplify(expr)
        for px, py in points:
            env = {x: px, y: py}
            assert evaluate(simple, env) == evaluate(expr, env), (expr, simple, px, py)
    if k:
        assert "//" not in str(simplify(e)) and "%" not in str(simplify(e))


def test_output_is_deterministic_and_idempotent():
    e = (y - x * 3 + 7) * 2 + z // 4 - (z // 4) * 2
    first = simplify(e)
    assert str(first) == str(simplify(e))
    assert str(simplify(first)) == str(first)
    assert str(first) == "y * 2 + 14 - x * 6 - z // 4"


def test_dtype_is_preserved():
    x64 = tir.Var("x64", "int64")
    e = (x64 * 8 + 3) // 8 - x64
    got = simplify(e)
    assert got.dtype == "int64" and str(got) == "0i64"
    assert simplify(x64 * 2 + x64).dtype == "int64"


def test_with_known_ranges():
    an = Analyzer()
    an.bind(y, (0, 7))
    assert str(an.simplify((x * 8 + y) // 8)) == "x"
    assert str(an.simplify((x * 8 + y) % 8)) == "y"
    assert str(an.simplify(y < 8)) == "True"
    assert str(an.simplify(tir.Min(y, tir.const(10), "int32"))) == "y"
    an.bind(i, tir.Range(tir.const(0), n))
    assert an.can_prove(i < n)
    assert not an.can_prove(i < n - 1)
    assert str(an.simplify(i < n)) == "True"
    assert an.can_prove(i >= 0)


def test_symbolic_split_bounds():
    an = Analyzer()
    an.bind(n, (0, None))
    assert str(an.simplify(tir.Min(n // 8, (n + 7) // 8, "int32"))) == "n // 8"
    assert str(an.simplify(tir.Max(n // 8, tir.const(0), "int32"))) == "n // 8"
    io, ii = tir.Var("io"), tir.Var("ii")
    an.bind(io, tir.Range(tir.const(0), n // 8))
    an.bind(ii, tir.Range(tir.const(0), tir.const(8)))
    assert an.can_prove(io * 8 + ii < n)


def test_can_prove_is_sound():
    an = Analyzer()
    assert not an.can_prove(x < y)
    assert not an.can_prove(x * x >= 1)
    assert an.can_prove(x * x >= x * x)
    an.bind(x, (0, 10))
    assert an.can_prove((x < 11) & (x >= 0))
    assert an.can_prove((x < 5) | (x >= 0))
    assert not an.can_prove(x < 10)


def test_can_prove_equal():
    an = Analyzer()
    assert an.can_prove_equal((x * 8 + y) // 8 * 8 + (x * 8 + y) % 8, x * 8 + y)
    assert not an.can_prove_equal(x, y)


def test_constraint_scope():
    an = Analyzer()
    an.bind(x, (0, 100))
    with an.constraint(x < 10):
        assert an.can_prove(x < 10)
        assert an.const_int_bound(x) == (0, 9)
    assert an.const_int_bound(x) == (0, 100)


# ----------------------------------------------------------------------------- bounds


def test_const_int_bound_propagation():
    an = Analyzer()
    an.bind(x, (0, 7))
    an.bind(y, tir.Range(tir.const(-2), tir.const(5)))  # [-2, 2]
    assert an.const_int_bound(x * 3 - 1) == (-1, 20)
    assert an.const_int_bound(x * y) == (-14, 14)
    assert an.const_int_bound(x // 2) == (0, 3)
    assert an.const_int_bound(y % 4) == (0, 3)
    assert an.const_int_bound(tir.Min(x, y, "int32")) == (-2, 2)
    assert an.const_int_bound(tir.Max(x, y, "int32")) == (0, 7)
    assert an.const_int_bound(tir.Select(x < 3, x, y, "int32")) == (-2, 7)
    assert an.const_int_bound(x.astype("int64")) == (0, 7)
    assert an.const_int_bound(z) == (None, None)
    assert an.const_int_bound(z % 5) == (0, 4)
    assert an.const_int_bound(x - x) == (0, 0)
    assert an.upper_bound(x + 1) == 8 and an.lower_bound(x + 1) == 1
    assert an.upper_bound(z) is None


def test_unsigned_and_bool_bounds():
    an = Analyzer()
    u = tir.Var("u", "uint8")
    assert an.const_int_bound(u) == (0, 255)
    assert an.const_int_bound(x < y) == (0, 1)


# ----------------------------------------------------------------------------- intervals


def test_interval_affine():
    an = Analyzer()
    xo, xi = tir.Var("xo"), tir.Var("xi")
    relax = {xi: (0, 7)}
    lo, hi = an.interval(xo * 8 + xi, relax)
    assert (str(lo), str(hi)) == ("xo * 8", "xo * 8 + 7")
    lo, hi = an.interval(0 - xi * 2 + xo, relax)
    assert (str(lo), str(hi)) == ("xo - 14", "xo")
    lo, hi = an.interval((xo * 8 + xi) // 4, relax)
    assert (str(lo), str(hi)) == ("xo * 2", "xo * 2 + 1")
    lo, hi = an.interval((xo * 8 + xi) % 8, relax)
    assert (str(lo), str(hi)) == ("0", "7")
    lo, hi = an.interval(xi % 4, relax)
    assert (str(lo), str(hi)) == ("0", "3")


def test_interval_recursive_and_symbolic_relaxation():
    an = Analyzer()
    xo, xi = tir.Var("xo"), tir.Var("xi")
    # xo ranges over [0, n//8 - 1] and xi over [0, 7]: xo*8 + xi covers [0, (n//8)*8 - 1]
    relax = {xo: (0, n // 8 - 1), xi: (0, 7)}
    lo, hi = an.interval(xo * 8 + xi, relax)
    assert str(lo) == "0"
    assert str(hi) == "n // 8 * 8 - 1"
    # bounds that mention another relaxed variable, and a cycle (which must not hang)
    relax = {x: (y, y + 3), y: (0, 10)}
    lo, hi = an.interval(x, relax)
    assert (str(lo), str(hi)) == ("0", "13")
    lo, hi = an.interval(x, {x: (0, x)})
    assert str(lo) == "0" and hi is None


def test_interval_min_max_select_cast():
    an = Analyzer()
    relax = {x: (0, 7)}
    lo, hi = an.interval(tir.Min(x, y, "int32"), relax)
    assert (str(lo), str(hi)) == ("min(0, y)", "min(7, y)")
    lo, hi = an.interval(tir.Select(y < 0, x, x + 10, "int32"), relax)
    assert (str(lo), str(hi)) == ("0", "17")
    lo, hi = an.interval(x.astype("int64") * 2, relax)
    assert (str(lo), str(hi)) == ("0i64", "14i64")


# ----------------------------------------------------------------------------- evaluate


def test_evaluate_semantics():
    assert evaluate(x * 2 + y, {x: 3, "y": 4}) == 10
    assert evaluate(tir.FloorDiv(x, tir.const(2), "int32"), {x: -7}) == -4
    assert evaluate(tir.Div(x, tir.const(2), "int32"), {x: -7}) == -3
    assert evaluate(tir.FloorMod(x, tir.const(3), "int32"), {x: -7}) == 2
    assert evaluate(x + 1, {x: 2**31 - 1}) == -(2**31)
    v = evaluate(tir.Ramp(x, tir.const(2), 4, "int32"), {x: 1})
    assert list(v) == [1, 3, 5, 7]
    with pytest.raises(KeyError):
        evaluate(x + z, {x: 1})


# ----------------------------------------------------------------------------- properties

_VARS = [tir.Var("p"), tir.Var("q"), tir.Var("r")]
_BOUNDS = [(0, 7), (-5, 20), (3, 3 + 64)]


def _exprs():
    leaf = st.one_of(st.sampled_from(_VARS), st.integers(-20, 20).map(tir.const))

    def extend(children):
        pos = st.integers(1, 17).map(tir.const)
        return st.one_of(
            st.tuples(children, children).map(lambda t: t[0] + t[1]),
            st.tuples(children, children).map(lambda t: t[0] - t[1]),
            st.tuples(children, st.integers(-9, 9)).map(lambda t: t[0] * t[1]),
            st.tuples(children, pos).map(lambda t: t[0] // t[1]),
            st.tuples(children, pos).map(lambda t: t[0] % t[1]),
            st.tuples(children, children).map(lambda t: tir.Min(t[0], t[1], "int32")),
            st.tuples(children, children).map(lambda t: tir.Max(t[0], t[1], "int32")),
            st.tuples(children, children, children).map(
                lambda t: tir.Select(t[0] < t[1], t[1], t[2], "int32")),
        )

    return st.recursive(leaf, extend, max_leaves=12)


def _assignments():
    return st.tuples(*(st.integers(lo, hi) for lo, hi in _BOUNDS))


@settings(max_examples=300, deadline=None)
@given(_exprs(), st.lists(_assignments(), min_size=1, max_size=8))
def test_simplify_preserves_value_under_bounds(e, points):
    an = Analyzer()
    for v, b in zip(_VARS, _BOUNDS, strict=True):
        an.bind(v, b)
    simple = an.simplify(e)
    assert simple.dtype == e.dtype
    for pt in points:
        env = dict(zip(_VARS, pt, strict=True))
        assert evaluate(simple, env) == evaluate(e, env), (e, simple, pt)
    lo, hi = an.const_int_bound(e)
    for pt in points:
        value = evaluate(e, dict(zip(_VARS, pt, strict=True)))
        assert (lo is None or lo <= value) and (hi is None or value <= hi)


@settings(max_examples=200, deadline=None)
@given(_exprs(), st.lists(st.tuples(*(st.integers(-1000, 1000) for _ in _VARS)),
                          min_size=1, max_size=8))
def test_simplify_preserves_value_without_bounds(e, points):
    simple = simplify(e)
    for pt in points:
        env = dict(zip(_VARS, pt, strict=True))
        assert evaluate(simple, env) == evaluate(e, env), (e, simple, pt)


@settings(max_examples=200, deadline=None)
@given(_exprs(), st.integers(-30, 30))
def test_substituting_simplifies_as_substitute_then_simplify(e, value):
    an = Analyzer()
    an.bind(_VARS[1], _BOUNDS[1])
    p, q = _VARS[0], _VARS[2]
    mapping = {p: value, q: p * 3 + 1}
    before = str(an.simplify(e))
    with an.substituting(mapping):
        got = an.simplify(e)
    assert str(got) == str(an.simplify(substitute(e, mapping)))
    assert str(an.simplify(e)) == before  # nothing substituted past the block


@pytest.mark.parametrize("key", [0, "p", tir.const(1)])
def test_substituting_refuses_keys_that_are_not_variables(key):
    with pytest.raises(TypeError, match="substituting maps variables"):
        with Analyzer().substituting({key: 3}):
            pass


def test_substituting_walks_only_the_branch_a_value_selects(monkeypatch):
    from compiler.arith.rewrite import Simplifier
    from compiler.tir.analysis import _Substitute

    class Leaf(tir.Var):  # a variable that notes when the simplifier reads it
        pass

    walked = []
    for walker in (Simplifier, _Substitute):  # the simplifier, or a substitution before it
        monkeypatch.setattr(walker, "visit_Leaf", lambda self, v: walked.append(v.name) or v, raising=False)
    leaves = [Leaf(f"leaf{k}") for k in range(4)]
    e = tir.Select(i < 2, tir.Select(i < 1, leaves[0], leaves[1], "int32"),
                   tir.Select(i < 3, leaves[2], leaves[3], "int32"), "int32")
    an = Analyzer()
    with an.substituting({i: 2}):
        assert an.simplify(e) is leaves[2]
    assert walked == ["leaf2"]
    assert an.simplify(substitute(e, {i: 2})) is leaves[2]
    assert sorted(walked[1:]) == ["leaf0", "leaf1", "leaf2", "leaf2", "leaf3"]  # substitute walks them all


def test_expr_key_keys_a_tree_once(monkeypatch):
    from compiler.arith.canonical import _ExprKey, expr_key

    class Leaf(tir.Var):  # a variable that notes when it is keyed
        pass

    keyed = []
    monkeypatch.setattr(_ExprKey, "visit_Leaf", lambda self, v: keyed.append(v.name) or v.name, raising=False)
    leaves = [Leaf(f"leaf{k}") for k in range(4)]
    tree = tir.Select(i < 2, tir.Select(i < 1, leaves[0], leaves[1], "int32"),
                      tir.Select(i < 3, leaves[2], leaves[3], "int32"), "int32")
    first = expr_key(tree)
    assert sorted(keyed) == ["leaf0", "leaf1", "leaf2", "leaf3"]
    assert expr_key(tree) == first and expr_key(tree * j + tree) == expr_key(tree + tree * j)
    assert len(keyed) == 4  # the tree, alone or an atom of sums, was keyed once
    twin = tir.Select(i < 2, tir.Select(i < 1, leaves[0], leaves[1], "int32"),
                      tir.Select(i < 3, leaves[2], leaves[3], "int32"), "int32")
    assert expr_key(twin) == first and len(keyed) == 8  # an equal tree: the same key, keyed anew


def test_expr_key_stays_exact_when_its_table_fills(monkeypatch):
    from compiler.arith.canonical import _EXPR_KEY, expr_key

    monkeypatch.setattr(_EXPR_KEY, "_MAX_REMEMBERED", 2)
    trees = [tir.Select(i < k, i + k, j * k, "int32") for k in range(6)]
    keys = [expr_key(t) for t in trees]
    assert len(set(keys)) == 6 and len(_EXPR_KEY._remembered) <= 2
    assert [expr_key(tir.Select(i < k, i + k, j * k, "int32")) for k in range(6)] == keys


@settings(max_examples=200, deadline=None)
@given(_exprs(), st.sets(st.integers(0, 2), min_size=1), st.lists(_assignments(), min_size=1,
                                                                   max_size=8))
def test_interval_contains_every_value(e, relaxed, points):
    an = Analyzer()
    relax = {_VARS[k]: _BOUNDS[k] for k in relaxed}
    lo, hi = an.interval(e, relax)
    fixed = [k for k in range(3) if k not in relaxed]
    for pt in points:
        env = dict(zip(_VARS, pt, strict=True))
        point_env = {_VARS[k]: pt[k] for k in fixed}
        value = evaluate(e, env)
        if lo is not None:
            assert evaluate(lo, point_env) <= value, (e, lo, pt)
        if hi is not None:
            assert value <= evaluate(hi, point_env), (e, hi, pt)


def test_interval_is_tight_for_affine():
    an = Analyzer()
    p, q = _VARS[0], _VARS[1]
    e = p * 3 - q * 2 + 5
    lo, hi = an.interval(e, {p: (0, 7), q: (-5, 20)})
    assert (lo.value, hi.value) == (0 - 40 + 5, 21 + 10 + 5)
    # tight: both ends are reached inside the box
    assert evaluate(e, {p: 0, q: 20}) == lo.value and evaluate(e, {p: 7, q: -5}) == hi.value
