"""LLVM IR of a model's ahead-of-time executor: one function that calls the kernels in order.

The executor has the kernels' own C signature, ``void name(void **buffers, int64_t *scalars)``:
``buffers`` holds the model's inputs, then its outputs. It calls each kernel's exported
function (``void kernel(void **buffers, int64_t *scalars)``) with pointers into

* the caller's arrays (``"input"``/``"output"`` places, by position),
* the read-only block of constants (``"constant"``: a byte offset into the global
  ``constants_symbol``, defined by another object file),
* the workspace (``"workspace"``: a byte offset into an internal, zero-initialised global of
  the module: the executor allocates nothing and is not re-entrant),

then copies the outputs that are inputs, constants or repeats of other outputs. No Python runs
between kernels. A kernel with scratch (:mod:`.llvm_scratch`) gets its planned region of the
workspace through the module's scratch pointer, set before the call and cleared after it.

With ``profile_name``, the module also defines a second entry of that name: the same calls,
with one more buffer after the outputs, ``int64_t stamps[len(calls) + 1]``, into which it writes
``CLOCK_MONOTONIC`` in nanoseconds (``clock_gettime``) before the first kernel and after each:
every call's own time inside the model, with its caches as the model leaves them.
"""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from .llvm_scratch import SCRATCH_GLOBAL, declare_scratch_global
from .llvm_types import I8, I8PTR, I32, I64, VOID

__all__ = ["emit_executor"]

_KERNEL = ir.FunctionType(VOID, [I8PTR.as_pointer(), I64.as_pointer()])
_ALIGN = 64
_CLOCK_MONOTONIC = 1  # Linux's clockid_t


def emit_executor(name: str, calls: Sequence[tuple[str, Sequence[tuple[str, int]], int | None]],
                  n_inputs: int, workspace_bytes: int, constants_symbol: str | None, constant_bytes: int,
                  copies: Sequence[tuple[tuple[str, int], int, int]] = (), tag: str = "",
                  profile_name: str | None = None, n_outputs: int = 0) -> str:
    """The executor's LLVM IR (text). ``calls`` lists ``(kernel, places, scratch)``: each place a
    ``(region, index)`` pair, ``scratch`` the workspace offset of the kernel's scratch or None;
    ``copies`` lists ``(source place, output index, bytes)``;
    ``profile_name`` (with the model's ``n_outputs``) adds the profiling entry."""
    module = ir.Module(name=f"executor_{name}")
    workspace = None
    if workspace_bytes:
        typ = ir.ArrayType(I8, workspace_bytes)
        workspace = ir.GlobalVariable(module, typ, f"__model_workspace_{tag}")
        workspace.linkage = "internal"
        workspace.initializer = ir.Constant(typ, None)
        workspace.align = _ALIGN
    constants = None
    if constants_symbol and constant_bytes:
        constants = ir.GlobalVariable(module, ir.ArrayType(I8, constant_bytes), constants_symbol)
        constants.global_constant = True
        constants.align = _ALIGN
    kernels = {k: ir.Function(module, _KERNEL, k) for k in dict.fromkeys(k for k, _, _ in calls)}
    _emit_entry(module, name, calls, n_inputs, workspace, constants, kernels, copies)
    if profile_name is not None:
        _emit_entry(module, profile_name, calls, n_inputs, workspace, constants, kernels, copies,
                    stamps_slot=n_inputs + n_outputs)
    return str(module)


def _emit_entry(module: ir.Module, name: str, calls, n_inputs: int, workspace, constants, kernels: dict,
                copies, stamps_slot: int | None = None) -> None:
    """One entry function calling ``calls`` in order; with ``stamps_slot``, the buffer there
    receives a timestamp before the first call and after each."""
    fn = ir.Function(module, _KERNEL, name)
    buffers, _ = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    width = max((len(places) for _, places, _ in calls), default=1)
    scratch = (module.globals.get(SCRATCH_GLOBAL) or declare_scratch_global(module, define=False)
               if any(offset is not None for _, _, offset in calls) else None)
    slots = b.alloca(ir.ArrayType(I8PTR, width), name="args")
    null_scalars = ir.Constant(I64.as_pointer(), None)

    def pointer(place: tuple[str, int]) -> ir.Value:
        region, index = place
        if region in ("input", "output"):
            slot = index if region == "input" else n_inputs + index
            return b.load(b.gep(buffers, [ir.Constant(I64, slot)]), align=8)
        block = workspace if region == "workspace" else constants
        if block is None:
            raise ValueError(f"executor {name}: a {region} place with no {region} block")
        return b.gep(block, [ir.Constant(I64, 0), ir.Constant(I64, index)], inbounds=True)

    stamp = None
    if stamps_slot is not None:
        stamps = b.bitcast(b.load(b.gep(buffers, [ir.Constant(I64, stamps_slot)]), align=8), I64.as_pointer())
        stamp = _stamper(module, b, stamps)
        stamp(0)
    for position, (kernel, places, offset) in enumerate(calls, 1):
        for k, place in enumerate(places):
            b.store(pointer(place), b.gep(slots, [ir.Constant(I64, 0), ir.Constant(I64, k)]), align=8)
        first = b.gep(slots, [ir.Constant(I64, 0), ir.Constant(I64, 0)])
        if offset is not None:
            b.store(pointer(("workspace", offset)), scratch, align=8)
        # noinline: a kernel called many times (a recurrent layer's step) would be copied into the
        # entry at every call, and the build grow with the calls rather than the kernels
        b.call(kernels[kernel], [first, null_scalars], attrs=("noinline",))
        if offset is not None:
            b.store(ir.Constant(I8PTR, None), scratch, align=8)
        if stamp is not None:
            stamp(position)
    copies = [copy for copy in copies if copy[2]]  # an empty output: nothing to copy, maybe nowhere from
    if copies:
        memcpy = module.declare_intrinsic("llvm.memcpy", [I8PTR, I8PTR, I64])
        for source, output, nbytes in copies:
            b.call(memcpy, [pointer(("output", output)), pointer(source), ir.Constant(I64, nbytes),
                            ir.Constant(ir.IntType(1), 0)])
    b.ret_void()


def _stamper(module: ir.Module, b: ir.IRBuilder, stamps: ir.Value):
    """``stamp(k)`` emits ``stamps[k] = CLOCK_MONOTONIC in ns`` at the builder's position."""
    timespec = ir.LiteralStructType([I64, I64])
    clock = module.globals.get("clock_gettime") or ir.Function(
        module, ir.FunctionType(I32, [I32, timespec.as_pointer()]), "clock_gettime")
    now = b.alloca(timespec, name="now")

    def stamp(k: int) -> None:
        b.call(clock, [ir.Constant(I32, _CLOCK_MONOTONIC), now])
        sec = b.load(b.gep(now, [ir.Constant(I32, 0), ir.Constant(I32, 0)]))
        nsec = b.load(b.gep(now, [ir.Constant(I32, 0), ir.Constant(I32, 1)]))
        ns = b.add(b.mul(sec, ir.Constant(I64, 1_000_000_000)), nsec)
        b.store(ns, b.gep(stamps, [ir.Constant(I64, k)]))
    return stamp
