"""``call_packed``: calling a function registered with :func:`compiler.register_func`.

A call is ``Call("int32", "call_packed", (name, *args))``. Scalar arguments are
expressions; a buffer argument becomes ``Call("handle", ARRAY_HANDLE, (data, dtype, access,
elem_offset, *shape, *strides))``, the data pointer with what the callee needs to see it as an
array (TVM's ``tvm_stack_make_array``): its first element and its strides in elements (a
compact buffer's are row-major); ``access`` is "rw", or "r" for the inputs of a ``te.extern``
(which the callee only reads, so the caller may pass read-only or shared arrays).

The LLVM code generator packs the arguments into 8-byte slots and calls the runtime
(:mod:`compiler.runtime.packed`), which turns them back into Python values: arrays for
buffers (:class:`compiler.nd.NDArray` views of the memory, no copy; strided where the
buffer is), ints, floats, bools
and strings. The call's value is 0, or nonzero when the function raised; the exception
surfaces from the compiled function's call.
"""

from __future__ import annotations

from .. import dtypes
from .buffer import Buffer, compact_strides
from .expr import Call, IntImm, PrimExpr, StringImm, convert

__all__ = ["call_packed", "read_only", "ARRAY_HANDLE", "CALL_PACKED"]

CALL_PACKED = "call_packed"
ARRAY_HANDLE = "array_handle"


def call_packed(name: str, *args) -> PrimExpr:
    """Call the function registered as ``name`` with ``args``: buffers (the ``ins``/``outs``
    of :func:`compiler.te.extern`), numbers, bools, strings or expressions."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"call_packed: the function name must be a non-empty string, got {name!r}")
    return Call("int32", CALL_PACKED, (StringImm(name), *(_argument(name, k, a) for k, a in enumerate(args))))


def _argument(name: str, k: int, a) -> PrimExpr:
    if isinstance(a, Buffer):
        offset = a.elem_offset if a.elem_offset is not None else IntImm(0, "int32")
        strides = a.strides or compact_strides(a.shape)
        return Call("handle", ARRAY_HANDLE, (a.data, StringImm(a.dtype), StringImm("rw"), offset, *a.shape,
                                             *strides))
    if isinstance(a, str):
        return StringImm(a)
    try:
        e = convert(a)
    except (TypeError, ValueError) as err:
        raise ValueError(f"call_packed {name!r}, argument {k}: cannot pass {a!r} ({err})") from None
    if e.dtype != "handle" and not (dtypes.is_float(e.dtype) or dtypes.is_int(e.dtype) or e.dtype == "bool"):
        raise ValueError(f"call_packed {name!r}, argument {k}: cannot pass a value of dtype {e.dtype}")
    return e


def read_only(handle: Call) -> Call:
    """The array argument ``handle`` (an ``ARRAY_HANDLE`` call) marked as only read."""
    data, dtype, _, *rest = handle.args
    return Call(handle.dtype, ARRAY_HANDLE, (data, dtype, StringImm("r"), *rest))
