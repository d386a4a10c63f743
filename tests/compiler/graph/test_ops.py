"""compiler.graph.ops: every registered operator's three rules agree.

For each case: ``infer`` gives the type of ``evaluate``'s result, and ``compute`` built with a
plain schedule and run on poisoned outputs matches ``evaluate``. Then ``infer`` refuses one bad
input per operator family, and :func:`compiler.graph.evaluate` runs a small hand-built graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

import compiler
from compiler import te
from compiler.graph import Graph, GraphError, Node, TensorType, Value, evaluate, get_op, registered_ops
from tests.helpers import build_and_check, random_array

F32 = "float32"


@dataclass
class Case:
    """One operator on inputs of the given ``(shape, dtype)`` (or fixed arrays)."""

    op: str
    inputs: list
    attrs: dict = field(default_factory=dict)
    id: str = ""
    positive: bool = False  # random floats in [0.5, 1.5) instead of either sign
    atol: float = 1e-6  # of compute against evaluate (float64 inside)

    def arrays(self, rng: np.random.Generator) -> list[np.ndarray]:
        out = []
        for spec in self.inputs:
            if isinstance(spec, np.ndarray):
                out.append(spec)
                continue
            a = np.asarray(random_array(rng, *spec))
            out.append(np.abs(a) if self.positive and a.dtype.kind == "f" else a)
        return out


def _f(*shape, dtype=F32):
    return (shape, dtype)


# (1, 2, 2, 3): x then y
_EXTREME_POINTS = np.array([[[[np.nan, np.inf, -0.3], [-np.inf, 0.6, 2.5]],
                             [[1e30, -1e30, np.nan], [0.2, np.inf, -np.inf]]]], "float32")
# mirrored, points 1e30 away land on a pixel that depends on rounding: infinities and NaN only
_INFINITE_POINTS = np.array([[[[np.nan, np.inf], [-np.inf, 0.6]], [[np.inf, np.nan], [-0.2, -np.inf]]]],
                            "float32")
CONV = dict(strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
POOL = dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1), dilation=(1, 1), ceil_mode=False)

CASES = [
    # nn
    Case("nn.conv2d", [_f(1, 3, 7, 6), _f(4, 3, 3, 3)], dict(CONV, padding=(1, 1, 1, 1)), "plain"),
    Case("nn.conv2d", [_f(2, 2, 8, 7), _f(3, 2, 3, 2)], dict(CONV, strides=(2, 1), padding=(0, 1, 2, 1),
                                                            dilation=(2, 1)), "strided-dilated"),
    Case("nn.conv2d", [_f(1, 4, 6, 6), _f(4, 1, 3, 3)], dict(CONV, padding=(1, 1, 1, 1), groups=4),
         "depthwise"),
    Case("nn.conv2d", [_f(1, 4, 6, 5), _f(6, 2, 3, 3)], dict(CONV, strides=(2, 2), padding=(1, 0, 1, 0),
                                                            groups=2), "grouped"),
    Case("nn.conv2d", [_f(1, 2, 5, 5), _f(4, 1, 3, 3)], dict(CONV, groups=2), "channel-multiplier"),
    Case("nn.dense", [_f(3, 5), _f(4, 5)]),
    Case("nn.batch_matmul", [_f(2, 3, 4), _f(2, 4, 5)], {}, "NN"),
    Case("nn.batch_matmul", [_f(1, 4, 3), _f(2, 5, 4)], dict(transpose_a=True, transpose_b=True), "TT-bcast"),
    Case("nn.batch_matmul", [_f(3, 2, 4), _f(1, 4, 5)], dict(transpose_a=False, transpose_b=False),
         "bcast-b"),
    Case("nn.bias_add", [_f(2, 3, 4, 2), _f(3)], {}, "axis1"),
    Case("nn.bias_add", [_f(2, 3, 4), _f(4)], dict(axis=2), "axis2"),
    Case("nn.bias_add", [_f(1, 3, 4, 2, 4), _f(12)], dict(axis=1, block=4), "blocked"),
    # channel-blocked layouts
    Case("layout_transform", [_f(1, 8, 3, 5)], dict(src_layout="NCHW", dst_layout="NCHW4c"), "to-blocks"),
    Case("layout_transform", [_f(2, 2, 3, 5, 4)], dict(src_layout="NCHW4c", dst_layout="NCHW"), "to-plain"),
    Case("layout_transform", [_f(1, 2, 3, 2, 4)], dict(src_layout="NCHW4c", dst_layout="NCHW8c"), "reblock"),
    Case("nn.conv2d_nchwc", [_f(1, 2, 6, 5, 3), _f(2, 2, 3, 3, 3, 4)],
         dict(strides=(1, 2), padding=(1, 1, 1, 0), dilation=(1, 1)), "padded-strided"),
    Case("nn.conv2d_nchwc", [_f(1, 4, 6, 5, 2), _f(4, 2, 3, 3, 2, 3)],
         dict(strides=(2, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=2), "grouped"),
    Case("nn.conv2d_nchwc", [_f(1, 2, 6, 5, 6), _f(4, 1, 3, 3, 3, 3)],
         dict(strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=4), "groups-in-a-block"),
    Case("nn.conv2d_winograd_nchwc", [_f(1, 2, 6, 5, 3), _f(36, 2, 6, 4)],
         dict(padding=(1, 1, 1, 0), tile_size=4, block=4), "partial-tiles", atol=1e-3),  # outputs ~1e3
    Case("nn.conv2d_winograd_nchwc", [_f(1, 1, 4, 4, 4), _f(16, 1, 4, 8)],
         dict(padding=(1, 1, 1, 1), tile_size=2, block=8), "m2", atol=1e-4),
    Case("nn.depthwise_conv2d_nchwc", [_f(1, 2, 7, 6, 4), _f(2, 3, 3, 4)],
         dict(strides=(2, 1), padding=(1, 1, 1, 1), dilation=(1, 1)), "strided"),
    Case("nn.conv2d_depthwise_nchwc", [_f(1, 2, 7, 6, 4), _f(3, 2, 1, 1, 4, 2), _f(6), _f(3, 3, 3, 2)],
         dict(strides=(2, 1), padding=(1, 1, 1, 1), dilation=(1, 1), mid_epilogue=("bias", "relu6")),
         "strided"),
    Case("nn.pool2d_nchwc", [_f(1, 2, 7, 7, 4)], dict(POOL, kind="max"), "max"),
    Case("nn.dense_pack", [_f(3, 5), _f(2, 5, 4)], dict(units=7), "tail"),
    Case("nn.pool2d_nchwc", [_f(1, 2, 6, 6, 4)], dict(POOL, kind="avg", count_include_pad=False), "avg"),
    Case("nn.batch_norm", [_f(2, 3, 4, 4), _f(3), _f(3), _f(3), _f(3)], dict(epsilon=1e-5), "",
         positive=True),
    # elementwise
    Case("nn.relu", [_f(3, 4)]),
    Case("nn.relu", [_f(3, 4, dtype="int32")], id="int32"),
    Case("clip", [_f(3, 4)], dict(a_min=-0.8, a_max=0.9)),
    Case("clip", [_f(3, 4, dtype="int32")], dict(a_min=-2.5, a_max=6.0), "int32"),
    Case("clip", [_f(5)], dict(a_min=0.0, a_max=None), "open"),
    Case("sigmoid", [_f(2, 5)]),
    Case("tanh", [_f(2, 5)]),
    Case("exp", [_f(2, 5)]),
    Case("log", [_f(2, 5)], positive=True),
    Case("sqrt", [_f(2, 5)], positive=True),
    Case("erf", [_f(2, 5)]),
    Case("negative", [_f(2, 5)]),
    Case("abs", [_f(2, 5)]),
    Case("abs", [_f(2, 5, dtype="int64")], id="int64"),
    Case("sin", [_f(2, 5)]),
    Case("cos", [_f(2, 5)]),
    Case("tan", [np.random.default_rng(7).uniform(-1.5, 1.5, (2, 5)).astype("float32")]),
    Case("asin", [np.random.default_rng(8).uniform(-1, 1, (2, 5)).astype("float32")]),
    Case("acos", [np.random.default_rng(9).uniform(-1, 1, (2, 5)).astype("float32")]),
    Case("atan", [_f(2, 5)]),
    Case("sinh", [_f(2, 5)]),
    Case("cosh", [_f(2, 5)]),
    Case("asinh", [_f(2, 5)]),
    Case("acosh", [np.random.default_rng(10).uniform(1, 5, (2, 5)).astype("float32")]),
    Case("atanh", [np.random.default_rng(11).uniform(-0.99, 0.99, (2, 5)).astype("float32")]),
    Case("isnan", [np.array([[1.0, np.nan, -np.inf, 0.5, np.inf]], "float32")]),
    Case("isinf", [np.array([[1.0, np.nan, -np.inf, 0.5, np.inf]], "float32")]),
    Case("floor", [np.array([[-2.5, -0.5, 0.0, 0.5, 1.7, 3.0]], "float32")]),
    Case("ceil", [np.array([[-2.5, -0.5, 0.0, 0.5, 1.7, 3.0]], "float32")]),
    Case("round", [np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6, -0.4]], "float32")], id="halves-to-even"),
    Case("sign", [np.array([[-2.5, -0.0, 0.0, 0.5, 7.0]], "float32")], id="zeros"),
    Case("sign", [_f(2, 5, dtype="int32")], id="int32"),
    Case("reciprocal", [_f(2, 5)]),
    Case("cast", [_f(2, 5)], dict(dtype="int32"), "to-int32"),
    Case("cast", [_f(2, 5, dtype="int64")], dict(dtype="float32"), "to-float32"),
    Case("cast", [np.array([[0, 3, -2], [1, 0, 5]], "int32")], dict(dtype="bool"), "to-bool"),
    Case("nn.gelu", [_f(3, 4)], dict(approximate="none"), "erf"),
    Case("nn.gelu", [_f(3, 4)], dict(approximate="tanh"), "tanh"),
    Case("nn.silu", [_f(2, 5)]),
    # random over both clipped ends (|x| > 3) and the curve between
    Case("nn.hardswish", [np.random.default_rng(6).uniform(-5, 5, (3, 8)).astype("float32")]),
    Case("nn.leaky_relu", [_f(3, 8)], dict(alpha=0.1)),
    Case("nn.leaky_relu", [_f(4, 5, dtype="float64")], dict(alpha=-2.0), "steep-negative"),
    # broadcast
    Case("add", [_f(2, 3, 4), _f(3, 1)]),
    Case("add", [_f(2, 3), ((), F32)], id="scalar"),
    Case("subtract", [_f(4, 1), _f(1, 5)]),
    Case("multiply", [_f(2, 3), _f(2, 3, dtype=F32)]),
    Case("multiply", [_f(2, 3, dtype="int32"), _f(3, dtype="int32")], id="int32"),
    Case("divide", [_f(2, 3), _f(2, 1)]),
    Case("divide", [_f(3, 4, dtype="int32"), _f(4, dtype="int32")], id="int32-trunc"),
    Case("power", [_f(2, 3), _f(3)], positive=True),
    Case("maximum", [_f(2, 3), _f(1, 3)]),
    Case("minimum", [_f(2, 3), _f(2, 1)]),
    Case("mod", [np.array([[7, -7, 7, -7], [5, -5, 0, 3]], "int32"), np.array([3, -3, 2, -5], "int32")],
         id="int32-divisor-sign"),
    Case("mod", [_f(2, 3), np.array([1.5, -0.7, 2.0], "float32")]),
    Case("fmod", [np.array([[7, -7, 7, -7], [5, -5, 0, 3]], "int64"), np.array([3, -3, 2, -5], "int64")],
         id="int64-dividend-sign"),
    Case("fmod", [_f(2, 3), np.array([1.5, -0.7, 2.0], "float32")]),
    Case("bitwise_and", [np.array([[12, -7, 255], [3, 0, -1]], "int32"), np.array([10, 6, -128], "int32")]),
    Case("bitwise_or", [np.array([[12, 7, 200]], "uint8"), np.array([[3], [128]], "uint8")]),
    Case("bitwise_xor", [np.array([[12, -7, 99]], "int64"), np.array([5, -1, 99], "int64")]),
    # shifts by the width and more: 0, or a negative value's sign
    Case("left_shift", [np.array([[1, 3, 200, 255]], "uint8"), np.array([0, 7, 8, 200], "uint8")],
         id="uint8-past-the-width"),
    Case("right_shift", [np.array([[-64, 64, -1, 1000]], "int32"), np.array([3, 31, 32, 40], "int32")],
         id="int32-arithmetic"),
    Case("right_shift", [np.array([[255, 128, 7]], "uint8"), np.array([1, 8, 9], "uint8")], id="uint8"),
    Case("bitwise_not", [np.array([[0, 1, -1, 127]], "int8")]),
    Case("equal", [np.array([[1, 2, 3], [3, 2, 1]], "int32"), np.array([1, 2, 1], "int32")]),
    Case("not_equal", [np.array([[1, 2, 3], [3, 2, 1]], "int32"), np.array([1, 2, 1], "int32")]),
    Case("less", [_f(2, 3), _f(3)]),
    Case("less_equal", [_f(2, 3), _f(3)]),
    Case("greater", [_f(2, 3), _f(3)]),
    Case("greater_equal", [_f(2, 3), _f(3)]),
    Case("where", [np.array([[True, False, True]]), _f(2, 3), _f(2, 1)]),
    # reductions
    Case("nn.max_pool2d", [_f(1, 2, 7, 7)], POOL),
    Case("nn.max_pool2d", [_f(1, 2, 6, 6)], dict(POOL, padding=(0, 0, 0, 0), ceil_mode=True), "ceil"),
    Case("nn.max_pool2d", [np.random.default_rng(13).integers(-128, 128, (1, 2, 7, 7)).astype("int8")], POOL,
         "int8"),
    Case("nn.avg_pool2d", [_f(1, 2, 7, 7)], dict(POOL, count_include_pad=True), "include-pad"),
    Case("nn.avg_pool2d", [_f(1, 2, 7, 7)], dict(POOL, count_include_pad=False), "exclude-pad"),
    Case("nn.avg_pool2d", [_f(1, 2, 6, 6)], dict(POOL, pool_size=(2, 2), padding=(0, 0, 0, 0),
                                                  ceil_mode=True, count_include_pad=False), "ceil"),
    Case("nn.global_avg_pool2d", [_f(2, 3, 4, 5)]),
    Case("mean", [_f(2, 3, 4)], dict(axis=(1,), keepdims=True), "keepdims"),
    Case("mean", [_f(2, 3, 4)], dict(axis=(0, 2), keepdims=False), "two-axes"),
    Case("sum", [_f(2, 3, 4)], dict(axis=(2,), keepdims=False)),
    Case("sum", [_f(2, 3, 4, dtype="int32")], dict(axis=(0, 1), keepdims=True), "int32"),
    Case("sum", [_f(2, 3, 4)], dict(axis=1), "int-axis"),
    Case("max", [_f(2, 3, 4)], dict(axis=(1,), keepdims=False)),
    Case("min", [_f(2, 3, 4)], dict(axis=None, keepdims=False), "all"),
    Case("prod", [_f(2, 3, 4)], dict(axis=(1,), keepdims=False)),
    Case("prod", [_f(2, 3, 4, dtype="int32")], dict(axis=(0, 2), keepdims=True), "int32"),
    Case("nn.softmax", [_f(2, 5)], dict(axis=1), "last"),
    Case("nn.softmax", [_f(2, 4, 3)], dict(axis=1), "middle"),
    Case("nn.layer_norm", [_f(2, 3, 8), _f(8), _f(8)], dict(axis=2, epsilon=1e-5), "last"),
    Case("nn.layer_norm", [_f(2, 3, 4), _f(3, 4), _f(4)], dict(axis=1, epsilon=1e-3), "two-axes"),
    # injective
    Case("reshape", [_f(2, 3, 4)], dict(newshape=(4, 6))),
    Case("reshape", [_f(2, 1, 6)], dict(newshape=(2, 3, 1, 2)), "unit-dims"),
    Case("transpose", [_f(2, 3, 4)], dict(axes=(2, 0, 1))),
    Case("transpose", [_f(2, 3)], {}, "default"),
    Case("concatenate", [_f(2, 3), _f(2, 1), _f(2, 2)], dict(axis=1)),
    Case("concatenate", [_f(1, 3, dtype="int32")], dict(axis=0), "one"),
    Case("take", [_f(5, 3), np.array([[4, 0], [2, -1]], "int64")], dict(axis=0), "int64"),
    Case("take", [_f(2, 6), np.array([5, 1, 3], "int32")], dict(axis=1), "int32"),
    Case("take", [_f(4, 3), np.array(2, "int64")], dict(axis=0), "scalar-index"),
    Case("gather", [_f(3, 5), np.array([[4, -1, 0, 9], [2, 2, -7, 1]], "int64")], dict(axis=1),
         "negative-and-clipped"),
    Case("strided_slice", [_f(5, 6)], dict(begin=(1, 0), end=(4, 6), strides=(1, 2))),
    Case("strided_slice", [_f(5, 6)], dict(begin=(0, 2), end=(100, 6), strides=(3, 1)), "clamped"),
    Case("expand", [_f(3, 1)], dict(shape=(2, 3, 4))),
    Case("nn.pad", [_f(2, 3)], dict(pad_width=((1, 0), (0, 2)), pad_value=0.5)),
    Case("nn.conv2d_transpose", [_f(1, 4, 3, 5), _f(4, 3, 3, 3)],
         dict(strides=(2, 2), padding=(1, 1, 1, 1), output_padding=(1, 0)), "upsampling"),
    Case("nn.conv2d_transpose", [_f(2, 4, 4, 3), _f(4, 1, 2, 3)],
         dict(strides=(1, 2), padding=(0, 1, 1, 0), dilation=(2, 1), groups=2), "grouped-dilated"),
    Case("argmax", [np.round(np.random.default_rng(8).uniform(-3, 3, (4, 9, 5))).astype("float32")],
         dict(axis=1), "ties"),
    Case("argmin", [_f(4, 6, dtype="int32")], dict(axis=0, keepdims=True, select_last_index=True), "last"),
    # image
    Case("image.resize2d", [_f(1, 2, 4, 5)], dict(size=(7, 11), method="linear", scale=(1.75, 2.2)),
         "linear"),
    Case("image.resize2d", [_f(2, 3, 6, 5, dtype="int32")],
         dict(size=(3, 9), method="nearest_neighbor", coordinate_transformation_mode="asymmetric",
              rounding_method="round_prefer_ceil"), "nearest-int"),
    Case("image.resize2d", [_f(1, 2, 5, 4)],
         dict(size=(7, 3), method="cubic", cubic_alpha=-0.75, cubic_exclude=1), "cubic"),
    Case("image.resize2d", [_f(1, 2, 9, 8)],
         dict(size=(4, 3), method="linear", antialias=1,
              coordinate_transformation_mode="half_pixel_symmetric"),
         "antialias"),
    # points beyond the image on every side: each padding mode reads outside it
    Case("image.grid_sample", [_f(2, 2, 3, 4), np.random.default_rng(12).uniform(-1.8, 1.8, (2, 2, 3, 5))
                               .astype("float32")],
         dict(method="bilinear", padding_mode="zeros", align_corners=False), "bilinear-zeros"),
    Case("image.grid_sample", [_f(1, 2, 4, 3), np.random.default_rng(13).uniform(-3.5, 3.5, (1, 2, 4, 3))
                               .astype("float32")],
         dict(method="nearest", padding_mode="reflection", align_corners=True), "nearest-reflection"),
    Case("image.grid_sample", [_f(1, 1, 4, 5), np.random.default_rng(14).uniform(-1.5, 1.5, (1, 2, 3, 3))
                               .astype("float32")],
         dict(method="bicubic", padding_mode="border", align_corners=False), "bicubic-border", atol=1e-5),
    # points no image holds: the reads stay inside it (NaN takes the first pixel)
    Case("image.grid_sample", [_f(1, 2, 3, 4), _EXTREME_POINTS],
         dict(method="nearest", padding_mode="border", align_corners=True), "nearest-border-extreme"),
    Case("image.grid_sample", [_f(1, 2, 3, 4), _INFINITE_POINTS],
         dict(method="nearest", padding_mode="reflection", align_corners=False), "nearest-reflection-inf"),
]


def case_id(c: Case) -> str:
    return f"{c.op}-{c.id}" if c.id else c.op


# Catalog modules whose operators have their cases in a test file of their own (each checks that
# every operator of its module has one).
OWN_TEST_FILES = {"compiler.graph.ops.indexing": "test_ops_indexing.py",
                  "compiler.graph.ops.qnn": "test_ops_qnn.py",
                  "compiler.graph.ops.vision": "test_ops_vision.py"}


def test_every_op_of_the_catalog_has_a_case():
    modules = {n: get_op(n).infer.__module__ for n in registered_ops()}
    catalog = {n for n, m in modules.items()
               if m.startswith("compiler.graph.ops.") and m not in OWN_TEST_FILES}
    assert len(catalog) >= 48
    assert catalog <= {c.op for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_infer_evaluate_compute_agree(case: Case):
    check_case(case)


def check_case(case: Case) -> None:
    """``infer`` gives the type of ``evaluate``'s result; ``compute``, built and run on poisoned
    outputs, matches ``evaluate``."""
    rng = np.random.default_rng(sum(map(ord, case_id(case))))
    op = get_op(case.op)
    arrays = case.arrays(rng)
    types = [TensorType(a.shape, a.dtype.name) for a in arrays]
    inferred = op.infer(types, case.attrs)
    results = op.evaluate(arrays, case.attrs)
    assert [(r.shape, r.dtype.name) for r in results] == [(t.shape, t.dtype) for t in inferred]

    placeholders = [te.placeholder(t.shape, dtype=t.dtype, name=f"in{k}") for k, t in enumerate(types)]
    outs = op.compute(placeholders, case.attrs)
    assert [(tuple(int(d) for d in o.shape), o.dtype) for o in outs] == [(t.shape, t.dtype) for t in inferred]
    s = te.create_schedule([o.op for o in outs])
    build_and_check(s, [*placeholders, *outs], arrays, results, rtol=1e-5, atol=case.atol)


BAD = [  # op, input types, attrs, what the message says
    ("nn.conv2d", [((1, 3, 5, 5), F32), ((4, 2, 3, 3), F32)], CONV, "input channels"),
    ("nn.conv2d", [((1, 3, 5, 5), F32), ((4, 3, 3, 3), "float64")], CONV, "dtype"),
    ("nn.conv2d", [((1, 4, 5, 5), F32), ((4, 2, 3, 3), F32)], dict(CONV, groups=3), "groups"),
    ("nn.conv2d", [((1, 3, 2, 2), F32), ((4, 3, 3, 3), F32)], CONV, "does not fit"),
    ("nn.conv2d_nchwc", [((1, 4, 5, 5, 2), F32), ((3, 2, 3, 3, 2, 4), F32)], dict(groups=2),
     "groups=2 must divide the weight's 3 output blocks"),
    ("nn.conv2d_nchwc", [((1, 2, 5, 5, 4), F32), ((4, 1, 3, 3, 3, 4), F32)], dict(groups=2),
     "do not match"),  # a group of 3 channels in blocks of 4
    ("nn.conv2d_nchwc", [((1, 4, 5, 5, 2), F32), ((4, 1, 3, 3, 2, 4), F32)], dict(groups=2),
     r"do not match the data.s \(4, 2\) in 2 group"),
    ("nn.conv2d_winograd_nchwc", [((1, 2, 6, 5, 3), F32), ((16, 2, 6, 4), F32)],
     dict(padding=(1, 1, 1, 1), tile_size=4, block=4), "not a transformed 3x3 kernel"),
    ("nn.conv2d_winograd_nchwc", [((1, 2, 6, 5, 3), F32), ((36, 2, 6, 4), F32)],
     dict(padding=(1, 1, 1, 1), tile_size=3, block=4), "tile_size must be one of"),
    ("nn.conv2d_winograd_nchwc", [((1, 2, 6, 5, 3), F32), ((36, 2, 6, 4), F32)],
     dict(padding=(1, 1, 1, 1), tile_size=4, block=3), "blocks of 3"),
    ("nn.dense", [((3, 5), F32), ((4, 6), F32)], {}, "columns"),
    ("nn.batch_matmul", [((2, 3, 4), F32), ((3, 4, 5), F32)], {}, "batch sizes"),
    ("nn.batch_matmul", [((2, 3, 4), F32), ((2, 5, 4), F32)], {}, "reduction lengths"),
    ("nn.bias_add", [((2, 3), F32), ((2,), F32)], {}, "shape"),
    ("nn.batch_norm", [((2, 3), F32), ((3,), F32), ((3,), F32), ((4,), F32), ((3,), F32)], {}, "moving_mean"),
    ("exp", [((2,), "int32")], {}, "float"),
    ("bitwise_and", [((2,), F32), ((2,), F32)], {}, "must be an integer tensor, got float32"),
    ("bitwise_not", [((2,), "bool")], {}, "must be an integer tensor, got bool"),
    ("nn.relu", [((2,), F32), ((2,), F32)], {}, "takes 1 input"),
    ("cast", [((2,), F32)], dict(dtype="complex64"), "dtype"),
    ("nn.gelu", [((2,), F32)], dict(approximate="erf"), "approximate"),
    ("add", [((2, 3), F32), ((4,), F32)], {}, "broadcast"),
    ("add", [((2, 3), F32), ((3,), "float64")], {}, "dtype"),
    ("where", [((2,), "int32"), ((2,), F32), ((2,), F32)], {}, "bool"),
    ("nn.max_pool2d", [((1, 2, 5), F32)], POOL, "4-D"),
    ("nn.avg_pool2d", [((1, 2, 2, 2), F32)], dict(POOL, pool_size=(5, 5), padding=(0, 0, 0, 0)), "fit"),
    ("mean", [((2, 3), F32)], dict(axis=(2,)), "out of range"),
    ("sum", [((2, 3), F32)], dict(axis=(1, 1)), "distinct"),
    ("nn.softmax", [((2, 3), F32)], dict(axis=2), "out of range"),
    ("nn.layer_norm", [((2, 4), F32), ((3,), F32), ((4,), F32)], dict(axis=1), "gamma"),
    ("reshape", [((2, 3), F32)], dict(newshape=(4, 2)), "cannot reshape"),
    ("transpose", [((2, 3, 4), F32)], dict(axes=(0, 0, 1)), "permutation"),
    ("concatenate", [((2, 3), F32), ((3, 3), F32)], dict(axis=1), "differ"),
    ("take", [((4, 3), F32), ((2,), F32)], {}, "indices"),
    ("strided_slice", [((4, 3), F32)], dict(begin=(3, 0), end=(0, 3), strides=(-1, 1)), "positive strides"),
    ("expand", [((3, 2), F32)], dict(shape=(3, 4)), "broadcast"),
    ("nn.pad", [((3, 2), F32)], dict(pad_width=((1, 1),)), "pad_width"),
    ("nn.conv2d_transpose", [((1, 4, 3, 3), F32), ((3, 2, 3, 3), F32)], {}, "input channels"),
    ("nn.conv2d_transpose", [((1, 4, 3, 3), F32), ((4, 2, 3, 3), F32)], dict(output_padding=(1, 0)),
     "output_padding"),
    ("argmax", [((2, 3), F32)], dict(axis=(0, 1)), "one axis"),
    ("gather", [((2, 3), F32), ((2, 3, 1), "int64")], {}, "rank"),
    ("gather", [((2, 3), F32), ((3, 2), "int64")], dict(axis=1), "reach past"),
    ("image.resize2d", [((2, 3, 4), F32)], dict(size=(4, 4)), "4-D NCHW"),
    ("image.resize2d", [((1, 1, 2, 2), "int32")], dict(size=(4, 4), method="linear"), "float tensor"),
    ("image.resize2d", [((1, 1, 2, 2), F32)], dict(size=(4, 4), method="area"), "method must be"),
    ("image.resize2d", [((1, 1, 2, 2), F32)], dict(size=(4, 4), method="cubic", cubic_exclude=2),
     "cubic_exclude"),
    ("image.resize2d", [((1, 1, 2, 2), F32)], dict(size=(4, 0)), "at least 1"),
    ("image.resize2d", [((1, 1, 2, 2), F32)], dict(size=(1, 1), method="nearest_neighbor", antialias=1),
     "antialias takes method 'linear' or 'cubic'"),
    ("image.grid_sample", [((1, 1, 2, 2), F32), ((1, 2, 3, 3), F32)], dict(method="cubic"), "method must be"),
    ("image.grid_sample", [((1, 1, 2, 2), F32), ((1, 3, 3, 2), F32)], {}, r"grid \(N, 2, H_out, W_out\)"),
    ("image.grid_sample", [((1, 1, 2, 2), F32), ((1, 2, 3, 3), F32)], dict(padding_mode="wrap"),
     "padding_mode must be"),
]


@pytest.mark.parametrize("op,types,attrs,message", BAD, ids=[f"{b[0]}-{b[3]}" for b in BAD])
def test_infer_refuses_bad_inputs(op, types, attrs, message):
    check_refused(op, types, attrs, message)


def check_refused(op: str, types, attrs: dict, message: str) -> None:
    """``infer`` raises a GraphError naming ``op`` and matching ``message``."""
    with pytest.raises(GraphError, match=message) as info:
        get_op(op).infer([TensorType(shape, dtype) for shape, dtype in types], attrs)
    assert op in str(info.value)


# ---------------------------------------------------------------------------- the interpreter


def _small_cnn(rng) -> tuple[Graph, dict]:
    x = Value("x", TensorType((1, 3, 6, 6), F32))
    w = Value.constant("w", random_array(rng, (4, 3, 3, 3), F32))
    b = Value.constant("b", random_array(rng, (4,), F32))
    fc = Value.constant("fc", random_array(rng, (5, 4), F32))
    conv, biased, act, pooled, flat, logits, prob = (
        Value(n, TensorType(s, F32)) for n, s in [
            ("conv", (1, 4, 6, 6)), ("biased", (1, 4, 6, 6)), ("act", (1, 4, 6, 6)), ("pooled", (1, 4, 1, 1)),
            ("flat", (1, 4)), ("logits", (1, 5)), ("prob", (1, 5))])
    nodes = [
        Node("nn.conv2d", [x, w], [conv], dict(CONV, padding=(1, 1, 1, 1)), "conv"),
        Node("nn.bias_add", [conv, b], [biased], {"axis": 1}, "bias"),
        Node("nn.relu", [biased], [act], {}, "relu"),
        Node("nn.global_avg_pool2d", [act], [pooled], {}, "gap"),
        Node("reshape", [pooled], [flat], {"newshape": (1, 4)}, "flatten"),
        Node("nn.dense", [flat, fc], [logits], {}, "fc"),
        Node("nn.softmax", [logits], [prob], {"axis": 1}, "softmax"),
    ]
    return Graph([x], [prob, conv], nodes, "small_cnn"), {"w": w.data, "b": b.data, "fc": fc.data}


def test_evaluate_runs_a_graph(rng):
    graph, weights = _small_cnn(rng)
    x = random_array(rng, (1, 3, 6, 6), F32)
    prob, conv = evaluate(graph, {"x": x})
    want_conv = compiler.topi.testing.conv2d_nchw_python(x, weights["w"], 1, 1)
    np.testing.assert_allclose(conv, want_conv, rtol=1e-5, atol=1e-6)
    act = np.maximum(want_conv + weights["b"].reshape(4, 1, 1), 0)
    logits = act.mean(axis=(2, 3)) @ weights["fc"].T
    e = np.exp(logits - logits.max())
    np.testing.assert_allclose(prob, e / e.sum(), rtol=1e-5, atol=1e-6)
    (same, _) = evaluate(graph, [x])  # a list in input order does too
    np.testing.assert_array_equal(same, prob)


@pytest.mark.parametrize("inputs,message", [
    ({"x": np.ones((1, 3, 6, 5), F32)}, "must be float32"),
    ({"x": np.ones((1, 3, 6, 6), "float64")}, "must be float32"),
    ({}, "needs inputs"),
    ({"x": np.ones((1, 3, 6, 6), F32), "y": np.ones(1)}, "no inputs named"),
    ([], "takes 1 inputs"),
])
def test_evaluate_checks_its_inputs(rng, inputs, message):
    graph, _ = _small_cnn(rng)
    with pytest.raises(GraphError, match=message):
        evaluate(graph, inputs)
