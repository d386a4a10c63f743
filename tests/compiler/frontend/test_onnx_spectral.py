"""ONNX's ``DFT``, ``STFT`` and window operators imported as matrix products with constant DFT
matrices, checked against ONNX Runtime and numpy's FFT."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from compiler.frontend import from_onnx  # noqa: E402
from compiler.graph import GraphError, evaluate  # noqa: E402
from tests.onnx_helpers import make_model, rand, run_both  # noqa: E402


def _dft(x, opset=17, length=None, axis=None, check=True, **attrs):
    """A model of one DFT of input ``x``; ``axis`` an attribute before opset 20, an input from."""
    inputs, consts = ["x"], {}
    if length is not None:
        inputs.append("n")
        consts["n"] = np.array(length, "int64")
    if axis is not None and opset >= 20:
        inputs += [""] * (2 - len(inputs)) + ["axis"]
        consts["axis"] = np.array(axis, "int64")
    elif axis is not None:
        attrs["axis"] = axis
    node = helper.make_node("DFT", inputs, ["y"], **attrs)
    return make_model([node], {"x": x}, consts, opset=opset, check=check)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("shape, axis, length, attrs", [
    ((3, 16, 1), 1, None, {}),  # real
    ((3, 16, 1), 1, None, {"onesided": 1}),  # torch.fft.rfft
    ((2, 12, 2), 1, None, {}),  # complex
    ((2, 12, 2), 1, None, {"inverse": 1}),
    ((4, 5, 3, 2), 1, 8, {}),  # padded to 8
    ((4, 9, 3, 1), 2, 2, {"onesided": 1}),  # cut to 2, along the axis before the last but one
    ((5, 3, 7, 1), 0, None, {"inverse": 1}),  # along the batch axis
    ((2, 9, 2), 1, 16, {"inverse": 1, "onesided": 1}),  # torch.fft.irfft: the real signal of 9 bins
    ((2, 6, 2), 1, None, {"inverse": 1, "onesided": 1}),  # of 2 * (6 - 1) samples by default
])
def test_dft(opset, shape, axis, length, attrs):
    # sums of many float32 terms: ONNX Runtime's FFT and the matrix product differ by 1e-5
    graph = run_both(_dft(rand(*shape), opset, length, axis, **attrs), {"x": rand(*shape)}, atol=1e-4)
    assert graph.op_counts()["nn.dense"] == 1


def test_dft_is_numpys_fft():
    x = rand(3, 20)
    graph = from_onnx(_dft(x[..., None], axis=1, onesided=1))
    (got,) = evaluate(graph, {"x": x[..., None]})
    want = np.fft.rfft(x.astype(np.float64), axis=1)
    np.testing.assert_allclose(got[..., 0] + 1j * got[..., 1], want, rtol=1e-4, atol=1e-4)
    back = from_onnx(_dft(got, axis=1, length=20, inverse=1, onesided=1))
    (signal,) = evaluate(back, {"x": got})
    np.testing.assert_allclose(signal[..., 0], x, rtol=1e-4, atol=1e-4)
    # lengths other than twice the bins less one, as numpy (and ONNX's reference) cut or pad the
    # spectrum; ONNX Runtime differs there
    for length in (7, 16, 25):
        inverse = from_onnx(_dft(got, axis=1, length=length, inverse=1, onesided=1))
        (signal,) = evaluate(inverse, {"x": got})
        want = np.fft.irfft(got[..., 0].astype(np.float64) + 1j * got[..., 1], n=length, axis=1)
        np.testing.assert_allclose(signal[..., 0], want, rtol=1e-4, atol=1e-4)


def _stft(x, step, window=None, size=None, check=True, **attrs):
    inputs, consts = ["x", "step"], {"step": np.array(step, "int64")}
    if window is not None:
        inputs.append("w")
        consts["w"] = window
    if size is not None:
        inputs += [""] * (3 - len(inputs)) + ["n"]
        consts["n"] = np.array(size, "int64")
    return make_model([helper.make_node("STFT", inputs, ["y"], **attrs)], {"x": x}, consts, opset=17,
                      check=check)


@pytest.mark.parametrize("shape, step, window, size, attrs", [
    ((2, 64, 1), 16, np.hanning(17)[:-1].astype("float32"), None, {}),  # torch.stft's hann window
    ((1, 50, 1), 7, None, 12, {"onesided": 0}),
    ((2, 33, 2), 5, rand(8), 8, {"onesided": 0}),  # complex
])
def test_stft(shape, step, window, size, attrs):
    """The frames gathered by a constant table, the window folded into the DFT matrix."""
    graph = run_both(_stft(rand(*shape), step, window, size, **attrs), {"x": rand(*shape)}, atol=1e-4)
    assert graph.op_counts()["nn.dense"] == 1 and graph.op_counts()["take"] == 1


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows(op, periodic):
    """A window is a constant: multiplied into a signal, it is that constant."""
    nodes = [helper.make_node(op, ["n"], ["w"], periodic=periodic),
             helper.make_node("Mul", ["w", "x"], ["y"])]
    x = rand(10)
    graph = run_both(make_model(nodes, {"x": x}, {"n": np.array(10, "int64")}, opset=17), {"x": x})
    assert graph.op_counts() == {"multiply": 1}


def test_a_symmetric_window_of_one_sample_is_one():
    """The formula divides 0 by 0 there (ONNX Runtime gives NaN); numpy and torch give 1."""
    graph = from_onnx(make_model([helper.make_node("HannWindow", ["n"], ["y"], periodic=0)], {},
                                 {"n": np.array(1, "int64")}, opset=17))
    np.testing.assert_array_equal(evaluate(graph, {})[0], np.hanning(1).astype("float32"))


@pytest.mark.parametrize("model, error, match", [
    (lambda: _dft(rand(3, 4, 1), axis=2, check=False), GraphError, "cannot be the last"),
    (lambda: _dft(rand(3, 4, 2), axis=1, onesided=1, check=False), GraphError,
     "onesided=1 transforms a real"),
    (lambda: _dft(rand(3, 4, 1), axis=1, onesided=1, inverse=1, check=False), GraphError,
     "takes a complex spectrum"),
    (lambda: _dft(rand(3, 4, 3), axis=1, check=False), GraphError, r"last axis must be 1 \(real\) or 2"),
    (lambda: _stft(rand(1, 8, 1), 2, size=9), GraphError, "frame_length 9 must be from 1"),
    (lambda: _stft(rand(1, 8, 1), 2, check=False), GraphError, "needs a window or a frame_length"),
])
def test_malformed_transforms_are_named(model, error, match):
    with pytest.raises(error, match=match):
        from_onnx(model())
