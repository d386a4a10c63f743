"""TVM's ``opt_conv_cuda`` tutorial ("How to optimize convolution on GPU", v0.8-v0.12), with TVM's
names mapped to ours:

    tvm.te, tvm.build, tvm.cuda, tvm.nd          -> compiler.te, compiler.build, compiler.cuda, ...
    tvm.tir.if_then_else, tvm.tir.all            -> compiler.te.if_then_else, compiler.te.all
                                                    (``compiler.tir`` has no such aliases)
    tvm.tir.const                                -> compiler.tir.const

The tutorial's code (HWCN layout, shared and local caches, 64x64 blocks, 2x2 virtual threads,
8x8 threads, cooperative vectorized fetching) is :func:`conv_schedule`, with the tutorial's
sizes as defaults. At those sizes it is built for CUDA and its PTX goes through ptxas. The
tutorial only times the kernel on a GPU; here its result is also checked against numpy:

- on the GPU simulator, on a shape small enough to simulate (batch 16, 8 input and 16 output
  channels, a 1x1 image padded to 3x3, so one block whose 64x64 tile is mostly outside the
  output): a slow test;
- on a GPU (the test marked ``cuda``), at batch 64, 32 input and 64 output channels, 7x7.

Outputs start poisoned (NaN) instead of ``np.zeros``. Nothing of the tutorial is left out.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from cuda_helpers import assemble, simulate
from helpers import assert_written, poisoned

import compiler as tvm
from compiler import te


def conv_schedule(batch=256, in_channel=256, out_channel=512, in_size=14, kernel=3, pad=1, stride=1):
    """The tutorial's algorithm and schedule; returns ``(s, [A, W, B])``."""
    # Algorithm
    A = te.placeholder((in_size, in_size, in_channel, batch), name="A")
    W = te.placeholder((kernel, kernel, in_channel, out_channel), name="W")
    out_size = (in_size - kernel + 2 * pad) // stride + 1
    # Pad input
    Apad = te.compute(
        (in_size + 2 * pad, in_size + 2 * pad, in_channel, batch),
        lambda yy, xx, cc, nn: te.if_then_else(
            te.all(yy >= pad, yy - pad < in_size, xx >= pad, xx - pad < in_size),
            A[yy - pad, xx - pad, cc, nn],
            tvm.tir.const(0.0, "float32"),
        ),
        name="Apad",
    )
    # Create reduction variables
    rc = te.reduce_axis((0, in_channel), name="rc")
    ry = te.reduce_axis((0, kernel), name="ry")
    rx = te.reduce_axis((0, kernel), name="rx")
    # Compute the convolution
    B = te.compute(
        (out_size, out_size, out_channel, batch),
        lambda yy, xx, ff, nn: te.sum(
            Apad[yy * stride + ry, xx * stride + rx, rc, nn] * W[ry, rx, rc, ff], axis=[ry, rx, rc]
        ),
        name="B",
    )

    # Designate the memory hierarchy
    s = te.create_schedule(B.op)
    s[Apad].compute_inline()  # compute Apad inline
    AA = s.cache_read(Apad, "shared", [B])
    WW = s.cache_read(W, "shared", [B])
    AL = s.cache_read(AA, "local", [B])
    WL = s.cache_read(WW, "local", [B])
    BL = s.cache_write(B, "local")

    # tile consts
    tile = 8
    num_thread = 8
    block_factor = tile * num_thread
    step = 8
    vthread = 2

    # Get the GPU thread indices
    block_x = te.thread_axis("blockIdx.x")
    block_y = te.thread_axis("blockIdx.y")
    block_z = te.thread_axis("blockIdx.z")
    thread_x = te.thread_axis((0, num_thread), "threadIdx.x")
    thread_y = te.thread_axis((0, num_thread), "threadIdx.y")
    thread_xz = te.thread_axis((0, vthread), "vthread", name="vx")
    thread_yz = te.thread_axis((0, vthread), "vthread", name="vy")

    # Split the workloads
    hi, wi, fi, ni = s[B].op.axis
    bz = s[B].fuse(hi, wi)
    by, fi = s[B].split(fi, factor=block_factor)
    bx, ni = s[B].split(ni, factor=block_factor)

    # Bind the iteration variables to GPU thread indices
    s[B].bind(bz, block_z)
    s[B].bind(by, block_y)
    s[B].bind(bx, block_x)

    # Virtual thread split
    tyz, fi = s[B].split(fi, nparts=vthread)  # virtual thread split
    txz, ni = s[B].split(ni, nparts=vthread)  # virtual thread split
    ty, fi = s[B].split(fi, nparts=num_thread)
    tx, ni = s[B].split(ni, nparts=num_thread)
    s[B].reorder(bz, by, bx, tyz, txz, ty, tx, fi, ni)

    s[B].bind(tyz, thread_yz)
    s[B].bind(txz, thread_xz)
    s[B].bind(ty, thread_y)
    s[B].bind(tx, thread_x)

    # Cooperative fetching: schedule BL local write
    s[BL].compute_at(s[B], tx)
    yi, xi, fi, ni = s[BL].op.axis
    ry, rx, rc = s[BL].op.reduce_axis
    rco, rci = s[BL].split(rc, factor=step)
    s[BL].reorder(rco, ry, rx, rci, fi, ni)

    # Attach computation to iteration variables
    s[AA].compute_at(s[BL], rx)
    s[WW].compute_at(s[BL], rx)
    s[AL].compute_at(s[BL], rci)
    s[WL].compute_at(s[BL], rci)

    # Schedule for A's shared memory load
    yi, xi, ci, ni = s[AA].op.axis
    ty, ci = s[AA].split(ci, nparts=num_thread)
    tx, ni = s[AA].split(ni, nparts=num_thread)
    _, ni = s[AA].split(ni, factor=4)
    s[AA].reorder(ty, tx, yi, xi, ci, ni)
    s[AA].bind(ty, thread_y)
    s[AA].bind(tx, thread_x)
    s[AA].vectorize(ni)  # vectorize memory load

    # Schedule for W's shared memory load
    yi, xi, ci, fi = s[WW].op.axis
    ty, ci = s[WW].split(ci, nparts=num_thread)
    tx, fi = s[WW].split(fi, nparts=num_thread)
    _, fi = s[WW].split(fi, factor=4)
    s[WW].reorder(ty, tx, yi, xi, ci, fi)
    s[WW].bind(ty, thread_y)
    s[WW].bind(tx, thread_x)
    s[WW].vectorize(fi)  # vectorize memory load
    return s, [A, W, B]


def conv_hwcn_reference(a, w, pad=1):
    """``B[y, x, f, n] = sum_{i, j, c} Apad[y + i, x + j, c, n] * W[i, j, c, f]`` (stride 1)."""
    apad = np.pad(a, ((pad, pad), (pad, pad), (0, 0), (0, 0)))
    kh, kw = w.shape[:2]
    windows = np.lib.stride_tricks.sliding_window_view(apad, (kh, kw), axis=(0, 1))  # y, x, c, n, i, j
    return np.einsum("yxcnij,ijcf->yxfn", windows, w).astype("float32")


def test_tutorial_sizes_build_for_cuda():
    s, args = conv_schedule()
    func = tvm.build(s, args, "cuda")
    ptx = func.get_source("ptx")
    assemble(ptx, func.imported_modules[0].arch)
    assert "bar.sync" in ptx  # the cooperative fetches into shared memory are fenced
    assert re.search(r"ld\.global(\.nc)?\.v4\.", ptx)  # the vectorized loads from global memory
    assert "st.shared.v4." in ptx  # and stores to shared memory


def test_reference_matches_a_direct_sum():
    a = np.random.uniform(size=(2, 2, 3, 2)).astype("float32")
    w = np.random.uniform(size=(3, 3, 3, 4)).astype("float32")
    apad = np.pad(a, ((1, 1), (1, 1), (0, 0), (0, 0)))
    want = np.zeros((2, 2, 4, 2), dtype="float32")
    for y, x, f, n in np.ndindex(want.shape):
        want[y, x, f, n] = sum(apad[y + i, x + j, c, n] * w[i, j, c, f]
                               for i in range(3) for j in range(3) for c in range(3))
    np.testing.assert_allclose(conv_hwcn_reference(a, w), want, rtol=1e-5)


@pytest.mark.slow  # the simulator runs the 8x8 threads x 2x2 virtual threads one by one
def test_check_on_the_simulator():
    batch, in_channel, out_channel, in_size = 16, 8, 16, 1
    s, args = conv_schedule(batch, in_channel, out_channel, in_size)
    a = np.random.uniform(size=(in_size, in_size, in_channel, batch)).astype("float32")
    w = np.random.uniform(size=(3, 3, in_channel, out_channel)).astype("float32")
    b = poisoned((in_size, in_size, out_channel, batch), "float32")
    simulate(s, args, [a, w, b])
    assert_written(b, conv_hwcn_reference(a, w), rtol=1e-5)


@pytest.mark.cuda
def test_runs_on_a_gpu():
    batch, in_channel, out_channel, in_size = 64, 32, 64, 7
    s, args = conv_schedule(batch, in_channel, out_channel, in_size)
    func = tvm.build(s, args, "cuda")
    dev = tvm.cuda(0)
    a_np = np.random.uniform(size=(in_size, in_size, in_channel, batch)).astype("float32")
    w_np = np.random.uniform(size=(3, 3, in_channel, out_channel)).astype("float32")
    a = tvm.nd.array(a_np, dev)
    w = tvm.nd.array(w_np, dev)
    b = tvm.nd.array(poisoned((in_size, in_size, out_channel, batch), "float32"), dev)
    func(a, w, b)
    evaluator = func.time_evaluator(func.entry_name, dev, number=1)
    print("Convolution: %f ms" % (evaluator(a, w, b).mean * 1e3))
    assert_written(b.numpy(), conv_hwcn_reference(a_np, w_np), rtol=1e-4)
