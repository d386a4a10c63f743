"""ONNX's ``Attention`` (opsets 23 and 24) imported as the operators of an explicit attention
(matrix products, the mask added, a softmax), checked against ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from compiler.frontend import from_onnx  # noqa: E402
from compiler.graph import GraphError, UnsupportedOperatorError  # noqa: E402
from tests.onnx_helpers import RNG, make_model, rand, run_both  # noqa: E402

_OUTPUTS = ("y", "present_key", "present_value", "qk")


def _attention(feeds: dict, outputs: int = 1, opset: int = 23, check: bool = True, **attrs):
    """A model of one Attention node whose inputs are ``feeds`` in the order Q, K, V, attn_mask,
    past_key, past_value, nonpad_kv_seqlen (None for an absent one)."""
    names = ["Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"]
    given = {n: a for n, a in zip(names, feeds) if a is not None}
    inputs = [n if a is not None else "" for n, a in zip(names, feeds)]
    node = helper.make_node("Attention", inputs, list(_OUTPUTS[:outputs]), **attrs)
    return make_model([node], given, outputs=_OUTPUTS[:outputs], opset=opset, check=check), given


def _check(feeds, outputs: int = 1, opset: int = 23, **attrs):
    # shape inference leaves present_key and present_value without a past shapeless
    model, given = _attention(feeds, outputs, opset, check=outputs < 4, **attrs)
    return run_both(model, given)


def _qkv(batch=2, q_heads=4, kv_heads=4, queries=5, keys=6, head=8, v_head=8):
    return (rand(batch, q_heads, queries, head), rand(batch, kv_heads, keys, head),
            rand(batch, kv_heads, keys, v_head))


@pytest.mark.parametrize("attrs", [{}, {"is_causal": 1}, {"scale": 0.3}, {"softcap": 2.0},
                                   {"is_causal": 1, "softcap": 1.0, "scale": 0.5}])
def test_attention_of_4d_heads(attrs):
    graph = _check(_qkv(), **attrs)
    counts = graph.op_counts()
    assert counts["nn.batch_matmul"] == 2 and counts["nn.softmax"] == 1


def test_grouped_query_attention_of_3d_inputs():
    """Six query heads share two key and value heads (each serving three consecutive query
    heads); the heads' width is split from the last axis and joined back after."""
    q, k, v = rand(2, 5, 6 * 4), rand(2, 7, 2 * 4), rand(2, 7, 2 * 3)
    graph = _check((q, k, v), q_num_heads=6, kv_num_heads=2, is_causal=1)
    assert graph.outputs[0].shape == (2, 5, 6 * 3)


def _seeing(shape) -> np.ndarray:
    """A random boolean mask in which every query sees the first key."""
    mask = RNG.random(shape) < 0.7
    mask[..., 0] = True
    return mask


@pytest.mark.parametrize("mask", [
    _seeing((5, 6)),  # bool, one per query and key, broadcast over batch and heads
    rand(5, 6),  # additive
    rand(2, 1, 5, 6),  # additive, per batch element
    _seeing((2, 4, 5, 6)),  # bool, per head
])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_masks(mask, causal):
    _check((*_qkv(), mask), is_causal=causal)


def test_a_past_joins_the_keys_before_the_new_ones_and_shifts_the_causal_frontier():
    """Decoding with a cache: three past keys and values before five new ones; query i sees the
    past and the new keys up to i (the frontier aligned to the last key)."""
    q, k, v = _qkv(q_heads=4, kv_heads=2, keys=5)
    past_key, past_value = rand(2, 2, 3, 8), rand(2, 2, 3, 8)
    graph = _check((q, k, v, None, past_key, past_value), outputs=3, is_causal=1)
    assert [o.shape for o in graph.outputs] == [(2, 4, 5, 8), (2, 2, 8, 8), (2, 2, 8, 8)]


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_qk_matmul_output_modes(mode):
    """The scores as the product gives them (0), after the softcap (1), with the mask added (2),
    after the softmax (3)."""
    _check((*_qkv(), rand(5, 6)), outputs=4, qk_matmul_output_mode=mode, softcap=3.0)


@pytest.mark.parametrize("causal", [0, 1])
def test_opset_24_lengths_of_the_keys_per_batch_element(causal):
    """nonpad_kv_seqlen: keys past each batch element's length are masked; with is_causal, the
    last query sees up to its last key."""
    lengths = np.array([4, 6], np.int64)
    _check((*_qkv(), None, None, None, lengths), opset=24, is_causal=causal)


@pytest.mark.parametrize("mask_given", ["as a constant", "as an input"])
def test_a_query_that_sees_no_key_outputs_zeros(mask_given):
    """A softmax over keys all masked would be NaN; the query's output is zeros. A constant mask
    with no such row needs no guard."""
    q, k, v = _qkv()
    mask = _seeing((5, 6))
    node = helper.make_node("Attention", ["Q", "K", "V", "attn_mask"], ["y"])
    for blind in (False, True):
        mask[2] = not blind
        feeds = {"Q": q, "K": k, "V": v}
        if mask_given == "as an input":
            model = make_model([node], {**feeds, "attn_mask": mask}, opset=23)
            feeds["attn_mask"] = mask
        else:
            model = make_model([node], feeds, {"attn_mask": mask}, opset=23)
        graph = run_both(model, feeds)
        guarded = graph.op_counts().get("where", 0) > (mask_given == "as an input")
        assert guarded == (blind or mask_given == "as an input")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert (session.run(None, feeds)[0][:, :, 2] == 0).all()  # the row run_both matched


@pytest.mark.parametrize("feeds, attrs, error, match", [
    ((rand(1, 3, 8), rand(1, 4, 8), rand(1, 4, 8)), {}, GraphError, "need the attributes q_num_heads"),
    ((rand(1, 3, 8), rand(1, 4, 8), rand(1, 4, 8)), {"q_num_heads": 3, "kv_num_heads": 2}, GraphError,
     "Q's width 8 does not split into 3 heads"),
    ((rand(1, 3, 2, 4), rand(1, 2, 5, 4), rand(1, 2, 5, 4)), {}, GraphError, "3 query heads cannot share 2"),
    ((rand(1, 2, 2, 4), rand(1, 2, 5, 4), rand(1, 2, 6, 4)), {}, GraphError, "do not agree"),
    ((*_qkv(), None, rand(2, 4, 2, 8)), {}, GraphError, "past_key and past_value must be given together"),
    (_qkv(), {"softmax_precision": TensorProto.DOUBLE}, UnsupportedOperatorError,
     "softmax_precision float64"),
])
def test_malformed_attention_is_named(feeds, attrs, error, match):
    model, _ = _attention(feeds, check=False, **attrs)
    with pytest.raises(error, match=match):
        from_onnx(model)


@pytest.mark.parametrize("attrs, three_d, positions", [
    ({}, False, False),  # the halves rotated, caches per batch and position
    ({"interleaved": 1}, False, True),  # even with odd features, cache rows by position ids
    ({"rotary_embedding_dim": 4, "num_heads": 3}, True, True),  # a part of each head, 3-D
])
def test_rotary_embedding(attrs, three_d, positions):
    """Opset 23's RotaryEmbedding: a head's features rotated in pairs by the angles of its
    position."""
    x = rand(2, 5, 3 * 8) if three_d else rand(2, 3, 5, 8)
    half = attrs.get("rotary_embedding_dim", 8) // 2
    feeds, inputs = {"x": x}, ["x", "cos", "sin"]
    if positions:
        consts = {"cos": rand(9, half), "sin": rand(9, half)}
        feeds["positions"] = RNG.integers(0, 9, (2, 5)).astype("int64")
        inputs.append("positions")
    else:
        consts = {"cos": rand(2, 5, half), "sin": rand(2, 5, half)}
    model = make_model([helper.make_node("RotaryEmbedding", inputs, ["y"], **attrs)], feeds, consts, opset=23)
    run_both(model, feeds)
