"""Knobs and config spaces: knob semantics, constraints, indices, sampling, JSON, defaults."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from compiler import te
from search_spaces import ConfigEntity, ConfigSpace, SearchSpaceError
from search_spaces.space import AnnotateSpace, ReorderSpace, SplitEntity, SplitSpace

# ---------------------------------------------------------------------------- knobs


def test_split_factors_multiply_to_extent():
    knob = SplitSpace("t", 24, "factors", num_outputs=3)
    sizes = [e.size for e in knob.entities]
    assert all(math.prod(s) == 24 for s in sizes)
    assert len(set(sizes)) == len(sizes)
    # 24 = 2^3 * 3: ordered factorisations into 3 parts = C(3+2, 2) * C(1+2, 2) = 10 * 3
    assert len(knob) == 30


def test_split_power2_and_verbose_and_limits():
    p2 = SplitSpace("t", 10, "power2", num_outputs=2)
    assert [e.size for e in p2.entities] == [(10, 1), (5, 2), (3, 4), (2, 8)]
    verbose = SplitSpace("t", 10, "verbose", num_outputs=2)
    assert sorted(e.size[1] for e in verbose.entities) == [1, 2, 4, 5, 8, 10]
    limited = SplitSpace("t", 64, "factors", num_outputs=2, max_factor=8)
    assert max(e.size[1] for e in limited.entities) == 8
    filtered = SplitSpace("t", 64, "factors", num_outputs=2, filter=lambda e: e.size[1] % 4 == 0)
    assert {e.size[1] for e in filtered.entities} == {4, 8, 16, 32, 64}
    with pytest.raises(SearchSpaceError, match="no choices"):
        SplitSpace("t", 64, filter=lambda e: False)
    with pytest.raises(SearchSpaceError, match="num_outputs"):
        SplitSpace("t", 64, num_outputs=5)
    with pytest.raises(SearchSpaceError, match="policy"):
        SplitSpace("t", 64, policy="odd")


def test_split_default_aims_at_vector_width():
    assert SplitSpace("t", 64).entities[SplitSpace("t", 64).default].size == (4, 16)
    k = SplitSpace("t", 96, num_outputs=3)
    assert k[k.default].size[-1] == 16 and k[k.default].size != (1, 1, 96)
    k = SplitSpace("t", 7)  # a prime: never "all ones" where something else exists
    assert k[k.default].size == (1, 7)
    k = SplitSpace("t", 64, num_outputs=3, default=[-1, 2, 8])
    assert k[k.default].size == (4, 2, 8)


def test_split_entity_apply_returns_axes_and_builds():
    A = te.placeholder((40,), name="A")
    B = te.compute((40,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    axes = SplitEntity((5, 2, 4)).apply(s, B, B.op.axis[0])
    assert len(axes) == 3
    assert [iv.var.name for iv in s[B].leaf_iter_vars] == [iv.var.name for iv in axes]


def test_reorder_policies_and_apply():
    axes = ["a", "b", "c", "d"]
    assert len(ReorderSpace("r", axes, "all")) == 24
    interval = ReorderSpace("r", axes, "interval", interval=(1, 3))
    assert [e.perm for e in interval.entities] == [(0, 1, 2, 3), (0, 2, 1, 3)]
    cand = ReorderSpace("r", axes, "candidate", candidate=[["d", "c", "b", "a"], [0, 1, 2, 3]])
    assert [e.perm for e in cand.entities] == [(3, 2, 1, 0), (0, 1, 2, 3)]
    with pytest.raises(SearchSpaceError, match="permutation"):
        ReorderSpace("r", axes, "candidate", candidate=[["a", "b"]])
    A = te.placeholder((4, 5), name="A")
    B = te.compute((4, 5), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    swap = ReorderSpace("r", [i, j], "candidate", candidate=[[j, i]])
    assert swap.entities[0].apply(s, B, [i, j]) == [j, i]
    assert s[B].leaf_iter_vars == [j, i]


def test_annotate_policies():
    assert [e.anns for e in AnnotateSpace("a", [0, 1], "try_unroll").entities] == [
        ("none", "none"), ("none", "unroll"), ("unroll", "none"), ("unroll", "unroll")]
    vec = AnnotateSpace("a", [0, 1], "try_vec")
    # AutoTVM's enumeration: any one axis may be vectorized, the first axis varies slowest.
    assert [e.anns for e in vec.entities] == [("none", "none"), ("none", "vec"), ("vec", "none")]
    assert vec[vec.default].anns == ("none", "vec")
    # 3 axes, each none/unroll/vec with at most one vec: 2**3 + 3 * 2**2
    assert len(AnnotateSpace("a", [0, 1, 2], "try_unroll_vec")) == 8 + 12


def test_define_knob_and_bad_candidates():
    cfg = ConfigSpace()
    cfg.define_knob("k", [4, 8, 16])
    assert cfg["k"].val == 4
    with pytest.raises(SearchSpaceError, match="twice"):
        cfg.define_knob("k", [1])
    with pytest.raises(SearchSpaceError, match="JSON"):
        cfg.define_knob("obj", [object()])
    with pytest.raises(SearchSpaceError, match="unknown knob 'nope'"):
        cfg["nope"]


def test_define_split_needs_a_constant_extent():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    cfg = ConfigSpace()
    with pytest.raises(SearchSpaceError, match="constant extent"):
        cfg.define_split("t", B.op.axis[0])
    C = te.compute((12,), lambda i: A[i] + 1.0, name="C")
    cfg.define_split("t", C.op.axis[0])
    assert len(cfg.space_map["t"]) == 6


# ---------------------------------------------------------------------------- spaces


def _space() -> ConfigSpace:
    cfg = ConfigSpace()
    cfg.define_split("x", 16, num_outputs=2)          # 5 choices
    cfg.define_split("y", 12, num_outputs=3)          # 18
    cfg.define_knob("u", [0, 1, 2])                   # 3
    cfg.define_annotate("a", [0, 1], "try_unroll")    # 4
    return cfg


def test_index_round_trip_is_mixed_radix():
    cfg = _space()
    assert cfg.raw_size == 5 * 18 * 3 * 4 == len(cfg) and cfg.size_is_exact
    for index in [0, 1, 5, 17, 233, cfg.raw_size - 1]:
        choices = cfg.index_to_choices(index)
        assert cfg.choices_to_index(choices) == index
        assert cfg.from_index(index).index == index
        assert cfg.get(index).index == index  # no constraints: position and index agree
    assert cfg.index_to_choices(1) == [1, 0, 0, 0]  # the first knob varies fastest
    assert cfg.index_to_choices(5) == [0, 1, 0, 0]
    with pytest.raises(SearchSpaceError, match="outside"):
        cfg.from_index(cfg.raw_size)
    with pytest.raises(IndexError, match="outside"):
        cfg.get(cfg.raw_size)
    with pytest.raises(SearchSpaceError, match="an int"):
        cfg.from_index("3")
    with pytest.raises(SearchSpaceError, match="an int"):
        cfg.get("3")


def test_constraints_filter_and_count_exactly():
    cfg = _space()
    cfg.add_constraint(lambda c: c["x"].size[1] * c["y"].size[2] <= 8, knobs=["x", "y"], name="tile")
    valid = [c for c in cfg]
    assert len(valid) == cfg.size and cfg.size_is_exact
    points = [cfg.from_index(i, check=False) for i in range(cfg.raw_size)]
    brute = sum(1 for c in points if c["x"].size[1] * c["y"].size[2] <= 8)
    assert cfg.size == brute < cfg.raw_size
    bad = next(i for i in range(cfg.raw_size) if not cfg.is_valid(i))
    with pytest.raises(SearchSpaceError, match="'tile'"):
        cfg.from_index(bad)
    # The same constraint without naming its knobs gives the same count (slower path).
    cfg2 = _space()
    cfg2.add_constraint(lambda c: c["x"].size[1] * c["y"].size[2] <= 8)
    assert cfg2.size == cfg.size


def _constrained(kind: str) -> ConfigSpace:
    """``_space()`` with constraints that tie knobs into parts interleaved in index order."""
    cfg = _space()
    if kind == "parts":  # parts {x, u} and {y, a}, knob order x y u a
        cfg.add_constraint(lambda c: c["x"].size[1] * (1 + c["u"].val) <= 8, knobs=["x", "u"])
        cfg.add_constraint(lambda c: c["a"].anns[1] == "none" or c["y"].size[2] > 1, knobs=["y", "a"])
    elif kind == "one_knob":  # one constrained knob, three free ones
        cfg.add_constraint(lambda c: c["y"].size[1] != 2, knobs=["y"])
    elif kind == "undeclared":  # reads every knob: one part
        cfg.add_constraint(lambda c: (c["x"].size[1] + c["y"].size[2] + c["u"].val) % 3 == 0)
    elif kind == "no_knobs":  # a constraint that reads no knob, beside a real one
        cfg.add_constraint(lambda c: True, knobs=())
        cfg.add_constraint(lambda c: c["u"].val < 2, knobs=["u"])
    return cfg


@pytest.mark.parametrize("kind", ["parts", "one_knob", "undeclared", "no_knobs"])
def test_get_numbers_exactly_the_valid_configs(kind):
    cfg = _constrained(kind)
    valid = [i for i in range(cfg.raw_size) if cfg.is_valid(i)]
    assert cfg.size_is_exact and len(cfg) == len(valid) < cfg.raw_size
    got = [cfg.get(i) for i in range(len(cfg))]
    assert [c.index for c in got] == valid == cfg.valid_indices()  # every valid config once, in order
    assert got == list(cfg)
    assert all(c == cfg.from_index(c.index) for c in got)
    for outside in (len(cfg), len(cfg) + 7, -1):
        with pytest.raises(IndexError, match="outside"):
            cfg.get(outside)


def test_get_positions_in_a_large_space_without_listing_it():
    cfg = ConfigSpace()
    for k in range(10):
        cfg.define_knob(f"k{k}", list(range(8)))
    cfg.add_constraint(lambda c: c["k0"].val + c["k9"].val <= 7, knobs=["k0", "k9"])
    middle = 8 ** 8  # k1..k8 are free
    assert len(cfg) == middle * 36 and cfg.size_is_exact

    def expected(position: int) -> int:
        # Index order: k9 most significant, then k8..k1, then k0; k9 = v leaves 8 - v values of k0.
        for v in range(8):
            block = middle * (8 - v)
            if position < block:
                rest, k0 = divmod(position, 8 - v)
                return k0 + rest * 8 + v * 8 ** 9
            position -= block
        raise AssertionError("position outside the space")

    for position in [0, 1, 7, 8, 12345, middle * 8 - 1, middle * 8, len(cfg) // 2, len(cfg) - 1]:
        assert cfg.get(position).index == expected(position)
    with pytest.raises(IndexError):
        cfg.get(len(cfg))


def test_constraint_reading_undeclared_knob_is_an_error():
    cfg = _space()
    cfg.add_constraint(lambda c: c["u"].val < 2, knobs=["x"], name="sneaky")
    with pytest.raises(SearchSpaceError, match="sneaky.*'u'"):
        cfg.size  # noqa: B018
    with pytest.raises(SearchSpaceError, match="unknown knob 'zz'"):
        _space().add_constraint(lambda c: True, knobs=["zz"])


def test_sampling_without_replacement_and_exhaustion():
    cfg = _space()
    cfg.add_constraint(lambda c: c["u"].val != 1, knobs=["u"])
    rng = np.random.default_rng(0)
    sample = cfg.sample(100, rng)
    indices = [c.index for c in sample]
    assert len(set(indices)) == 100
    assert all(c["u"].val != 1 and cfg.is_valid(c.index) for c in sample)
    everything = cfg.sample(10 * cfg.raw_size, 1)
    assert len(everything) == cfg.size == len({c.index for c in everything})
    # Seeded: the same seed gives the same sample.
    assert [c.index for c in cfg.sample(10, 7)] == [c.index for c in cfg.sample(10, 7)]
    # exclude= skips indices a tuner has already measured.
    rest = cfg.sample_indices(cfg.size, 3, exclude=set(indices))
    assert not set(rest) & set(indices) and len(rest) == cfg.size - 100


def test_empty_space_fails_clearly():
    cfg = _space()
    cfg.add_constraint(lambda c: False, knobs=["x"], name="never")
    assert cfg.size == 0
    with pytest.raises(SearchSpaceError, match="no valid config"):
        cfg.sample(1, 0)


def test_huge_space_is_never_enumerated():
    cfg = ConfigSpace()
    for k in range(12):
        cfg.define_knob(f"k{k}", list(range(10)))
    assert cfg.raw_size == 10 ** 12 == cfg.size and cfg.size_is_exact
    cfg.add_constraint(lambda c: sum(c[f"k{k}"].val for k in range(12)) % 2 == 0, name="even")
    assert not cfg.size_is_exact
    assert 0.4e12 < cfg.size < 0.6e12
    sample = cfg.sample(50, np.random.default_rng(1))
    assert len({c.index for c in sample}) == 50
    assert all(sum(c.knob_values().values()) % 2 == 0 for c in sample)
    last = cfg.from_index(10 ** 12 - 1)
    assert all(v == 9 for v in last.knob_values().values())
    with pytest.raises(SearchSpaceError, match="estimate"):
        cfg.get(0)  # no positions without an exact count
    with pytest.raises(SearchSpaceError, match="estimate"):
        cfg.valid_indices()
    assert cfg.default_config.index == 0


def test_neighbors_change_exactly_one_knob():
    cfg = _space()
    cfg.add_constraint(lambda c: c["x"].size[1] <= 8, knobs=["x"])
    base = cfg.from_index(cfg.choices_to_index([1, 3, 1, 2]))
    nbrs = cfg.neighbors(base)
    # x: 4 valid other choices minus the one above 8 (16); y: 17; u: 2; a: 3
    assert len(nbrs) == 3 + 17 + 2 + 3
    for n in nbrs:
        diff = [k for k in base.keys() if base[k] != n[k]]
        assert len(diff) == 1 and cfg.is_valid(n.index)


def test_encode_has_fixed_length_and_distinguishes_points():
    cfg = _space()
    names = cfg.feature_names()
    vecs = {tuple(cfg.encode(i)) for i in range(cfg.raw_size)}
    assert len(vecs) == cfg.raw_size
    assert all(len(v) == len(names) == 2 + 3 + 1 + 2 for v in vecs)
    np.testing.assert_allclose(cfg.encode(cfg.get(0))[:2], [4.0, 0.0])  # log2 of (16, 1)


def test_default_config_is_deterministic_and_valid():
    cfg = _space()
    d = cfg.default_config
    assert d == _space().default_config
    assert d["x"].size == (1, 16) and d["u"].val == 0
    cfg.add_constraint(lambda c: c["x"].size[1] <= 4, knobs=["x"])
    d2 = cfg.default_config
    assert cfg.is_valid(d2.index) and d2["x"].size == (4, 4)


# ---------------------------------------------------------------------------- JSON


def test_config_json_round_trip():
    cfg = _space()
    for c in cfg.sample(20, 0):
        data = json.loads(json.dumps(c.to_json()))
        back = ConfigEntity.from_json(cfg, data)
        assert back == c and back.index == c.index
        assert cfg.from_json(json.dumps(data)) == c


def test_a_config_recorded_before_a_knob_existed_takes_the_knob_s_absent_choice():
    old = _space()
    grown = _space()
    grown.define_knob("plane", [False, True], default=True, absent=False)  # False: what was done before
    grown.define_knob("order", ["ab", "ba"])  # no absent choice: configs without it do not fit
    logged = old.get(7).to_json()
    with pytest.raises(SearchSpaceError, match="lacks knob 'order'"):
        ConfigEntity.from_json(grown, logged)
    logged["knobs"]["order"] = "ba"
    cfg = ConfigEntity.from_json(grown, logged)
    assert cfg.knob_values() == {**old.get(7).knob_values(), "plane": False, "order": "ba"}
    assert grown.default_config["plane"].val  # the default is the knob's own
    with pytest.raises(SearchSpaceError, match="knob 'plane': value 2 is not in its space"):
        ConfigSpace().define_knob("plane", [False, True], absent=2)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["knobs"].update(zz=1), "unknown knob 'zz'"),
    (lambda d: d["knobs"].pop("u"), "lacks knob 'u'"),
    (lambda d: d["knobs"].update(u=7), "knob 'u': value 7 is not in its space"),
    (lambda d: d["knobs"].update(x=[3, 5]), "knob 'x': value \\[3, 5\\] is not in its space"),
    (lambda d: d["knobs"].update(a=["vec", "none"]), "knob 'a'"),
    (lambda d: d.pop("knobs"), "a config is"),
])
def test_config_json_validation_names_the_problem(edit, message):
    cfg = _space()
    data = cfg.get(0).to_json()
    edit(data)
    with pytest.raises(SearchSpaceError, match=message):
        ConfigEntity.from_json(cfg, data)


def test_config_json_knob_values_decide_over_a_stale_index():
    """An index written by an older version of the space (values added since) is recomputed."""
    cfg = _space()
    for c in cfg.sample(5, 3):
        data = c.to_json()
        data["index"] = (c.index + 1) % len(cfg)
        back = ConfigEntity.from_json(cfg, data)
        assert back == c and back.index == c.index


def test_config_json_rejects_constraint_violations():
    cfg = _space()
    cfg.add_constraint(lambda c: c["u"].val == 0, knobs=["u"], name="only_zero")
    data = cfg.get(0).to_json()
    data["knobs"]["u"] = 2
    data.pop("index")
    with pytest.raises(SearchSpaceError, match="only_zero"):
        cfg.from_json(data)


def test_config_entity_in_apply_mode_checks_knob_names():
    cfg = _space()
    c = cfg.get(3)
    c.define_split("x", 16)           # no-op: the knob exists
    c.add_constraint(lambda _: False)  # no-op in apply mode
    with pytest.raises(SearchSpaceError, match="lacks"):
        c.define_knob("other", [1, 2])
    assert "ConfigEntity(index=3" in repr(c)
