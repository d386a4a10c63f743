"""The CPU GEMM shared by matmul, dense and batch_matmul, in the shape of BLIS.

``C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]`` over rows ``i < M``, columns ``j < N``
and ``k < K`` (``b`` the batch indices, if any), as the fast BLAS libraries compute it:

* **Micro-panels.** B is packed into ``Bp[b, j // nr, k, j % nr]`` (zeros past ``N``),
  so the microkernel reads ``nr`` consecutive values per ``k``. With the ``pack_a``
  knob, A is packed likewise into ``Ap[b, i // mr, k, i % mr]``, one row block at a
  time, inside the loop over row blocks: the thread that uses a block packs it, and it
  stays in L2 while the panels of B stream past it. Packing is part of the operator,
  so the tuner measures it, unless B arrives packed (a constant weight packed once,
  when the model is built: ``gemm_compute(b_packed=...)``, ``define_gemm_knobs(nr=...)``).
  Such a B comes from memory or the last-level cache on every call, a micro-panel's first tile
  waiting on each line; with ``prefetch_b`` every step of a tile's reduction also prefetches
  the same row of the next micro-panel, which then arrives while this one's tiles run.
* **Microkernel.** An ``mr x nr`` tile of C lives in registers (``nr`` is ``nv`` vector
  registers wide): per ``k``, ``nv`` vector loads of B, ``mr`` broadcasts of A and
  ``mr * nv`` fused multiply-adds. The knobs allow only tiles whose accumulators, the
  ``nv`` B operands and one broadcast fit the target's vector registers (32 with
  AVX-512, 16 with AVX2: :func:`vector_registers`) and that fill at least half of them
  (fewer accumulators cannot hide the FMA latency).
* **Cache blocks.** Rows go in blocks of ``mc``, columns in blocks of ``nc``, the
  reduction in blocks of ``kc``. With ``kc = K`` each tile runs the whole reduction in
  registers: the ``K x nr`` B micro-panel in use sits in L2 while the tiles of a row
  block pass over it, each streaming its A micro-panel, so a longer row block reuses
  each B micro-panel more; the packed A block (``mc x K``) stays within a core's share
  of L3, from where it is read once per micro-panel. With ``kc < K`` a block of
  ``mc x nc`` accumulators (kept on the stack, where LLVM can hold each tile in
  registers across a ``kc`` run) is swept once per ``kc`` slice, so the B micro-panel
  in use (``kc x nr``) stays in L1 or L2 however long ``K`` is, and the ``mc x kc``
  slice of A that a sweep reads stays in L2. Blocks are whole
  numbers of micro-panels, so only the last block of an axis has tail code.
* **Threads** take row blocks (``parallel_axis="rows"``), column blocks (``"cols"``: A's
  row block is packed by all threads first) or whole products of a batch (``"batch"``);
  tiny problems may stay on one thread (``"none"``). Each is one loop, never a fusion of
  loops whose tails would put bounds checks into the microkernel.

The default config comes from a model of the above (:func:`_default`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compiler import te
from compiler.codegen.llvm import MAX_STACK_BYTES
from compiler.runtime import num_threads
from compiler.simd import vector_lanes, vector_registers

__all__ = ["GemmTensors", "define_gemm_knobs", "gemm_compute", "schedule_gemm", "microkernels",
           "packed_microkernels", "L2_BYTES", "L3_BYTES_PER_CORE"]

# The L2 size the blocks aim at: the smaller of the x86 server cores we target (Zen 4/5 and Xeon
# have 1-2 MiB per core). A constant, so that a pinned target's space is the same on any machine.
L2_BYTES = 1024 * 1024
# A core's share of the last-level cache: 32 MiB per 8 cores on Zen 3-5, less on Xeons
# (which have 2 MiB of L2). A constant for the same reason.
L3_BYTES_PER_CORE = 4 * 1024 * 1024
MAX_VECTORS = 4  # nr is at most 4 vector registers wide
KC_CHOICES = (128, 256, 512)  # reduction slices below K (around BLIS's kc for these cores)
MIN_BLOCK_ROWS = 32  # a row block shorter than this reuses each B micro-panel too few times
FMA_IN_FLIGHT = 10  # FMA latency x FMA ports (5 x 2 on Haswell, 4 x 2 on Skylake and Zen 4)
SMALL_WORK = 1 << 22  # multiply-adds below which running on one thread is worth trying
PACK_ROWS = 16  # rows of B packed into all its panels before the next rows


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _pow2_upto(n: int) -> list[int]:
    """Powers of two up to the first one that is at least ``n``."""
    out = [1]
    while out[-1] < n:
        out.append(out[-1] * 2)
    return out


def microkernels(M: int, N: int, lanes: int, registers: int) -> list[tuple[int, int]]:
    """The feasible ``(mr, nr)`` register tiles for an ``M x N`` output.

    ``nr = nv * lanes``; ``mr * nv`` accumulators plus ``nv`` B operands and one broadcast
    fit ``registers``, and the accumulators fill at least half of what is left (or all of
    ``M``'s rows). No tile holds a vector of only padding or more rows than ``M``. Tiles one
    vector wide (one load per broadcast) only where no wider tile fits ``N``. ``nv`` is a
    power of two: three vectors wide compiled to code 8-30x slower than two (matmul 1024 on
    znver4), so such tiles would only be traps for the tuner and the default.
    """
    out = []
    for nv in (1, 2, 4):
        if nv > MAX_VECTORS or (nv == 1 and N > lanes):
            continue
        if nv > 1 and nv // 2 * lanes >= N:  # the upper half of the tile would be padding
            break
        out += _tiles(M, nv, lanes, registers)
    return out


def _tiles(M: int, nv: int, lanes: int, registers: int) -> list[tuple[int, int]]:
    """The tiles ``nv`` vectors wide whose registers fit, as :func:`microkernels` counts them."""
    budget = registers - nv - 1
    top = min(budget // nv, M)
    low = min(top, _cdiv(budget, 2 * nv))
    return [(mr, nv * lanes) for mr in range(max(1, low), top + 1)]


def packed_microkernels(M: int, nr: int, lanes: int, registers: int) -> list[tuple[int, int]]:
    """The feasible ``(mr, nr)`` tiles of width ``nr`` for a B packed in panels of ``nr``
    columns (the packing fixes the tile's width, padding and all); ValueError unless ``nr`` is
    a power-of-two number of vectors (of ``lanes``), at most :data:`MAX_VECTORS` (see
    :func:`microkernels`)."""
    nv = nr // lanes if nr > 0 and nr % lanes == 0 else 0
    if nv not in (1, 2, 4) or nv > MAX_VECTORS:
        widths = ", ".join(str(v * lanes) for v in (1, 2, 4) if v <= MAX_VECTORS)
        raise ValueError(f"no microkernel is {nr} columns wide: with {lanes}-lane vectors, nr is one "
                         f"of {widths}")
    return _tiles(M, nv, lanes, registers)


@dataclass(frozen=True)
class _Shape:
    """A GEMM's sizes and the target's vector registers, and the blockings they allow."""

    M: int
    N: int
    K: int
    itemsize: int
    lanes: int
    registers: int

    def row_panels(self, mr: int) -> list[int]:
        """Panels per row block for tile height ``mr``: divisors of the panel count (blocks
        without a tail) and powers of two (the last one a single block), of at least
        :data:`MIN_BLOCK_ROWS` rows or all of them; a block of more than one panel keeps the
        packed A block within :data:`L3_BYTES_PER_CORE`."""
        panels = _cdiv(self.M, mr)
        divisors = {d for d in range(1, panels + 1) if panels % d == 0}
        low = min(_cdiv(MIN_BLOCK_ROWS, mr), panels)
        size = mr * self.K * self.itemsize
        return sorted(p for p in divisors | set(_pow2_upto(panels)) | {low}
                      if p >= low and (p == low or p * size <= L3_BYTES_PER_CORE))

    def col_panels(self, nr: int) -> list[int]:
        """Panels per column block for tile width ``nr``: powers of two (the last: all columns)."""
        return _pow2_upto(_cdiv(self.N, nr))

    def k_blocks(self) -> list[int]:
        """``kc`` choices: all of ``K``, or one of :data:`KC_CHOICES` below it."""
        return sorted({self.K} | {kc for kc in KC_CHOICES if kc < self.K})

    def block_fits_stack(self, mr: int, p: int, nr: int, q: int) -> bool:
        """Whether the ``mc x nc`` accumulator block of a ``kc < K`` blocking stays on the stack."""
        return p * mr * q * nr * self.itemsize <= MAX_STACK_BYTES


def define_gemm_knobs(cfg, M: int, N: int, K: int, dtype: str, batch: int = 1, nr: int | None = None,
                      rows_first: bool = False) -> None:
    """Declare the GEMM knobs for ``batch`` products ``M x K @ K x N`` (see the module's
    docstring): the tile ``mr`` x ``nr``; the blocks ``mc_panels`` (``mc = mc_panels * mr``),
    ``nc_panels`` (``nc = nc_panels * nr``) and ``kc``; ``parallel_axis``; ``pack_a``.
    A given ``nr`` (B arrives packed in panels that wide) is the only tile width
    (:func:`packed_microkernels`), and adds the knob ``prefetch_b`` (with ``kc = K`` only: the
    next micro-panel prefetched while this one's tiles run). ``rows_first``: the default config
    puts the threads on row blocks rather than on the batch where both give each thread a fair
    share and all of B fits a core's L2 (each thread then reads the rows of A it wrote, where the
    stage before split its rows alike, and all of B)."""
    shape = _Shape(M, N, K, np.dtype(dtype).itemsize, vector_lanes(dtype), vector_registers())
    if nr is None:
        kernels = microkernels(M, N, shape.lanes, shape.registers)
    else:
        kernels = packed_microkernels(M, nr, shape.lanes, shape.registers)
    rows = {(mr, p) for mr, _ in kernels for p in shape.row_panels(mr)}
    cols = {(nr, q) for _, nr in kernels for q in shape.col_panels(nr)}
    axes = ["rows", "cols"] + (["batch"] if batch > 1 else [])
    if batch * M * N * K <= SMALL_WORK:
        axes.append("none")
    default = _default(shape, kernels, axes, batch, rows_first)
    cfg.define_knob("mr", sorted({mr for mr, _ in kernels}), default=default["mr"])
    cfg.define_knob("nr", sorted({nr for _, nr in kernels}), default=default["nr"])
    cfg.define_knob("mc_panels", sorted({p for _, p in rows}), default=default["mc_panels"])
    cfg.define_knob("nc_panels", sorted({q for _, q in cols}), default=default["nc_panels"])
    cfg.define_knob("kc", shape.k_blocks(), default=default["kc"])
    cfg.define_knob("parallel_axis", axes, default=default["parallel_axis"])
    cfg.define_knob("pack_a", [True, False], default=default["pack_a"])
    if nr is not None:
        # Prefetching by default wherever it may: timed as a model's weights arrive, from memory,
        # 128 x 768 by 768-3072 ran 6-12% faster so (hot, 0-4% either way). Logs from before the
        # knob hold configs that did not prefetch.
        cfg.define_knob("prefetch_b", [False, True], default=default["kc"] == K, absent=False)
        cfg.add_constraint(lambda c: c["kc"].val == K or not c["prefetch_b"].val, knobs=["kc", "prefetch_b"],
                           name="prefetch with whole-K panels")
    feasible = set(kernels)
    cfg.add_constraint(lambda c: (c["mr"].val, c["nr"].val) in feasible, knobs=["mr", "nr"],
                       name="microkernel fits the register file")
    cfg.add_constraint(lambda c: (c["mr"].val, c["mc_panels"].val) in rows, knobs=["mr", "mc_panels"],
                       name="row block within L3")

    def blocks(c) -> bool:
        mr, p, nr, q = c["mr"].val, c["mc_panels"].val, c["nr"].val, c["nc_panels"].val
        if (nr, q) not in cols:
            return False
        if c["kc"].val < K:  # threads on row blocks: the accumulator block is a thread's own
            return (c["parallel_axis"].val != "cols" and shape.block_fits_stack(mr, p, nr, q)
                    and p * mr * c["kc"].val * shape.itemsize <= L2_BYTES)
        # Without k blocks, column blocks matter only when threads split them: one block of all.
        return c["parallel_axis"].val == "cols" or q == shape.col_panels(nr)[-1]

    cfg.add_constraint(blocks, knobs=["mr", "mc_panels", "nr", "nc_panels", "kc", "parallel_axis"],
                       name="cache blocks")


def _default(shape: _Shape, kernels, axes, batch: int, rows_first: bool = False) -> dict:
    """The config a model of the module's docstring ranks first.

    * the tile: enough accumulators to cover the FMA latency, little padding (and none in
      rows if possible: no tail code), ``nv = 2`` vectors wide (as BLIS's kernels for
      AVX2 and AVX-512), then the most accumulators;
    * ``kc = K`` while a ``K x nr`` B micro-panel fits half of L2, else the largest ``kc``
      whose ``kc x nr`` panel fits a quarter and whose accumulator block fits the stack
      (single-thread timings at K = 4096 favoured ``kc = K``: the stack bounds the
      accumulator block, so blocked rows reuse each B panel less);
    * row blocks of about half of L2 that split evenly over the threads;
    * A read where it is (``pack_a=False``): a tile's ``mr`` rows are read in order, which
      the prefetchers follow, and single-thread timings at 1024 and 2048 showed packing
      them cost about what it saved;
    * threads on the batch, else on rows (``rows_first`` and all of B within L2: on rows, else
      on the batch), when that gives each thread a fair share of the work, else on columns (and
      ``kc = K``).
    """
    threads = num_threads()
    M, N, K, isz = shape.M, shape.N, shape.K, shape.itemsize

    def kernel_key(kernel):
        mr, nr = kernel
        nv = nr // shape.lanes
        used = M / (_cdiv(M, mr) * mr) * N / (_cdiv(N, nr) * nr)
        speed = min(1.0, mr * nv / FMA_IN_FLIGHT) * used * (1.0 if M % mr == 0 else 0.98)
        return (round(speed, 3), -abs(nv - 2), mr * nv)

    mr, nr = max(kernels, key=kernel_key)
    mb, nb = _cdiv(M, mr), _cdiv(N, nr)

    def balance(blocks: int) -> float:
        return blocks / (_cdiv(blocks, threads) * threads)

    def row_balance(p: int) -> float:
        # Row blocks of p tiles, the last one short, split over the threads: the busiest
        # thread's tiles set the time. Counting blocks, 9 tiles in blocks of 8 and 1 looked
        # even and ran 8 to 1 (116 filters of a 1x1 layer at 14x14: 68 us, 36 on columns).
        return mb / (min(mb, p * _cdiv(_cdiv(mb, p), threads)) * threads)

    def row_key(p):
        blocks = _cdiv(mb, p)
        half_l2 = -abs(math.log2(p * mr * K * isz / (L2_BYTES / 2)))
        return (balance(blocks) >= 0.9, mb % p == 0 or blocks > 4 * threads, half_l2)

    p = max(shape.row_panels(mr), key=row_key)
    q = shape.col_panels(nr)[-1]
    kc = K
    if K * nr * isz > L2_BYTES // 2:
        q = max((x for x in shape.col_panels(nr) if shape.block_fits_stack(mr, p, nr, x)), default=1)
        fitting = [x for x in shape.k_blocks() if x < K and x * nr * isz <= L2_BYTES // 4]
        if fitting and shape.block_fits_stack(mr, p, nr, q):
            kc = max(fitting)
        else:
            q = shape.col_panels(nr)[-1]
    out = {"mr": mr, "nr": nr, "mc_panels": p, "nc_panels": q, "kc": kc, "pack_a": False}
    if "none" in axes and batch * M * N * K <= SMALL_WORK // 8:
        return {**out, "parallel_axis": "none"}
    row_blocks = _cdiv(mb, p)
    fair = {"batch": "batch" in axes and batch >= threads and balance(batch) >= 0.9,
            "rows": row_blocks >= threads and row_balance(p) >= 0.9}
    # on rows every thread reads all of B: first only while all of it fits a core's L2
    rows_first = rows_first and batch * K * N * isz <= L2_BYTES
    for axis in ("rows", "batch") if rows_first else ("batch", "rows"):
        if fair[axis]:
            return {**out, "parallel_axis": axis}
    q = max(shape.col_panels(nr), key=lambda x: (balance(_cdiv(nb, x)), _cdiv(nb, x) <= 8 * threads, x))
    return {**out, "nc_panels": q, "kc": K, "parallel_axis": "cols"}


@dataclass(frozen=True)
class GemmTensors:
    """The stages of one GEMM: packed operands (``a_packed`` is None without ``pack_a``), the
    accumulators and the output (C, with any epilogue)."""

    a_packed: te.Tensor | None
    b_packed: te.Tensor
    acc: te.Tensor
    out: te.Tensor
    K: int
    b_rows_are_k: bool  # B stored (K, N), as matmul's; dense's W is (N, K)
    col_axes: int = 1  # the output's axes that make up its N columns (row-major)
    b_given: bool = False  # b_packed is an input (packed before the call), not a stage


def _pack(at, batch: tuple, rows: int, K: int, r: int, panels: int, dtype: str, name: str):
    """``P[*b, o, k, x] = at(*b, o * r + x, k)``, zero past ``rows``."""
    pad = panels * r != rows

    def body(*idx):
        *b, o, k, x = idx
        value = at(*b, o * r + x, k)
        if pad:
            return te.if_then_else(o * r + x < rows, value, te.const(0, dtype))
        return value

    return te.compute((*batch, panels, K, r), body, name=name)


def gemm_compute(cfg, A_at, B_at, batch: tuple, M: int, N: int, K: int, dtype: str,
                 epilogue=None, name: str = "C", b_rows_are_k: bool = True,
                 out_cols: tuple[int, ...] | None = None, b_packed: te.Tensor | None = None) -> GemmTensors:
    """The GEMM's stages for the chosen knobs; ``A_at(*b, i, k)`` and ``B_at(*b, k, j)`` read
    the operands, ``epilogue(value, *b, i, j)`` (if given) maps each result.
    ``b_rows_are_k=False`` says that B is stored transposed (``B_at(k, j)`` reads ``W[j, k]``),
    which decides the order in which it is packed. ``out_cols`` (sizes whose product is
    ``N``) shapes the output ``(*batch, M, *out_cols)``, its columns in row-major order (a
    1x1 convolution's output pixels ``(Ho, Wo)``); the epilogue then gets those indices.
    A given ``b_packed`` (shaped ``(*batch, ceil(N / nr), K, nr)``, zeros past ``N``) is read
    in place of packing B, and ``B_at`` is not used."""
    mr, nr = cfg["mr"].val, cfg["nr"].val
    mb, nb = _cdiv(M, mr), _cdiv(N, nr)
    b_given = b_packed is not None
    if b_given:
        want = (*batch, nb, K, nr)
        if tuple(int(x) for x in b_packed.shape) != want:
            raise ValueError(f"packed B is {tuple(b_packed.shape)}, the GEMM reads {want}")
    else:
        b_packed = _pack(lambda *ix: B_at(*ix[:-2], ix[-1], ix[-2]), batch, N, K, nr, nb, dtype, "B_packed")
    if cfg["pack_a"].val:
        a_packed = _pack(A_at, batch, M, K, mr, mb, dtype, "A_packed")

        def a_at(*ix):
            *b, i, k = ix
            return a_packed[(*b, i // mr, k, i % mr)]
    else:
        a_packed, a_at = None, A_at
    k = te.reduce_axis((0, K), name="k")

    def acc_body(*idx):
        *b, i, j = idx
        return te.sum(a_at(*b, i, k) * b_packed[(*b, j // nr, k, j % nr)], axis=k)

    acc = te.compute((*batch, M, N), acc_body, name=f"{name}_acc")
    cols = tuple(out_cols) if out_cols else (N,)
    if int(np.prod(cols)) != N:
        raise ValueError(f"out_cols {cols} do not hold the {N} columns")

    def out_body(*idx):
        head, tail = idx[:len(idx) - len(cols)], idx[len(idx) - len(cols):]
        j = tail[0]
        for size, v in zip(cols[1:], tail[1:]):
            j = j * size + v
        value = acc[(*head, j)]
        return epilogue(value, *idx) if epilogue is not None else value

    out = te.compute((*batch, M, *cols), out_body, name=name)
    return GemmTensors(a_packed, b_packed, acc, out, K, b_rows_are_k, len(cols), b_given)


def schedule_gemm(cfg, s, t: GemmTensors) -> None:
    """Schedule the stages of :func:`gemm_compute` on threads and vector registers."""
    mr, nr, kc = cfg["mr"].val, cfg["nr"].val, cfg["kc"].val
    mc, nc = cfg["mc_panels"].val * mr, cfg["nc_panels"].val * nr
    lanes = vector_lanes(t.out.dtype)
    axis = cfg["parallel_axis"].val
    out, acc = s[t.out], s[t.acc]
    acc.set_scope("local")
    *batch, i = out.op.axis[:len(out.op.axis) - t.col_axes]
    cols = out.op.axis[len(out.op.axis) - t.col_axes:]
    j = out.fuse(*cols) if len(cols) > 1 else cols[0]
    ic, i2 = out.split(i, factor=mc)
    jc, j2 = out.split(j, factor=nc)
    ir, ii = out.split(i2, factor=mr)
    jr, ji = out.split(j2, factor=nr)
    rows_outermost = axis == "rows" and bool(batch)
    if rows_outermost:
        # Row blocks outermost: one parallel region that gives each thread the same rows of every
        # product, not a region per product (a Winograd layer's 36 tile positions were 36 forks
        # and joins per call, and each thread's rows there are the tiles its input transform wrote).
        out.reorder(ic, *batch, jc, jr, ir, ii, ji)
    else:
        out.reorder(*batch, ic, jc, jr, ir, ii, ji)
    out.vectorize(ji)
    if axis == "rows":
        out.parallel(ic)
    elif axis == "cols":
        out.parallel(jc)
    elif axis == "batch":
        out.parallel(out.fuse(*batch) if len(batch) > 1 else batch[0])

    *cb, ci, cj = acc.op.axis
    (ck,) = acc.op.reduce_axis
    if kc < t.K:
        # A block of accumulators; each kc slice sweeps its tiles, each tile in registers.
        acc.compute_at(out, jc)
        cio, ci = acc.split(ci, factor=mr)
        cjo, cj = acc.split(cj, factor=nr)
        ko, ck = acc.split(ck, factor=kc)
        acc.reorder(*cb, ko, cjo, cio, ck, ci, cj)
    else:  # one tile, the whole reduction in registers
        acc.compute_at(out, ir)
        acc.reorder(*cb, ck, ci, cj)
        if t.b_given and cfg["prefetch_b"].val:
            # K rows on is the same row of the next micro-panel (past the last one the addresses
            # lie beyond the buffer, which a prefetch may name: it never faults).
            acc.prefetch(t.b_packed, ck, t.K)
    acc.unroll(ci)
    cjv, cjl = acc.split(cj, factor=lanes)
    acc.unroll(cjv)
    acc.vectorize(cjl)

    if not t.b_given:
        _schedule_b_pack(s, t, axis != "none")
    if t.a_packed is not None:
        pa = s[t.a_packed]
        # a row block of one product at a time (with the rows outermost, ic spans every product)
        pa.compute_at(out, batch[-1] if rows_outermost else ic)
        if axis == "cols":  # all threads pack the row block, then each takes its columns
            pa.parallel(pa.op.axis[-3])


def _schedule_b_pack(s, t: GemmTensors, parallel: bool) -> None:
    """B's packing stage: in order of B's rows (or W's), on all threads if ``parallel``."""
    pb = s[t.b_packed]
    *bb, bo, bk, bx = pb.op.axis
    if t.b_rows_are_k:
        # Runs of PACK_ROWS rows, all panels of a run in turn: reads go along rows of B and
        # writes along a panel; panel by panel, each read would be a new page of B.
        bko, bki = pb.split(bk, factor=PACK_ROWS)
        pb.reorder(*bb, bko, bo, bki, bx)
        pb.vectorize(bx)  # nr consecutive values of a row of B
        outer = [bko, bo]
    else:  # a transpose: read each row of W in order, write across the panel
        pb.reorder(*bb, bo, bx, bk)
        outer = [bo]
    if parallel:
        pb.parallel(pb.fuse(*bb, *outer))
