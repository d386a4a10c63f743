"""compiler.topi: the operators of ``topi.nn`` built with a plain schedule against the
references of ``topi.testing``, and those references against plain Python loops."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from compiler import te, topi
from tests.helpers import build_and_check, random_array

RTOL = ATOL = 1e-5


def _run(out, inputs, arrays, expected, rtol=RTOL, atol=ATOL):
    """Build ``out`` with ``te.create_schedule`` and compare it with ``expected``
    (outputs poisoned first, so unwritten elements fail)."""
    s = te.create_schedule(out.op)
    build_and_check(s, [*inputs, out], arrays, [expected], rtol=rtol, atol=atol)


def _placeholders(rng, *shapes, dtype="float32"):
    tensors = [te.placeholder(shape, name=f"T{k}", dtype=dtype) for k, shape in enumerate(shapes)]
    return tensors, [random_array(rng, shape, dtype) for shape in shapes]


# ---------------------------------------------------------------------------- topi.nn vs topi.testing


def test_pad_borders_with_the_value(rng):
    (A,), (a,) = _placeholders(rng, (3, 4))
    P = topi.nn.pad(A, (1, 0), (0, 2), pad_value=7.5)
    _run(P, [A], [a], np.pad(a, ((1, 0), (0, 2)), constant_values=7.5))


def test_pad_after_defaults_to_before(rng):
    (A,), (a,) = _placeholders(rng, (2, 3, 4), dtype="int32")
    P = topi.nn.pad(A, (0, 1, 2))
    _run(P, [A], [a], np.pad(a, ((0, 0), (1, 1), (2, 2))))


CONV_CASES = [  # stride, padding, dilation
    (1, 1, 1),
    (2, (1, 2), 1),
    ((1, 2), (0, 1, 2, 1), 2),
    (1, "SAME", 1),
    (2, "VALID", (2, 1)),
]


@pytest.mark.parametrize("stride,padding,dilation", CONV_CASES)
def test_conv2d_nchw(rng, stride, padding, dilation):
    (X, W), (x, w) = _placeholders(rng, (2, 3, 7, 6), (4, 3, 3, 2))
    Y = topi.nn.conv2d_nchw(X, W, stride, padding, dilation)
    want = topi.testing.conv2d_nchw_python(x, w, stride, padding, dilation=dilation)
    _run(Y, [X, W], [x, w], want)


@pytest.mark.parametrize("stride,padding,dilation", CONV_CASES[:3])
def test_conv2d_nhwc(rng, stride, padding, dilation):
    (X, W), (x, w) = _placeholders(rng, (1, 7, 6, 3), (3, 2, 3, 5))
    Y = topi.nn.conv2d_nhwc(X, W, stride, padding, dilation)
    want = topi.testing.conv2d_nhwc_python(x, w, stride, padding, dilation=dilation)
    _run(Y, [X, W], [x, w], want)


def test_conv2d_by_layout_and_out_dtype(rng):
    (X, W), (x, w) = _placeholders(rng, (1, 5, 5, 2), (3, 3, 2, 4), dtype="int8")
    Y = topi.nn.conv2d(X, W, 1, 1, 1, layout="NHWC", out_dtype="int32")
    assert Y.dtype == "int32"
    want = topi.testing.conv2d_nhwc_python(x.astype("int32"), w.astype("int32"), 1, 1)
    _run(Y, [X, W], [x, w], want)


def test_conv2d_nchw_has_tvms_structure():
    """TVM's templates inline ``conv.op.input_tensors[0]`` and split ``rc, ry, rx``."""
    X = te.placeholder((1, 3, 8, 8), name="X")
    W = te.placeholder((4, 3, 3, 3), name="W")
    for padding in (0, 1):
        Y = topi.nn.conv2d_nchw(X, W, 1, padding, 1)
        pad_temp = Y.op.input_tensors[0]
        assert pad_temp.op.input_tensors == [X]
        assert [iv.var.name for iv in Y.op.reduce_axis] == ["rc", "ry", "rx"]
    s = te.create_schedule(Y.op)
    s[pad_temp].compute_inline()
    rng = np.random.default_rng(1)
    x, w = random_array(rng, (1, 3, 8, 8), "float32"), random_array(rng, (4, 3, 3, 3), "float32")
    build_and_check(s, [X, W, Y], [x, w], [topi.testing.conv2d_nchw_python(x, w, 1, 1)], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("mult,stride,padding,dilation",
                         [(1, 1, 1, 1), (2, 2, "SAME", 1), (3, (1, 2), (2, 1), 2)])
def test_depthwise_conv2d_nchw(rng, mult, stride, padding, dilation):
    (X, W), (x, w) = _placeholders(rng, (2, 3, 7, 8), (3, mult, 3, 3))
    Y = topi.nn.depthwise_conv2d_nchw(X, W, stride, padding, dilation)
    assert Y.shape[1].value == 3 * mult
    want = topi.testing.depthwise_conv2d_python_nchw(x, w, stride, padding, dilation=dilation)
    _run(Y, [X, W], [x, w], want)


@pytest.mark.parametrize("bias", [False, True])
def test_dense(rng, bias):
    shapes = [(5, 7), (6, 7)] + ([(6,)] if bias else [])
    tensors, arrays = _placeholders(rng, *shapes)
    Y = topi.nn.dense(*tensors[:2], tensors[2] if bias else None)
    want = arrays[0].astype("float64") @ arrays[1].T.astype("float64") + (arrays[2] if bias else 0)
    _run(Y, tensors, arrays, want.astype("float32"))


@pytest.mark.parametrize("transpose_a,transpose_b", list(itertools.product([False, True], repeat=2)))
def test_matmul(rng, transpose_a, transpose_b):
    shape_a = (7, 5) if transpose_a else (5, 7)
    shape_b = (6, 7) if transpose_b else (7, 6)
    (A, B, b), (a, bb, bias) = _placeholders(rng, shape_a, shape_b, (6,))
    Y = topi.nn.matmul(A, B, b, transpose_a=transpose_a, transpose_b=transpose_b)
    want = (a.T if transpose_a else a).astype("float64") @ (bb.T if transpose_b else bb) + bias
    _run(Y, [A, B, b], [a, bb, bias], want.astype("float32"))


@pytest.mark.parametrize("transpose_a,transpose_b,batches", [
    (False, True, (3, 3)), (False, False, (3, 3)), (True, False, (1, 3)), (True, True, (2, 1))])
def test_batch_matmul(rng, transpose_a, transpose_b, batches):
    shape_a = (batches[0], 6, 4) if transpose_a else (batches[0], 4, 6)
    shape_b = (batches[1], 5, 6) if transpose_b else (batches[1], 6, 5)
    (A, B), (a, b) = _placeholders(rng, shape_a, shape_b)
    Y = topi.nn.batch_matmul(A, B, transpose_a=transpose_a, transpose_b=transpose_b)
    assert tuple(d.value for d in Y.shape) == (max(batches), 4, 5)
    want = topi.testing.batch_matmul(a, b, trans_x=transpose_a, trans_y=transpose_b)
    _run(Y, [A, B], [a, b], want)


POOL_CASES = [  # kernel, stride, dilation, padding, pool_type, ceil_mode, count_include_pad
    (2, 2, 1, (0, 0, 0, 0), "max", False, True),
    (3, 2, 1, (1, 1, 1, 1), "max", True, True),
    ((3, 2), (1, 2), (2, 1), (1, 0, 2, 1), "max", False, True),
    (3, 1, 1, (1, 1, 1, 1), "avg", False, True),
    (3, 2, 1, (1, 2, 0, 1), "avg", False, False),
    (3, 2, 1, (1, 1, 1, 1), "avg", True, True),
    (2, 2, 2, (1, 1, 1, 1), "avg", True, False),
]


@pytest.mark.parametrize("kernel,stride,dilation,padding,pool_type,ceil_mode,count_include_pad", POOL_CASES)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_pool2d(rng, layout, kernel, stride, dilation, padding, pool_type, ceil_mode, count_include_pad):
    shape = (2, 3, 8, 7) if layout == "NCHW" else (2, 8, 7, 3)
    (X,), (x,) = _placeholders(rng, shape)
    Y = topi.nn.pool2d(X, kernel, stride, dilation, padding, pool_type, ceil_mode, layout, count_include_pad)
    want = topi.testing.pool2d_python(x, kernel, stride, dilation, padding, pool_type, ceil_mode, layout,
                                      count_include_pad)
    assert np.isfinite(want).all()
    _run(Y, [X], [x], want)


@pytest.mark.parametrize("shape,axis", [((4, 9), -1), ((2, 5, 3), 1)])
def test_softmax(rng, shape, axis):
    (X,), (x,) = _placeholders(rng, shape)
    Y = topi.nn.softmax(X, axis=axis)
    _run(Y, [X], [x], topi.testing.softmax_python(x, axis=axis))


def test_softmax_stages_are_tvms():
    """TVM's schedules find the stages through ``input_tensors``."""
    X = te.placeholder((4, 8), name="X")
    Y = topi.nn.softmax(X)
    exp, expsum = Y.op.input_tensors
    assert (exp.op.name, expsum.op.name) == ("T_softmax_exp", "T_softmax_expsum")
    assert exp.op.input_tensors[0] is X
    assert exp.op.input_tensors[1].op.name == "T_softmax_maxelem"


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_relu(rng, dtype):
    (X,), (x,) = _placeholders(rng, (3, 5), dtype=dtype)
    _run(topi.nn.relu(X), [X], [x], np.maximum(x, 0))


# each activation in plain Python, one element at a time: the table's numpy forms are checked
# against these, its TE forms against its numpy forms
_SCALAR_ACTIVATIONS = {
    "relu": lambda v: max(v, 0.0),
    "relu6": lambda v: min(max(v, 0.0), 6.0),
    "sigmoid": lambda v: 1.0 / (1.0 + math.exp(-v)),
    "silu": lambda v: v / (1.0 + math.exp(-v)),
    "hardswish": lambda v: v * min(max(v + 3.0, 0.0), 6.0) / 6.0,
    "gelu": lambda v: v * 0.5 * (1.0 + math.erf(v / math.sqrt(2.0))),
    "gelu_tanh": lambda v: v * 0.5 * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3))),
    "leaky_relu(0.1)": lambda v: v if v >= 0 else float(np.float32(0.1)) * v,
    "leaky_relu(-1.5)": lambda v: v if v >= 0 else -1.5 * v,  # a slope outside [0, 1]: not a max
}


def test_the_activation_table_is_complete():
    assert set(topi.nn.ACTIVATIONS) | {"leaky_relu(0.1)", "leaky_relu(-1.5)"} == set(_SCALAR_ACTIVATIONS)


def test_leaky_relu_names_its_slope_as_float32_and_refuses_other_names(rng):
    assert topi.nn.leaky_relu_name(0.1) == "leaky_relu(0.1)"
    assert topi.nn.leaky_relu_name(np.float32(0.01)) == "leaky_relu(0.01)"
    assert topi.nn.leaky_relu_name(2) == "leaky_relu(2.0)"
    for bad in ("leaky_relu", "leaky_relu(nan)", "leaky_relu(0.1", "swish"):
        with pytest.raises(ValueError, match="unknown activation"):
            topi.nn.activation(bad)
    (X,), (x,) = _placeholders(rng, (3, 5))
    _run(topi.nn.leaky_relu(X, 0.2), [X], [x], np.where(x < 0, x * np.float32(0.2), x))


@pytest.mark.parametrize("name", sorted(_SCALAR_ACTIVATIONS))
def test_activation_forms_agree(rng, name):
    """Each activation's kernel matches its numpy form on random values over both clipped ends
    (relu6 at 6, hardswish at -3 and 3), and the numpy form matches plain Python."""
    activation = topi.nn.activation(name)
    x = rng.uniform(-8.0, 8.0, size=(4, 33)).astype("float32")
    expected = activation.numpy(x.astype("float64"))
    scalar = np.vectorize(_SCALAR_ACTIVATIONS[name], otypes=[np.float64])(x.astype("float64"))
    np.testing.assert_allclose(expected, scalar, rtol=1e-12, atol=1e-12)
    X = te.placeholder(x.shape, name="X", dtype="float32")
    out = te.compute(x.shape, lambda i, j: activation.expr(X[i, j]), name="Y")
    _run(out, [X], [x], expected.astype("float32"))


# ---------------------------------------------------------------------------- bad arguments


def _conv_inputs():
    return te.placeholder((1, 3, 5, 5), name="X"), te.placeholder((4, 3, 3, 3), name="W")


@pytest.mark.parametrize("call,match", [
    (lambda X, W: topi.nn.conv2d_nchw(X, te.placeholder((4, 2, 3, 3)), 1, 0, 1), "2 input channels"),
    (lambda X, W: topi.nn.conv2d_nchw(X, W, 1, "FULL", 1), "padding must be"),
    (lambda X, W: topi.nn.conv2d_nchw(X, W, 1, (1, 2, 3), 1), "padding must be"),
    (lambda X, W: topi.nn.conv2d_nchw(X, W, 1, -1, 1), "must not be negative"),
    (lambda X, W: topi.nn.conv2d_nchw(X, W, 0, 0, 1), "stride must be positive"),
    (lambda X, W: topi.nn.conv2d_nchw(X, W, (1, 2, 3), 0, 1), "stride must be an int or a pair"),
    (lambda X, W: topi.nn.conv2d_nchw(X, W, 1, 0, 3), "does not fit"),
    (lambda X, W: topi.nn.conv2d_nchw(te.placeholder((3, 5, 5)), W, 1, 0, 1), "4 dimensions"),
    (lambda X, W: topi.nn.conv2d(X, W, 1, 0, 1, layout="NCHWc"), "layout"),
    (lambda X, W: topi.nn.depthwise_conv2d_nchw(X, te.placeholder((2, 1, 3, 3)), 1, 0, 1), "2 channels"),
    (lambda X, W: topi.nn.pool2d(X, 2, 2, 1, 0, "min"), "pool_type"),
    (lambda X, W: topi.nn.pool2d(X, 2, 2, 1, 0, "max", layout="HWCN"), "layout"),
    (lambda X, W: topi.nn.pool2d(X, 7, 1, 1, 0, "max"), "does not fit"),
    (lambda X, W: topi.nn.dense(te.placeholder((2, 5)), te.placeholder((4, 6))), "reduction lengths"),
    (lambda X, W: topi.nn.dense(te.placeholder((2, 5)), te.placeholder((4, 5)), te.placeholder((3,))),
     "bias has 3"),
    (lambda X, W: topi.nn.matmul(te.placeholder((2, 5)), te.placeholder((4, 5))), "reduction lengths"),
    (lambda X, W: topi.nn.batch_matmul(te.placeholder((2, 3, 5)), te.placeholder((3, 4, 5))), "batch sizes"),
    (lambda X, W: topi.nn.batch_matmul(te.placeholder((2, 3, 5)), te.placeholder((2, 4, 6))),
     "reduction lengths"),
    (lambda X, W: topi.nn.softmax(X, axis=4), "out of range"),
    (lambda X, W: topi.nn.softmax(te.placeholder((2, 3), dtype="int32")), "floating-point"),
    (lambda X, W: topi.nn.pad(X, (1, 1)), "one width per dimension"),
    (lambda X, W: topi.nn.pad(X, (0, 0, -1, 0)), "must not be negative"),
])
def test_bad_arguments_raise_clear_errors(call, match):
    X, W = _conv_inputs()
    with pytest.raises(ValueError, match=match):
        call(X, W)


def test_non_tensor_input_is_refused():
    with pytest.raises(TypeError, match="te.Tensor"):
        topi.nn.conv2d_nchw(np.zeros((1, 3, 5, 5)), te.placeholder((4, 3, 3, 3)), 1, 0, 1)
    with pytest.raises(TypeError, match="te.Tensor"):
        topi.nn.relu([1.0])


def test_get_pad_tuple_is_tvms():
    assert topi.nn.get_pad_tuple(1, (3, 3)) == (1, 1, 1, 1)
    assert topi.nn.get_pad_tuple((1, 2), (3, 3)) == (1, 2, 1, 2)
    assert topi.nn.get_pad_tuple((1, 2, 3, 4), (3, 3)) == (1, 2, 3, 4)
    assert topi.nn.get_pad_tuple("VALID", (3, 3)) == (0, 0, 0, 0)
    assert topi.nn.get_pad_tuple("SAME", (4, 3)) == (2, 1, 1, 1)  # the larger half first


# ---------------------------------------------------------------------------- topi.testing vs loops


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def _loop_conv_nchw(x, w, stride, pads, dilation):
    (sh, sw), (dh, dw), (top, left, bottom, right) = stride, dilation, pads
    N, C, H, W = x.shape
    F, _, KH, KW = w.shape
    Ho = (H + top + bottom - dh * (KH - 1) - 1) // sh + 1
    Wo = (W + left + right - dw * (KW - 1) - 1) // sw + 1
    out = np.zeros((N, F, Ho, Wo))
    for n, f, y, xx, c, ry, rx in itertools.product(range(N), range(F), range(Ho), range(Wo), range(C),
                                                    range(KH), range(KW)):
        iy, ix = y * sh + ry * dh - top, xx * sw + rx * dw - left
        if 0 <= iy < H and 0 <= ix < W:
            out[n, f, y, xx] += float(x[n, c, iy, ix]) * float(w[f, c, ry, rx])
    return out


@pytest.mark.parametrize("stride,padding,dilation,pads", [
    (1, 1, 1, (1, 1, 1, 1)), ((2, 1), (0, 1, 2, 1), (1, 2), (0, 1, 2, 1)), (1, "SAME", 2, (2, 1, 2, 1))])
def test_conv2d_references_against_loops(rng, stride, padding, dilation, pads):
    x, w = random_array(rng, (2, 2, 5, 4), "float64"), random_array(rng, (3, 2, 3, 2), "float64")
    want = _loop_conv_nchw(x, w, _pair(stride), pads, _pair(dilation))
    got = topi.testing.conv2d_nchw_python(x, w, stride, padding, dilation=dilation)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    nhwc = topi.testing.conv2d_nhwc_python(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), stride, padding,
                                           dilation=dilation)
    np.testing.assert_allclose(nhwc, want.transpose(0, 2, 3, 1), rtol=1e-12)
    if dilation == 1:  # TVM's way: a dilated filter instead of a dilation argument
        dil = topi.testing.dilate_python(w, (1, 1, 1, 1))
        np.testing.assert_allclose(topi.testing.conv2d_nchw_python(x, dil, stride, padding), want, rtol=1e-12)


def test_dilate_python_against_loops(rng):
    w = random_array(rng, (2, 3), "float32")
    got = topi.testing.dilate_python(w, (2, 3), dilation_value=-1.0)
    want = np.full((3, 7), -1.0, dtype="float32")
    for i, j in itertools.product(range(2), range(3)):
        want[2 * i, 3 * j] = w[i, j]
    np.testing.assert_array_equal(got, want)


def test_depthwise_reference_against_loops(rng):
    x, w = random_array(rng, (1, 2, 5, 5), "float64"), random_array(rng, (2, 2, 3, 3), "float64")
    got = topi.testing.depthwise_conv2d_python_nchw(x, w, 2, 1, dilation=1)
    Ho = Wo = (5 + 2 - 3) // 2 + 1
    want = np.zeros((1, 4, Ho, Wo))
    for c, y, xx, ry, rx in itertools.product(range(4), range(Ho), range(Wo), range(3), range(3)):
        iy, ix = 2 * y + ry - 1, 2 * xx + rx - 1
        if 0 <= iy < 5 and 0 <= ix < 5:
            want[0, c, y, xx] += x[0, c // 2, iy, ix] * w[c // 2, c % 2, ry, rx]
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("kernel,stride,dilation,padding,pool_type,ceil_mode,count_include_pad", POOL_CASES)
def test_pool_reference_against_loops(rng, kernel, stride, dilation, padding, pool_type, ceil_mode,
                                      count_include_pad):
    x = random_array(rng, (1, 2, 6, 5), "float64")
    (kh, kw), (sh, sw), (dh, dw) = (_pair(v) for v in (kernel, stride, dilation))
    top, left, bottom, right = padding
    rnd = math.ceil if ceil_mode else math.floor
    Ho = rnd((6 + top + bottom - dh * (kh - 1) - 1) / sh) + 1
    Wo = rnd((5 + left + right - dw * (kw - 1) - 1) / sw) + 1
    want = np.zeros((1, 2, Ho, Wo))
    for c, y, xx in itertools.product(range(2), range(Ho), range(Wo)):
        vals, count = [], 0
        for ry, rx in itertools.product(range(kh), range(kw)):
            iy, ix = y * sh + ry * dh - top, xx * sw + rx * dw - left
            real = 0 <= iy < 6 and 0 <= ix < 5
            padded = -top <= iy < 6 + bottom and -left <= ix < 5 + right
            if real:
                vals.append(x[0, c, iy, ix])
            count += real if not count_include_pad else padded
        want[0, c, y, xx] = max(vals) if pool_type == "max" else sum(vals) / count
    got = topi.testing.pool2d_python(x, kernel, stride, dilation, padding, pool_type, ceil_mode, "NCHW",
                                     count_include_pad)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    got_nhwc = topi.testing.pool2d_python(x.transpose(0, 2, 3, 1), kernel, stride, dilation, padding,
                                          pool_type, ceil_mode, "NHWC", count_include_pad)
    np.testing.assert_allclose(got_nhwc, want.transpose(0, 2, 3, 1), rtol=1e-12)


def test_softmax_reference_against_loops(rng):
    x = random_array(rng, (2, 3, 4), "float64")
    got = topi.testing.softmax_python(x, axis=1)
    for n, k in itertools.product(range(2), range(4)):
        col = [x[n, j, k] for j in range(3)]
        total = sum(math.exp(v - max(col)) for v in col)
        for j in range(3):
            assert got[n, j, k] == pytest.approx(math.exp(col[j] - max(col)) / total, rel=1e-12)


@pytest.mark.parametrize("trans_x,trans_y", list(itertools.product([False, True], repeat=2)))
def test_batch_matmul_reference_against_loops(rng, trans_x, trans_y):
    x = random_array(rng, (2, 4, 3) if trans_x else (2, 3, 4), "int32")
    y = random_array(rng, (1, 5, 4) if trans_y else (1, 4, 5), "int32")
    got = topi.testing.batch_matmul(x, y, trans_x=trans_x, trans_y=trans_y)
    assert got.dtype == np.int32 and got.shape == (2, 3, 5)
    for b, i, j in itertools.product(range(2), range(3), range(5)):
        a_row = [x[b, k, i] if trans_x else x[b, i, k] for k in range(4)]
        b_col = [y[0, j, k] if trans_y else y[0, k, j] for k in range(4)]
        assert got[b, i, j] == sum(int(p) * int(q) for p, q in zip(a_row, b_col))


def test_references_refuse_windows_that_do_not_fit():
    x = np.ones((1, 1, 2, 2), dtype="float32")
    with pytest.raises(ValueError, match="does not fit"):
        topi.testing.pool2d_python(x, 3, 1, 1, 0, "max")
    with pytest.raises(ValueError, match="does not fit"):
        topi.testing.conv2d_nchw_python(x, np.ones((1, 1, 3, 3), dtype="float32"), 1, 0)
    with pytest.raises(ValueError, match="pool_type"):
        topi.testing.pool2d_python(x, 1, 1, 1, 0, "min")


def test_symbolic_batch(rng):
    """A ``te.var`` batch stays symbolic through the operators, as in TVM."""
    n = te.var("n")
    X, W = te.placeholder((n, 3, 6, 6), name="X"), te.placeholder((4, 3, 3, 3), name="W")
    b = te.placeholder((4,), name="b")
    x, w, bias = (random_array(rng, shape, "float32") for shape in ((2, 3, 6, 6), (4, 3, 3, 3), (4,)))
    Y = topi.nn.conv2d_nchw(X, W, 1, 1, 1)
    _run(Y, [X, W], [x, w], topi.testing.conv2d_nchw_python(x, w, 1, 1))
    D = te.placeholder((n, 7), name="D")
    Wd = te.placeholder((4, 7), name="Wd")
    d, wd = random_array(rng, (3, 7), "float32"), random_array(rng, (4, 7), "float32")
    want = (d.astype("float64") @ wd.T + bias).astype("float32")
    _run(topi.nn.dense(D, Wd, b), [D, Wd, b], [d, wd, bias], want)


def test_the_example_in_docs_runs():
    """docs/topi.md's example builds, runs and passes its own check."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "topi.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", text, re.S)
    exec(compile(code, "docs/topi.md", "exec"), {})


def test_vectorize_reduction_refuses_what_it_cannot_split():
    from compiler.topi.utils import vectorize_reduction

    x = te.placeholder((4, 6, 10), name="x")
    k, j = te.reduce_axis((0, 10), name="k"), te.reduce_axis((0, 6), name="j")
    two = te.compute((4,), lambda i: te.sum(x[i, j, k], axis=[j, k]), name="two")
    one = te.compute((4, 6), lambda i, r: te.sum(x[i, r, k], axis=k), name="one")
    with pytest.raises(ValueError, match="'two' reduces over 2 axes, not one"):
        vectorize_reduction(te.create_schedule(two.op), two, 5)
    with pytest.raises(ValueError, match="width must be a positive int, got 0"):
        vectorize_reduction(te.create_schedule(one.op), one, 0)


@pytest.mark.parametrize("length, width", [(10, 4), (197, 16), (35, 8)])
def test_vectorize_reduction_guards_a_last_partial_vector(rng, length, width):
    from compiler.topi.utils import vectorize_reduction

    x = te.placeholder((6, length), name="x")
    k = te.reduce_axis((0, length), name="k")
    total = te.compute((6,), lambda i: te.sum(x[i, k], axis=k), name="total")
    peak = te.compute((6,), lambda i: te.max(x[i, k], axis=k), name="peak")
    data = random_array(rng, (6, length), "float32") - 2.0  # all negative: a 0 in a lane shows in the max
    for out, want in ((total, data.astype("float64").sum(axis=1)), (peak, data.max(axis=1))):
        s = te.create_schedule(out.op)
        vectorize_reduction(s, out, width)
        build_and_check(s, [x, out], [data], [want.astype("float32")], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------- transposed convolution


def _loop_conv_transpose(x, w, stride, pads, dilation, output_padding, groups):
    """The transposed convolution by its definition: every input pixel times every tap, added
    at ``iy * stride + ky * dilation - pad_top`` where that falls inside the output."""
    N, C, H, W = x.shape
    _, Fg, KH, KW = w.shape
    (sh, sw), (dh, dw), (oph, opw) = stride, dilation, output_padding
    top, left, bottom, right = pads
    Ho = sh * (H - 1) + oph + (KH - 1) * dh + 1 - top - bottom
    Wo = sw * (W - 1) + opw + (KW - 1) * dw + 1 - left - right
    out = np.zeros((N, Fg * groups, Ho, Wo))
    Cg = C // groups
    for n, c, iy, ix, f, ky, kx in itertools.product(range(N), range(C), range(H), range(W), range(Fg),
                                                       range(KH), range(KW)):
        oy, ox = iy * sh + ky * dh - top, ix * sw + kx * dw - left
        if 0 <= oy < Ho and 0 <= ox < Wo:
            out[n, (c // Cg) * Fg + f, oy, ox] += x[n, c, iy, ix] * w[c, f, ky, kx]
    return out


# (input, filter, stride, (top, left, bottom, right), dilation, output_padding, groups)
TRANSPOSED = [
    ((1, 3, 4, 5), (3, 2, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 1),  # a U-Net's 2x up-step
    ((2, 4, 3, 4), (4, 3, 2, 2), (2, 2), (0, 0, 0, 0), (1, 1), (0, 0), 1),
    ((1, 4, 5, 4), (4, 1, 3, 2), (1, 3), (0, 1, 2, 0), (2, 1), (1, 2), 2),  # grouped, dilated, uneven
    ((1, 2, 3, 3), (2, 3, 4, 4), (3, 1), (2, 0, 1, 1), (1, 1), (0, 0), 1),
]


@pytest.mark.parametrize("xshape, wshape, stride, pads, dilation, opad, groups", TRANSPOSED)
def test_conv2d_transpose_nchw(rng, xshape, wshape, stride, pads, dilation, opad, groups):
    (X, Wt), (x, w) = _placeholders(rng, xshape, wshape)
    expected = topi.testing.conv2d_transpose_nchw_python(x, w, stride, pads, opad, dilation, groups)
    np.testing.assert_allclose(expected, _loop_conv_transpose(x, w, stride, pads, dilation, opad, groups),
                               rtol=1e-5, atol=1e-5)
    out = topi.nn.conv2d_transpose_nchw(X, Wt, stride, pads, None, opad, dilation, groups)
    assert tuple(int(d) for d in out.shape) == expected.shape
    _run(out, [X, Wt], [x, w], expected, rtol=1e-4, atol=1e-5)


def test_conv2d_transpose_refuses_bad_arguments():
    X, Wt = te.placeholder((1, 4, 3, 3), name="X"), te.placeholder((4, 2, 3, 3), name="W")
    with pytest.raises(ValueError, match="output_padding must be below the stride"):
        topi.nn.conv2d_transpose_nchw(X, Wt, 2, 0, output_padding=(2, 0))
    with pytest.raises(ValueError, match=r"output_padding must be an int or \(h, w\)"):
        topi.nn.conv2d_transpose_nchw(X, Wt, 2, 0, output_padding=(1, 0, 1))
    with pytest.raises(ValueError, match="groups must divide"):
        topi.nn.conv2d_transpose_nchw(X, Wt, 1, 0, groups=3)
    with pytest.raises(ValueError, match="the filter has 5 input channels"):
        topi.nn.conv2d_transpose_nchw(X, te.placeholder((5, 2, 3, 3), name="V"), 1, 0)
    with pytest.raises(ValueError, match="leaves an output"):
        topi.nn.conv2d_transpose_nchw(X, Wt, 1, 3)
