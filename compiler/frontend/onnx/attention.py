"""ONNX's transformer operators of opset 23: ``RotaryEmbedding`` (at the end of this module),
and ``Attention`` (opsets 23 and 24; what torch's exporter writes for
``scaled_dot_product_attention`` from opset 23), written out as the operators an explicit export
has: the scaled ``Q @ K^T`` (``nn.batch_matmul``), the mask added, ``nn.softmax``, and the product
with ``V``, so that the graph's passes fuse and tune it as they do attention exported at earlier
opsets.

Covered: 3-D inputs (``q_num_heads``, ``kv_num_heads``) and 4-D ones, grouped queries (each key
and value head serving consecutive query heads), ``scale``, ``softcap``, a boolean or additive
``attn_mask`` broadcast to the scores (one shorter than the keys is padded with masked
positions), ``is_causal`` (aligned to the last key: a past of ``P`` keys lets query ``i`` see keys
up to ``P + i``), a ``past_key`` and ``past_value`` joined before the new keys (``present_key``
and ``present_value``), opset 24's ``nonpad_kv_seqlen`` (keys past each batch element's length
masked, the causal frontier ending at its last), and ``qk_matmul_output`` in each of its four
modes. A query that may see no key outputs zeros (ONNX Runtime's and the reference's rule).
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes
from ...graph import Value
from .importer import NodeContext, converts, element_dtype, optional_input, scalar_like
from .nn import matmul

__all__: list[str] = []


@converts("Attention")
def _attention(ctx: NodeContext, ins, attrs):
    q, k, v = ins[0], ins[1], ins[2]
    mask, past_key, past_value, lengths = (optional_input(ins, i) for i in (3, 4, 5, 6))
    _check_attrs(ctx, q, attrs)
    if not len(q.shape) == len(k.shape) == len(v.shape) or len(q.shape) not in (3, 4):
        raise ctx.error(f"Q, K and V must all be 3-D or all 4-D, got shapes {q.shape}, {k.shape} and "
                        f"{v.shape}")
    three_d = len(q.shape) == 3
    if three_d:
        q_heads, kv_heads = _head_counts(ctx, q, k, v, attrs)
        q, k, v = (_heads_first(ctx, t, h, name) for t, h, name in ((q, q_heads, "Q"), (k, kv_heads, "K"),
                                                                    (v, kv_heads, "V")))
    batch, q_heads, q_len, head = q.shape
    if k.shape[0] != batch or v.shape[0] != batch or k.shape[3] != head or k.shape[1] != v.shape[1] \
            or k.shape[2] != v.shape[2]:
        raise ctx.error(f"the heads of Q {q.shape}, K {k.shape} and V {v.shape} do not agree (batch, K's "
                        "head size that of Q, K's and V's heads and lengths alike)")
    kv_heads = k.shape[1]
    if q_heads % kv_heads:
        raise ctx.error(f"{q_heads} query heads cannot share {kv_heads} key and value heads")
    if (past_key is None) != (past_value is None):
        raise ctx.error("past_key and past_value must be given together")
    past = 0
    if past_key is not None:
        past = past_key.shape[2] if len(past_key.shape) == 4 else -1
        if past_key.shape[:2] + past_key.shape[3:] != k.shape[:2] + k.shape[3:] or \
                past_value.shape[:2] + past_value.shape[3:] != v.shape[:2] + v.shape[3:] or \
                past_value.shape[2] != past:
            raise ctx.error(f"past_key {past_key.shape} and past_value {past_value.shape} must be K's "
                            f"{k.shape} and V's {v.shape} but for their lengths, alike")
        k = ctx.emit("concatenate", [past_key, k], axis=2)
        v = ctx.emit("concatenate", [past_value, v], axis=2)
        if lengths is not None:
            raise ctx.error("nonpad_kv_seqlen cannot be combined with past_key and past_value")
    present_key, present_value = k, v
    total = k.shape[2]

    scale = attrs.get("scale", 1.0 / math.sqrt(head))
    root = scalar_like(ctx, q, math.sqrt(scale))
    keys_t = ctx.emit("transpose", [_shared(ctx, k, q_heads)], axes=(0, 1, 3, 2))
    keys_t = ctx.emit("multiply", [keys_t, root])
    scores = matmul(ctx, ctx.emit("multiply", [q, root]), keys_t)
    raw = scores
    softcap = float(attrs.get("softcap", 0.0))
    if softcap > 0:  # before the mask, so that masked scores stay -inf
        cap = scalar_like(ctx, q, softcap)
        scores = ctx.emit("multiply", [ctx.emit("tanh", [ctx.emit("divide", [scores, cap])]), cap])
    capped = scores
    bias = _bias(ctx, q, mask, lengths, bool(attrs.get("is_causal", 0)), past, batch, q_len, total)
    if bias is not None:
        scores = ctx.emit("add", [scores, bias])
    probs = ctx.emit("nn.softmax", [scores], axis=3)
    if bias is not None and _may_mask_a_whole_row(bias):
        seen = ctx.emit("greater", [ctx.emit("max", [bias], axis=(len(bias.shape) - 1,), keepdims=True),
                                    scalar_like(ctx, q, -np.inf)])
        probs = ctx.emit("where", [seen, probs, scalar_like(ctx, q, 0.0)])
    out = matmul(ctx, probs, _shared(ctx, v, q_heads))
    if three_d:
        out = ctx.emit("transpose", [out], axes=(0, 2, 1, 3))
        out = ctx.reshape(out, (batch, q_len, q_heads * v.shape[3]))
    mode = int(attrs.get("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        raise ctx.error(f"qk_matmul_output_mode must be 0, 1, 2 or 3, got {mode}")
    qk = (raw, capped, scores, probs)[mode]
    return out, present_key, present_value, qk


def _check_attrs(ctx: NodeContext, q: Value, attrs) -> None:
    if not dtypes.is_float(q.dtype):
        raise ctx.unsupported(f"Q of dtype {q.dtype} (a float type is needed)")
    for name in ("left_window_size", "right_window_size"):
        if attrs.get(name, -1) != -1:
            raise ctx.unsupported(f"{name}={attrs[name]} (a sliding window)")
    precision = attrs.get("softmax_precision")
    if precision is not None:
        wanted = element_dtype(precision, f"{ctx.where}: softmax_precision")
        if dtypes.bits(wanted) > dtypes.bits(q.dtype) or not dtypes.is_float(wanted):
            raise ctx.unsupported(f"softmax_precision {wanted} (the softmax runs in {q.dtype})")
    if attrs.get("scale") is not None and not attrs["scale"] > 0:
        raise ctx.error(f"scale must be positive, got {attrs['scale']}")


def _head_counts(ctx: NodeContext, q: Value, k: Value, v: Value, attrs) -> tuple[int, int]:
    """3-D inputs' numbers of query and of key and value heads, which must divide their widths."""
    if "q_num_heads" not in attrs or "kv_num_heads" not in attrs:
        raise ctx.error("3-D Q, K and V need the attributes q_num_heads and kv_num_heads")
    q_heads, kv_heads = int(attrs["q_num_heads"]), int(attrs["kv_num_heads"])
    for t, heads, name in ((q, q_heads, "Q"), (k, kv_heads, "K"), (v, kv_heads, "V")):
        if heads < 1 or t.shape[2] % heads:
            raise ctx.error(f"{name}'s width {t.shape[2]} does not split into {heads} heads")
    return q_heads, kv_heads


def _heads_first(ctx: NodeContext, t: Value, heads: int, name: str) -> Value:
    """A 3-D (batch, length, heads * size) input as (batch, heads, length, size)."""
    batch, length, width = t.shape
    return ctx.emit("transpose", [ctx.reshape(t, (batch, length, heads, width // heads))], axes=(0, 2, 1, 3))


def _shared(ctx: NodeContext, t: Value, q_heads: int) -> Value:
    """Keys or values (batch, heads, length, size) with each head repeated for the consecutive
    query heads it serves."""
    batch, heads, length, size = t.shape
    if heads == q_heads:
        return t
    group = q_heads // heads
    wide = ctx.emit("expand", [ctx.reshape(t, (batch, heads, 1, length, size))],
                    shape=(batch, heads, group, length, size))
    return ctx.reshape(wide, (batch, q_heads, length, size))


def _bias(ctx: NodeContext, q: Value, mask: Value | None, lengths: Value | None, causal: bool, past: int,
          batch: int, q_len: int, total: int) -> Value | None:
    """What the scores (batch, heads, queries, keys) add before the softmax: 0 where a query may
    see a key, -inf where not, or the additive mask's values; None where nothing is masked."""
    bias = None if mask is None else _mask_bias(ctx, q, mask, total)
    if causal and lengths is None:
        rows, cols = np.arange(q_len)[:, None], np.arange(total)[None, :]
        frontier = ctx.const(np.where(cols <= rows + past, 0.0, -np.inf).astype(q.dtype))
        bias = frontier if bias is None else ctx.emit("add", [bias, frontier])
    if lengths is not None:
        if lengths.shape not in ((batch,), (batch, 1)) or not dtypes.is_int(lengths.dtype):
            raise ctx.error(f"nonpad_kv_seqlen must hold an integer per batch element ({batch}), got "
                            f"{lengths.dtype}{list(lengths.shape)}")
        keys = ctx.const(np.arange(total, dtype=lengths.dtype).reshape(1, 1, 1, total))
        count = ctx.reshape(lengths, (batch, 1, 1, 1))
        if causal:  # query i sees keys before i + 1 + length - queries: the last query up to the last key
            queries = ctx.const(np.arange(q_len, dtype=lengths.dtype).reshape(1, 1, q_len, 1) - q_len + 1)
            count = ctx.emit("add", [count, queries])
        seen = ctx.emit("less", [keys, count])
        padding = ctx.emit("where", [seen, scalar_like(ctx, q, 0.0), scalar_like(ctx, q, -np.inf)])
        bias = padding if bias is None else ctx.emit("add", [bias, padding])
    return bias


def _mask_bias(ctx: NodeContext, q: Value, mask: Value, total: int) -> Value:
    """``attn_mask`` as an additive bias: a boolean mask's False as -inf, a float one as it is; one
    shorter than the keys padded with -inf."""
    if mask.dtype == "bool":
        mask = ctx.emit("where", [mask, scalar_like(ctx, q, 0.0), scalar_like(ctx, q, -np.inf)])
    elif mask.dtype != q.dtype:
        raise ctx.error(f"attn_mask must be bool or Q's dtype {q.dtype}, got {mask.dtype}")
    if not mask.shape:
        return mask
    short = total - mask.shape[-1]
    if short < 0:
        raise ctx.error(f"attn_mask {mask.shape} covers more than the {total} keys")
    if short:
        fill = ctx.const(np.full((*mask.shape[:-1], short), -np.inf, q.dtype))
        mask = ctx.emit("concatenate", [mask, fill], axis=len(mask.shape) - 1)
    return mask


def _may_mask_a_whole_row(bias: Value) -> bool:
    """Whether some query may see no key: always possible for a bias the model computes; for a
    constant one, whether a row is all -inf."""
    return not bias.is_constant or bool(np.isneginf(bias.data.max(axis=-1)).any())


# ---------------------------------------------------------------------------- RotaryEmbedding


@converts("RotaryEmbedding")
def _rotary_embedding(ctx: NodeContext, ins, attrs):
    """Each head's first ``rotary_embedding_dim`` features (all by default) rotated in pairs, the
    first half with the second (or, ``interleaved``, even with odd features) by the angles whose
    cosines and sines the caches hold per position (``position_ids`` picking their rows)."""
    x, cos, sin, positions = ins[0], ins[1], ins[2], optional_input(ins, 3)
    if not dtypes.is_float(x.dtype):
        raise ctx.unsupported(f"an input of dtype {x.dtype} (a float type is needed)")
    if len(x.shape) == 4:
        batch, heads, length, head = x.shape
        x = ctx.emit("transpose", [x], axes=(0, 2, 1, 3))  # (batch, length, heads, head)
    elif len(x.shape) == 3:
        heads = int(attrs.get("num_heads", 0))
        batch, length, width = x.shape
        if heads < 1 or width % heads:
            raise ctx.error(f"a 3-D input's width {width} must split into num_heads={heads} heads")
        head = width // heads
        x = ctx.reshape(x, (batch, length, heads, head))
    else:
        raise ctx.error(f"the input must be 3-D or 4-D, got shape {x.shape}")
    rotated = int(attrs.get("rotary_embedding_dim", 0)) or head
    if rotated % 2 or rotated > head:
        raise ctx.error(f"rotary_embedding_dim {rotated} must be even and at most the head size {head}")
    half = rotated // 2
    if positions is not None:
        cos, sin = (ctx.emit("take", [c, positions], axis=0) for c in (cos, sin))
    for name, c in (("cos_cache", cos), ("sin_cache", sin)):
        if c.shape != (batch, length, half):
            raise ctx.error(f"{name} gives {c.shape} per batch and position; ({batch}, {length}, {half}) "
                            "needed")
    cos, sin = (ctx.cast(ctx.reshape(c, (batch, length, 1, half)), x.dtype) for c in (cos, sin))

    def part(start: int, stop: int, step: int = 1) -> Value:
        return ctx.emit("strided_slice", [x], begin=(0, 0, 0, start), end=(batch, length, heads, stop),
                        strides=(1, 1, 1, step))

    first, second = (part(0, rotated, 2), part(1, rotated, 2)) if attrs.get("interleaved", 0) else \
        (part(0, half), part(half, rotated))
    real = ctx.emit("subtract", [ctx.emit("multiply", [cos, first]), ctx.emit("multiply", [sin, second])])
    imag = ctx.emit("add", [ctx.emit("multiply", [sin, first]), ctx.emit("multiply", [cos, second])])
    if attrs.get("interleaved", 0):
        pairs = [ctx.reshape(v, (batch, length, heads, half, 1)) for v in (real, imag)]
        out = ctx.reshape(ctx.emit("concatenate", pairs, axis=4), (batch, length, heads, rotated))
    else:
        out = ctx.emit("concatenate", [real, imag], axis=3)
    if rotated < head:
        out = ctx.emit("concatenate", [out, part(rotated, head)], axis=3)
    if len(ins[0].shape) == 3:
        return ctx.reshape(out, ins[0].shape)
    return ctx.emit("transpose", [out], axes=(0, 2, 1, 3))
