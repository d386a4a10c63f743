"""A reference interpreter for the loop IR: slow, exact, for small tests.

It executes statements one by one in Python with the value semantics of
:mod:`compiler.tir.evaluate`, checks every buffer access against the
buffer's extent, and writes results into the numpy arrays it is given. Thread
bound loops run sequentially, so code that relies on barriers between threads
is out of its reach.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes
from . import expr as E
from . import stmt as S
from .buffer import Buffer
from .builtin import is_prefetch
from .evaluate import Evaluator
from .function import PrimFunc
from .functor import IRVisitor

__all__ = ["run", "InterpreterError", "Interpreter", "restore_binding", "UNBOUND"]


class InterpreterError(RuntimeError):
    """The interpreted program did something undefined (out-of-bounds access, unknown buffer)."""


def run(func_or_stmt: PrimFunc | S.Stmt, buffers: dict[str, np.ndarray] | None = None,
        scalars: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Execute ``func_or_stmt`` in place on ``buffers`` (name -> C-contiguous array).

    ``scalars`` gives values of scalar parameters and free variables by name.
    For a PrimFunc, symbolic sizes in buffer shapes and strides are bound from
    the arrays. Returns ``buffers`` (the same arrays, now updated).
    """
    buffers = dict(buffers or {})
    interp = Interpreter(buffers, dict(scalars or {}))
    interp.ev = Evaluator(interp.env, interp.scalars, interp.load)
    body = func_or_stmt
    if isinstance(func_or_stmt, PrimFunc):
        body = func_or_stmt.body
        for p in func_or_stmt.params:
            if isinstance(p, Buffer):
                interp.bind_param(p)
            elif p.name in interp.scalars:
                interp.env[p] = interp.scalars[p.name]
            else:
                raise InterpreterError(f"no value for scalar parameter {p.name!r}")
    interp.visit(body)
    return buffers


class Interpreter(IRVisitor):
    """Runs a statement on numpy buffers, one scalar at a time (the GPU simulator's threads
    extend it)."""

    def __init__(self, buffers: dict[str, np.ndarray], scalars: dict[str, Any]):
        self.buffers = buffers
        self.scalars = scalars
        self.env: dict[E.Var, Any] = {}
        self.memory: dict[E.Var, np.ndarray] = {}  # buffer.data -> flat view
        self.ev = None

    # -- memory ------------------------------------------------------------------------

    def bind_param(self, buf: Buffer) -> None:
        arr = self.buffers.get(buf.name)
        if arr is None:
            raise InterpreterError(f"no array given for buffer {buf.name!r}")
        if not arr.flags.c_contiguous:
            raise InterpreterError(f"array for buffer {buf.name!r} must be C-contiguous")
        for dim, n in zip(buf.shape, arr.shape, strict=False):
            if isinstance(dim, E.Var):
                self.env.setdefault(dim, int(n))
        for dim, st in zip(buf.strides, arr.strides, strict=False):
            if isinstance(dim, E.Var):
                self.env.setdefault(dim, st // arr.itemsize)
        if isinstance(buf.elem_offset, E.Var):
            self.env.setdefault(buf.elem_offset, 0)
        self.memory[buf.data] = arr.reshape(-1)

    def _flat(self, buf: Buffer) -> np.ndarray:
        mem = self.memory.get(buf.data)
        if mem is None:
            arr = self.buffers.get(buf.name)
            if arr is None:
                raise InterpreterError(f"buffer {buf.name!r} is neither a parameter, "
                                       "nor allocated, nor given")
            mem = self.memory[buf.data] = arr.reshape(-1)
        return mem

    def _offset(self, buf: Buffer, indices: tuple):
        if buf.strides:
            strides = [self.ev.eval(s) for s in buf.strides]
        elif len(indices) == 1:
            strides = [1]  # a flat access (as after storage flattening)
        else:
            shape = [self.ev.eval(d) for d in buf.shape]
            if len(indices) != len(shape):
                raise InterpreterError(f"{len(indices)} indices for the {len(shape)}-d buffer "
                                       f"{buf.name!r}")
            strides = [1] * len(shape)
            for k in range(len(shape) - 2, -1, -1):
                strides[k] = strides[k + 1] * shape[k + 1]
        offset = 0 if buf.elem_offset is None else self.ev.eval(buf.elem_offset)
        total = offset
        for i, s in zip(indices, strides, strict=True):
            total = total + i * s
        return total

    def _check(self, buf: Buffer, mem: np.ndarray, flat) -> list[int]:
        idx = [int(v) for v in flat] if isinstance(flat, np.ndarray) else [int(flat)]
        for v in idx:
            if not 0 <= v < mem.size:
                raise InterpreterError(f"access to {buf.name}[{v}] out of bounds (size {mem.size})")
        return idx

    def load(self, buf: Buffer, indices: tuple):
        mem = self._flat(buf)
        flat = self._offset(buf, indices)
        idx = self._check(buf, mem, flat)
        vals = [_scalar(mem[i], buf.dtype) for i in idx]
        return np.array(vals, dtype=object) if isinstance(flat, np.ndarray) else vals[0]

    # -- statements --------------------------------------------------------------------

    def visit_SeqStmt(self, s: S.SeqStmt) -> None:
        for c in s.seq:
            self.visit(c)

    def visit_For(self, s: S.For) -> None:
        lo = self.ev.eval(s.min)
        hi = lo + self.ev.eval(s.extent)
        old = self.env.get(s.loop_var, UNBOUND)
        for v in range(lo, hi):
            self.env[s.loop_var] = v
            self.visit(s.body)
        restore_binding(self.env, s.loop_var, old)

    def visit_While(self, s: S.While) -> None:
        while self.ev.eval(s.condition):
            self.visit(s.body)

    def visit_BufferStore(self, s: S.BufferStore) -> None:
        value = self.ev.eval(s.value)
        indices = tuple(self.ev.eval(i) for i in s.indices)
        mem = self._flat(s.buffer)
        flat = self._offset(s.buffer, indices)
        if not isinstance(flat, np.ndarray):
            mem[self._check(s.buffer, mem, flat)[0]] = _stored(value, s.buffer.dtype)
            return
        lanes = len(flat)
        values = value if isinstance(value, np.ndarray) else [value] * lanes
        mask = [True] * lanes if s.predicate is None else self.ev.eval(s.predicate)
        if not isinstance(mask, np.ndarray):
            mask = [mask] * lanes
        # Lane by lane, as the vector store orders them; inactive lanes touch no memory.
        for k in range(lanes):
            if mask[k]:
                mem[self._check(s.buffer, mem, flat[k])[0]] = _stored(values[k], s.buffer.dtype)

    def visit_Allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        size = 1
        for d in buf.shape:
            size *= int(self.ev.eval(d))
        old = self.memory.get(buf.data)
        self.memory[buf.data] = np.zeros(size, dtype=dtypes.to_numpy(buf.dtype))
        try:
            self.visit(s.body)
        finally:
            if old is None:
                del self.memory[buf.data]
            else:
                self.memory[buf.data] = old

    def visit_IfThenElse(self, s: S.IfThenElse) -> None:
        if self.ev.eval(s.condition):
            self.visit(s.then_case)
        elif s.else_case is not None:
            self.visit(s.else_case)

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        old = self.env.get(s.var, UNBOUND)
        self.env[s.var] = self.ev.eval(s.value)
        self.visit(s.body)
        restore_binding(self.env, s.var, old)

    def visit_Evaluate(self, s: S.Evaluate) -> None:
        v = s.value
        # Synchronisation has no meaning when threads run one after another.
        if isinstance(v, E.Call) and ("sync" in v.op or "barrier" in v.op):
            return
        if is_prefetch(s):  # a hint about caches, which the interpreter has none of
            return
        self.ev.eval(v)

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        self.visit(s.body)


UNBOUND = object()  # the value of a variable that had no binding, for restore_binding


def restore_binding(env: dict, var: E.Var, old) -> None:
    """Undo a binding of ``var`` in ``env``: put back ``old``, or drop it if it was unbound."""
    if old is UNBOUND:
        env.pop(var, None)
    else:
        env[var] = old


def _stored(v, dtype: str):
    """``v`` as memory of ``dtype`` holds it (bfloat16: its bits, rounded to nearest even)."""
    return dtypes.float_to_bfloat16(v)[()] if dtype == "bfloat16" else v


def _scalar(v, dtype: str):
    if dtype == "bfloat16":  # its bits, widened to the float32 it computes in
        return dtypes.bfloat16_to_float(v)[()]
    if dtypes.is_float(dtype):
        return v
    return int(v)
