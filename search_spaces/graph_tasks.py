"""Which template computes a model's kernel: a fused node of :mod:`compiler.graph` as a workload.

A kernel whose anchor is a convolution, dense layer or batched matmul maps to its template with
the kernel's output stage as the template's ``epilogue`` (so the tuned kernel is the deployed
one). A 1 x 1 convolution of stride 1 without padding is the workload of one output row of
``H * W`` columns (the same memory as ``H`` rows of ``W``), whose register tiles need no short
tile at the end of every row. A kernel that is one softmax, layer norm or max pool (after
reshapes, which move no data) maps to that template. Every other kernel (chains of injective
operators, other reductions) has no template: it is compiled with the default schedule
(:func:`compiler.graph.default_schedule`).
"""

from __future__ import annotations

import math

from compiler import dtypes
from compiler.graph.fuse import FUSED
from compiler.graph.ir import Node

from .task import Task, create_task
from .templates.cpu_norm import LAYER_NORM_EPS

__all__ = ["kernel_workload", "kernel_task"]


def _pair(v) -> int | list:
    a, b = (int(x) for x in v)
    return a if a == b else [a, b]


def _pads(v) -> int | list:
    p = [int(x) for x in v]
    return p[0] if len(set(p)) == 1 else p


def kernel_workload(node: Node) -> tuple[str, list] | None:
    """``(template, args)`` of the template that computes fused ``node`` with its inputs and
    output in order, or None where no template does."""
    if node.op != FUSED:
        return None
    body = node.attrs["body"]
    first = body.nodes[0]
    kind = node.attrs.get("kind")
    dtype = node.outputs[0].dtype
    if kind == "anchor":
        return _anchor_workload(first, list(node.attrs.get("epilogue", ())), dtype)
    if kind == "reduce":
        # Reshapes before the reduction move no data: the template reads the same memory.
        rest = [n for n in body.nodes if n.op != "reshape"]
        if len(rest) == 1 and body.nodes[-1] is rest[0] and len(node.inputs) == len(rest[0].inputs):
            return _reduction_workload(rest[0], dtype)
    return None


def kernel_task(node: Node, target) -> Task | None:
    """The tuning task of fused ``node`` on ``target`` (:func:`kernel_workload`), or None."""
    workload = kernel_workload(node)
    return None if workload is None else create_task(workload[0], workload[1], target)


def _anchor_workload(anchor: Node, epilogue: list[str], dtype: str) -> tuple[str, list] | None:
    a = anchor.attrs
    if anchor.op == "nn.conv2d":
        (N, C, H, W), (F, Cg, KH, KW) = anchor.inputs[0].shape, anchor.inputs[1].shape
        geometry = [_pair(a["strides"]), _pads(a["padding"]), _pair(a["dilation"])]
        groups = int(a.get("groups", 1))
        if groups == 1:
            return "conv2d_nchw", [N, C, H, W, F, KH, KW, *geometry, dtype, epilogue]
        if groups == C == F and Cg == 1:
            return "depthwise_conv2d_nchw", [N, C, H, W, KH, KW, *geometry, dtype, epilogue]
        return None
    if anchor.op == "nn.conv2d_nchwc":
        (N, Cc, H, W, ib), (Fc, _, KH, KW, _, ob) = anchor.inputs[0].shape, anchor.inputs[1].shape
        geometry = [_pair(a["strides"]), _pads(a["padding"]), _pair(a["dilation"])]
        if _pointwise(KH, KW, geometry):
            # Each output pixel reads only its own input pixel, and both planes are contiguous:
            # the H x W plane is one row of H * W columns in the same memory. The register tiles
            # then run along the whole plane, with no short tile at the end of every row.
            H, W = 1, H * W
        groups = int(a.get("groups", 1))  # left out at one: the key the template's logs have always had
        return "conv2d_nchwc", [N, Cc * ib, H, W, Fc * ob, KH, KW, *geometry, ib, ob, dtype, epilogue,
                                *([groups] if groups != 1 else [])]
    if anchor.op == "nn.conv2d_winograd_nchwc":
        (N, Cc, H, W, ib), (_, Fp, _, nr) = anchor.inputs[0].shape, anchor.inputs[1].shape
        # dilation left out at one: the key the template's logs have always had
        dilation = int(a.get("dilation", 1))
        return "conv2d_nchwc_winograd", [N, Cc * ib, H, W, Fp * nr, _pads(a["padding"]), a["tile_size"], nr,
                                         ib, a["block"], dtype, epilogue,
                                         *([dilation] if dilation != 1 else [])]
    if anchor.op == "nn.depthwise_conv2d_nchwc":
        (N, Cc, H, W, b), (_, KH, KW, _) = anchor.inputs[0].shape, anchor.inputs[1].shape
        geometry = [_pair(a["strides"]), _pads(a["padding"]), _pair(a["dilation"])]
        return "depthwise_conv2d_nchwc", [N, Cc * b, H, W, KH, KW, *geometry, b, dtype, epilogue]
    if anchor.op == "nn.conv2d_depthwise_nchwc":
        (N, Cc, H, W, ib), (_, KH, KW, b) = anchor.inputs[0].shape, anchor.inputs[-1].shape
        geometry = [_pair(a["strides"]), _pads(a["padding"]), _pair(a["dilation"])]
        F = anchor.inputs[1].shape[0] * b
        return "conv2d_depthwise_nchwc", [N, Cc * ib, H, W, F, KH, KW, *geometry, ib, b, dtype,
                                          list(a["mid_epilogue"]), epilogue]
    if anchor.op == "nn.dense_pack":
        (M, K), (_, _, nr) = anchor.inputs[0].shape, anchor.inputs[1].shape
        return "dense_pack", [M, K, a["units"], nr, dtype, epilogue]
    if anchor.op == "nn.dense":
        (M, K), (N, _) = anchor.inputs[0].shape, anchor.inputs[1].shape
        return "dense", [M, K, N, dtype, False, epilogue]
    if anchor.op == "nn.batch_matmul":
        if a.get("transpose_a") or a.get("transpose_b"):
            return None
        (B, M, K), (B2, _, N) = anchor.inputs[0].shape, anchor.inputs[1].shape
        return ("batch_matmul", [B, M, K, N, dtype, epilogue]) if B == B2 else None
    return None


def _pointwise(KH: int, KW: int, geometry: list) -> bool:
    """Whether a convolution of this geometry (``[strides, pads, dilation]`` as in the workload)
    maps each output pixel to the input pixel at the same place: 1 x 1, stride 1, no padding."""
    strides, pads, _ = geometry
    return (KH, KW) == (1, 1) and strides == 1 and pads == 0


def _rows(shape) -> tuple[int, int]:
    return math.prod(shape[:-1]), shape[-1]


def _reduction_workload(node: Node, dtype: str) -> tuple[str, list] | None:
    a, shape = node.attrs, node.inputs[0].shape
    last = len(shape) - 1
    if node.op == "nn.softmax" and a["axis"] == last:
        return "softmax", [*_rows(shape), dtype]
    # the template's scale and shift hold one entry per element of a row; an instance or group
    # norm's (ones and zeros, its affine applied per channel after) broadcast one
    per_element = all(v.shape == shape[-1:] for v in node.inputs[1:])
    if node.op == "nn.layer_norm" and a["axis"] == last and per_element:
        # the default epsilon left out: the workload torch's layer norms have always had
        default = math.isclose(a["epsilon"], LAYER_NORM_EPS, rel_tol=1e-6)
        return "layer_norm", [*_rows(shape), dtype, *([] if default else [float(f"{a['epsilon']:.6g}")])]
    # the template pools floats; a quantized model's integers take the default schedule
    if node.op == "nn.max_pool2d" and tuple(a.get("dilation", (1, 1))) == (1, 1) and not a.get("ceil_mode") \
            and dtypes.is_float(dtype):
        N, C, H, W = shape
        KH, KW = a["pool_size"]
        return "pool2d", [N, C, H, W, KH, KW, _pair(a["strides"]), _pads(a["padding"]), "max", dtype]
    return None
