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
between kernels.
"""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from .llvm_types import I8, I8PTR, I64, VOID

__all__ = ["emit_executor"]

_KERNEL = ir.FunctionType(VOID, [I8PTR.as_pointer(), I64.as_pointer()])
_ALIGN = 64


def emit_executor(name: str, calls: Sequence[tuple[str, Sequence[tuple[str, int]]]], n_inputs: int,
                  workspace_bytes: int, constants_symbol: str | None, constant_bytes: int,
                  copies: Sequence[tuple[tuple[str, int], int, int]] = (), tag: str = "") -> str:
    """The executor's LLVM IR (text). ``calls`` lists ``(kernel, places)``: each place a
    ``(region, index)`` pair; ``copies`` lists ``(source place, output index, bytes)``."""
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
    kernels = {k: ir.Function(module, _KERNEL, k) for k in dict.fromkeys(k for k, _ in calls)}
    fn = ir.Function(module, _KERNEL, name)
    buffers, _ = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    width = max((len(places) for _, places in calls), default=1)
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

    for kernel, places in calls:
        for k, place in enumerate(places):
            b.store(pointer(place), b.gep(slots, [ir.Constant(I64, 0), ir.Constant(I64, k)]), align=8)
        first = b.gep(slots, [ir.Constant(I64, 0), ir.Constant(I64, 0)])
        b.call(kernels[kernel], [first, null_scalars])
    if copies:
        memcpy = module.declare_intrinsic("llvm.memcpy", [I8PTR, I8PTR, I64])
        for source, output, nbytes in copies:
            b.call(memcpy, [pointer(("output", output)), pointer(source), ir.Constant(I64, nbytes),
                            ir.Constant(ir.IntType(1), 0)])
    b.ret_void()
    return str(module)
