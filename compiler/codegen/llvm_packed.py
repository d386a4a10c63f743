"""LLVM code for ``call_packed`` (see :mod:`compiler.tir.packed`).

Every module that makes such calls gets an internal global, the address of the
runtime's callback ``int32_t callback(const char *descriptor, int64_t *slots)``, and an
exported setter that the runtime calls when it loads the module (:data:`SETTER_SYMBOL`),
so that JIT-compiled code and exported libraries reach the same Python function. A
call stores its arguments into 8-byte slots on the stack (a buffer: the address of its
first element, its extents, then its strides in elements; an integer or bool: its value; a
float: the bits of a double; a string: its pointer) and passes a JSON descriptor of them, a
constant, naming the function and the kind of every argument. Until the runtime has set the
callback the call returns -1 without calling anything.
"""

from __future__ import annotations

import json

from llvmlite import ir

from .. import dtypes
from ..errors import CodegenError
from ..runtime.packed import CALLBACK_GLOBAL, SETTER_SYMBOL
from ..tir import expr as E
from ..tir.packed import ARRAY_HANDLE
from .llvm_types import I8, I8PTR, I32, I64, VOID

__all__ = ["emit_call_packed"]

_CALLBACK_TYPE = ir.FunctionType(I32, [I8PTR, I64.as_pointer()])


def _callback_global(gen) -> ir.GlobalVariable:
    """The module's callback slot and its exported setter, defined on first use."""
    module = gen.module
    try:
        return module.get_global(CALLBACK_GLOBAL)
    except KeyError:
        pass
    gv = ir.GlobalVariable(module, _CALLBACK_TYPE.as_pointer(), CALLBACK_GLOBAL)
    gv.linkage = "internal"
    gv.initializer = ir.Constant(_CALLBACK_TYPE.as_pointer(), None)
    setter = ir.Function(module, ir.FunctionType(VOID, [I8PTR]), SETTER_SYMBOL)
    b = ir.IRBuilder(setter.append_basic_block("entry"))
    b.store(b.bitcast(setter.args[0], _CALLBACK_TYPE.as_pointer()), gv)
    b.ret_void()
    return gv


def _string_constant(gen, text: str) -> ir.Value:
    data = bytearray(text.encode("utf-8") + b"\0")
    typ = ir.ArrayType(I8, len(data))
    module = gen.module
    name = f"__autotune_packed_str.{len(module.globals)}"
    gv = ir.GlobalVariable(module, typ, name)
    gv.linkage = "internal"
    gv.global_constant = True
    gv.initializer = ir.Constant(typ, data)
    return gen.b.bitcast(gv, I8PTR)


def _to_slot(gen, a: E.PrimExpr) -> tuple[list, list]:
    """The descriptor entry of argument ``a`` and its slot values (i64)."""
    b = gen.b
    if isinstance(a, E.Call) and a.op == ARRAY_HANDLE:
        data, dtype, _, offset, *dims = a.args  # dims: the shape, then the strides
        address = b.ptrtoint(gen.expr(data), I64)
        if not E.is_const_int(offset, 0):  # the address of the first element
            size = ir.Constant(I64, max(1, dtypes.bits(dtype.value) // 8))
            address = b.add(address, b.mul(gen._cast(gen.expr(offset), offset.dtype, "int64"), size))
        values = [address] + [gen._cast(gen.expr(d), d.dtype, "int64") for d in dims]
        return ["array", dtype.value, len(dims) // 2], values
    if isinstance(a, E.StringImm):
        return ["str"], [b.ptrtoint(_string_constant(gen, a.value), I64)]
    if a.dtype == "handle":
        return ["handle"], [b.ptrtoint(gen.expr(a), I64)]
    if a.dtype.startswith("float"):
        return ["float"], [b.bitcast(gen._cast(gen.expr(a), a.dtype, "float64"), I64)]
    if a.dtype == "bool":
        return ["bool"], [gen._cast(gen.expr(a), "bool", "int64")]
    if a.dtype.startswith(("int", "uint")):
        return ["int"], [gen._cast(gen.expr(a), a.dtype, "int64")]
    raise CodegenError(f"call_packed cannot pass a value of dtype {a.dtype}")


def emit_call_packed(gen, e: E.Call) -> ir.Value:
    """Pack the arguments of ``e`` and call the runtime's callback; the value is its return code."""
    name = e.args[0]
    if not isinstance(name, E.StringImm):
        raise CodegenError(f"call_packed needs the function name as its first argument, got {name!r}")
    kinds, values = [], []
    for a in e.args[1:]:
        kind, vals = _to_slot(gen, a)
        kinds.append(kind)
        values += vals
    b = gen.b
    slots = gen._scope.allocas.alloca(ir.ArrayType(I64, max(1, len(values))), name="packed.args")
    base = b.bitcast(slots, I64.as_pointer())
    for k, v in enumerate(values):
        b.store(v, b.gep(base, [ir.Constant(I32, k)], inbounds=True))
    descriptor = _string_constant(gen, json.dumps({"name": name.value, "args": kinds}))
    callback = b.load(_callback_global(gen))
    before = b.block
    with b.if_then(b.icmp_unsigned("!=", callback, ir.Constant(callback.type, None))):
        rc = b.call(callback, [descriptor, base])
        called = b.block
    result = b.phi(I32)
    result.add_incoming(rc, called)
    result.add_incoming(ir.Constant(I32, -1), before)
    return result
