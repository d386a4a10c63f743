"""The native timing loop behind ``time_evaluator``: LLVM IR for one C function, emitted once.

::

    int64_t __autotune_time_evaluator(
        void (*kernel)(void **buffers, int64_t *scalars), void **buffers, int64_t *scalars,
        int64_t number, int64_t repeat, double min_repeat_ms,
        int32_t flush_mode, void **flush_ptrs, int64_t *flush_bytes, int64_t n_flush,
        double *out, int32_t wake_threads, void *touch_ptr, int64_t touch_bytes,
        int64_t touch_planes);

calls ``kernel`` once to warm up, then fills ``out[0..repeat)`` with the mean seconds
per call of one measurement each, timed with ``clock_gettime(CLOCK_MONOTONIC)``. A
measurement calls the kernel in batches, the first of ``number`` calls, reading the clock
after each, until at least ``min_repeat_ms`` have passed (with 0: one batch of
``number``). A batch doubles while it lasts less than
:data:`~compiler.runtime.timer.BATCH_NS`, so the clock reads cost well under 1% of the
time measured, even for the shortest kernels. It returns the calls of the last
measurement.

The clock decides when a measurement ends: nothing is extrapolated from an earlier,
shorter one. Where calls slow down partway (another process takes a core from a parallel
kernel, and each call waits for a descheduled thread: 1.6 us calls became 150 us), a
count extrapolated from the fast start ran for seconds, past a runner's timeout; here a
measurement overshoots ``min_repeat_ms`` by one batch at most.

``flush_mode`` evicts memory from the CPU caches before *every* call, outside the
timed interval (each call is then timed on its own): 1 writes back and evicts each
range ``flush_ptrs[k]``, ``flush_bytes[k]`` line by line (``clflush``, x86 only),
2 overwrites them (a scratch buffer larger than the last-level cache), 0 does nothing.
After the eviction, where ``wake_threads`` > 1, an empty parallel region on that many
threads wakes libgomp's pool, untimed: the eviction takes the caller milliseconds, long
enough for the pool's threads to fall asleep, and the kernel's first parallel region would
pay 25-60 us to wake them, which no kernel pays inside a model, where calls follow each
other (MobileNetV2's smallest depthwise kernels, 7 us inside the model, timed 64 us so).
In that region each thread also writes one byte of every 64-byte line of its share of
``touch_ptr`` (``touch_bytes`` long), where ``touch_bytes`` > 0: the buffer is ``touch_planes``
equal planes one after the other, and each thread writes its equal contiguous share of every
plane (with one plane, of the whole buffer, as a parallel loop's static schedule gives it; with
a channel-blocked image's planes, the rows of each channel block that a convolution whose
threads split the height writes). The input of a kernel inside a model was just written so by
the kernel before it, and its lines sit modified in the caches of the cores that wrote them,
which a kernel reading all of it pays for (a 1x1 layer whose threads each read the whole input:
twice as slow as with the input in its own caches).

In this process the function is JIT-compiled once (:func:`address`); exported
libraries link their own copy (:func:`object_code`), so modules loaded without
llvmlite time natively too. The runtime calls it: :mod:`compiler.runtime.timer`.
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm
from llvmlite import ir

from ..runtime.timer import BATCH_NS, TIMER_SYMBOL
from .llvm_machine import create_target_machine, is_x86, object_machine, parse
from .llvm_types import I8, I8PTR, I32, I64, VOID

__all__ = ["timer_ir", "address", "object_code", "TIMER_SYMBOL"]

_F64 = ir.DoubleType()
_CLOCK_MONOTONIC = 1
_LINE = 64  # bytes per cache line flushed


def _counted_loop(b: ir.IRBuilder, fn: ir.Function, n: ir.Value, name: str, body, step: int = 1) -> None:
    """``for (i = 0; i < n; i += step) body(i)``."""
    pre = b.block
    head = fn.append_basic_block(f"{name}.head")
    loop = fn.append_basic_block(f"{name}.body")
    done = fn.append_basic_block(f"{name}.end")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(n.type, name=name)
    i.add_incoming(ir.Constant(n.type, 0), pre)
    b.cbranch(b.icmp_signed("<", i, n), loop, done)
    b.position_at_end(loop)
    body(i)
    i.add_incoming(b.add(i, ir.Constant(n.type, step)), b.block)
    b.branch(head)
    b.position_at_end(done)


def timer_ir(triple: str, data_layout: str = "") -> str:
    """The LLVM IR text of :data:`TIMER_SYMBOL` for ``triple`` (clflush only on x86)."""
    m = ir.Module(name="autotune_timer")
    m.triple = triple
    m.data_layout = data_layout
    timespec = ir.LiteralStructType([I64, I64])
    clock_gettime = ir.Function(m, ir.FunctionType(I32, [I32, timespec.as_pointer()]), "clock_gettime")
    kernel_t = ir.FunctionType(VOID, [I8PTR.as_pointer(), I64.as_pointer()]).as_pointer()
    fn_t = ir.FunctionType(I64, [kernel_t, I8PTR.as_pointer(), I64.as_pointer(), I64, I64, _F64,
                                 I32, I8PTR.as_pointer(), I64.as_pointer(), I64, _F64.as_pointer(), I32,
                                 I8PTR, I64, I64])
    fn = ir.Function(m, fn_t, TIMER_SYMBOL)
    (kernel, buffers, scalars, number, repeat, min_ms, mode, fptrs, fbytes, nflush, out, wake,
     touch_ptr, touch_bytes, touch_planes) = fn.args
    names = ("kernel", "buffers", "scalars", "number", "repeat", "min_repeat_ms", "flush_mode", "flush_ptrs",
             "flush_bytes", "n_flush", "out", "wake_threads", "touch_ptr", "touch_bytes", "touch_planes")
    for arg, name in zip(fn.args, names, strict=True):
        arg.name = name
    region_t = ir.FunctionType(VOID, [I8PTR])
    gomp_parallel = ir.Function(m, ir.FunctionType(VOID, [region_t.as_pointer(), I8PTR, I32, I32]),
                                "GOMP_parallel")
    touch_t = ir.LiteralStructType([I8PTR, I64, I64])
    wake_region = _wake_region(m, region_t, touch_t)
    x86 = is_x86(triple)
    clflush = ir.Function(m, ir.FunctionType(VOID, [I8PTR]), "llvm.x86.sse2.clflush") if x86 else None
    mfence = ir.Function(m, ir.FunctionType(VOID, []), "llvm.x86.sse2.mfence") if x86 else None
    memset = m.declare_intrinsic("llvm.memset", [I8PTR, I64])

    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ts = b.alloca(timespec, name="ts")
    touch = b.alloca(touch_t, name="touch")  # what the wake region writes: (pointer, bytes, planes)
    for k, value in enumerate((touch_ptr, touch_bytes, touch_planes)):
        b.store(value, b.gep(touch, [ir.Constant(I32, 0), ir.Constant(I32, k)]))
    calls_slot = b.alloca(I64, name="calls.slot")    # calls made in this measurement
    batch_slot = b.alloca(I64, name="batch.slot")    # calls in the next batch
    spent_slot = b.alloca(I64, name="spent_ns.slot")  # nanoseconds timed in this measurement
    mark_slot = b.alloca(I64, name="mark_ns.slot")    # the clock at the last batch's end
    b.store(ir.Constant(I64, 0), calls_slot)

    def now_ns() -> ir.Value:
        b.call(clock_gettime, [ir.Constant(I32, _CLOCK_MONOTONIC), ts])
        sec = b.load(b.gep(ts, [ir.Constant(I32, 0), ir.Constant(I32, 0)]))
        nsec = b.load(b.gep(ts, [ir.Constant(I32, 0), ir.Constant(I32, 1)]))
        return b.add(b.mul(sec, ir.Constant(I64, 1_000_000_000)), nsec)

    def call_kernel() -> None:
        b.call(kernel, [buffers, scalars])

    def flush() -> None:
        def one_range(k: ir.Value) -> None:
            base = b.load(b.gep(fptrs, [k]))
            nbytes = b.load(b.gep(fbytes, [k]))
            if x86:
                is_clflush = b.icmp_signed("==", mode, ir.Constant(I32, 1))
                with b.if_else(is_clflush) as (then, otherwise):
                    with then:
                        _counted_loop(b, fn, nbytes, "line",
                                      lambda off: b.call(clflush, [b.gep(base, [off])]), step=_LINE)
                    with otherwise:
                        b.call(memset, [base, ir.Constant(I8, 1), nbytes, ir.Constant(ir.IntType(1), 1)])
            else:
                b.call(memset, [base, ir.Constant(I8, 1), nbytes, ir.Constant(ir.IntType(1), 1)])

        _counted_loop(b, fn, nflush, "range", one_range)
        if x86:
            b.call(mfence, [])
        with b.if_then(b.icmp_signed(">", wake, ir.Constant(I32, 1))):
            b.call(gomp_parallel, [wake_region, b.bitcast(touch, I8PTR), wake, ir.Constant(I32, 0)])

    def run_batch() -> None:
        """``batch`` calls; spent_slot grows by the time they took (flushing is not timed)."""
        batch = b.load(batch_slot)
        with b.if_else(b.icmp_signed("==", mode, ir.Constant(I32, 0))) as (plain, flushed):
            with plain:
                _counted_loop(b, fn, batch, "call", lambda _: call_kernel())
                end = now_ns()
                b.store(b.add(b.load(spent_slot), b.sub(end, b.load(mark_slot))), spent_slot)
                b.store(end, mark_slot)
            with flushed:
                def one_call(_):
                    flush()
                    t0 = now_ns()
                    call_kernel()
                    b.store(b.add(b.load(spent_slot), b.sub(now_ns(), t0)), spent_slot)

                _counted_loop(b, fn, batch, "flushed_call", one_call)

    call_kernel()  # warm-up

    def one_repeat(r: ir.Value) -> None:
        """One measurement: batches until min_repeat_ms have been timed; out[r] = mean per call."""
        b.store(ir.Constant(I64, 0), calls_slot)
        b.store(number, batch_slot)
        b.store(ir.Constant(I64, 0), spent_slot)
        b.store(now_ns(), mark_slot)
        again = fn.append_basic_block("batch")
        grow = fn.append_basic_block("grow")
        done = fn.append_basic_block("measured")
        b.branch(again)
        b.position_at_end(again)
        before = b.load(spent_slot)
        run_batch()
        batch = b.load(batch_slot)
        b.store(b.add(b.load(calls_slot), batch), calls_slot)
        spent = b.load(spent_slot)
        spent_ms = b.fdiv(b.sitofp(spent, _F64), ir.Constant(_F64, 1e6))
        b.cbranch(b.fcmp_ordered(">=", spent_ms, min_ms), done, grow)
        b.position_at_end(grow)
        short = b.icmp_signed("<", b.sub(spent, before), ir.Constant(I64, BATCH_NS))
        b.store(b.select(short, b.mul(batch, ir.Constant(I64, 2)), batch), batch_slot)
        b.branch(again)
        b.position_at_end(done)
        seconds = b.fdiv(b.sitofp(spent, _F64), ir.Constant(_F64, 1e9))
        b.store(b.fdiv(seconds, b.sitofp(b.load(calls_slot), _F64)), b.gep(out, [r]))

    _counted_loop(b, fn, repeat, "repeat", one_repeat)
    b.ret(b.load(calls_slot))
    return str(m)


def _wake_region(m: ir.Module, region_t: ir.FunctionType, touch_t: ir.LiteralStructType) -> ir.Function:
    """The parallel region run after an eviction: each thread writes one byte of every line of
    its share of each plane of the ``(pointer, bytes, planes)`` its argument points to (nothing
    with 0 bytes)."""
    fn = ir.Function(m, region_t, "__autotune_timer_wake")
    fn.linkage = "internal"
    thread = ir.Function(m, ir.FunctionType(I32, []), "omp_get_thread_num")
    threads = ir.Function(m, ir.FunctionType(I32, []), "omp_get_num_threads")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    arg = b.bitcast(fn.args[0], touch_t.as_pointer())
    ptr, nbytes, planes = (b.load(b.gep(arg, [ir.Constant(I32, 0), ir.Constant(I32, k)])) for k in range(3))
    plane_bytes = b.sdiv(nbytes, b.select(b.icmp_signed(">", planes, ir.Constant(I64, 0)), planes,
                                          ir.Constant(I64, 1)))
    lines = b.sdiv(b.add(plane_bytes, ir.Constant(I64, _LINE - 1)), ir.Constant(I64, _LINE))
    tid = b.sext(b.call(thread, []), I64)
    nth = b.sext(b.call(threads, []), I64)
    share = b.sdiv(b.add(lines, b.sub(nth, ir.Constant(I64, 1))), nth)
    first = b.mul(tid, share)
    last = b.select(b.icmp_signed("<", b.add(first, share), lines), b.add(first, share), lines)
    count = b.select(b.icmp_signed(">", last, first), b.sub(last, first), ir.Constant(I64, 0))

    def one_plane(p: ir.Value) -> None:
        base = b.gep(ptr, [b.add(b.mul(p, plane_bytes), b.mul(first, ir.Constant(I64, _LINE)))])

        def write_line(k: ir.Value) -> None:
            # The line's first byte, written back as it is: atomic (relaxed), so that the compiler
            # keeps a store that changes nothing; on x86 and Arm it is a plain byte load and store.
            byte = b.gep(base, [b.mul(k, ir.Constant(I64, _LINE))])
            b.store_atomic(b.load_atomic(byte, "monotonic", 1), byte, "monotonic", 1)

        _counted_loop(b, fn, count, "touch", write_line)

    any_bytes = b.icmp_signed(">", nbytes, ir.Constant(I64, 0))
    _counted_loop(b, fn, b.select(any_bytes, planes, ir.Constant(I64, 0)), "plane", one_plane)
    b.ret_void()
    return fn


def _compiled(tm):
    module = parse(timer_ir(tm.triple, str(tm.target_data)))
    module.triple = tm.triple
    return module


@functools.lru_cache(maxsize=1)
def _engine():
    tm = create_target_machine(None)  # this machine
    engine = llvm.create_mcjit_compiler(_compiled(tm), tm)
    engine.finalize_object()
    return engine


def address() -> int:
    """The address of the timing function, JIT-compiled on first use in this process."""
    return _engine().get_function_address(TIMER_SYMBOL)


def object_code(target) -> bytes:
    """Position-independent object code of the timing function, to link into a shared library."""
    tm = object_machine(target)
    return tm.emit_object(_compiled(tm))
