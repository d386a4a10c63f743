"""Building loop-IR statements imperatively, as TVM's ``tir.ir_builder``.

>>> ib = ir_builder.create()
>>> a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
>>> tmp = ib.allocate("float32", (n,), name="tmp", scope="local")
>>> with ib.for_range(0, n, name="i") as i:
...     with ib.if_scope(a[i] > 0):
...         tmp[i] = a[i]
...     with ib.else_scope():
...         tmp[i] = 0.0
...     c[i] = tmp[i] * 2.0
>>> stmt = ib.get()

Statements are collected in order. ``for_range``, ``while_loop``, ``if_scope``,
``else_scope`` and ``new_scope`` open nested scopes whose statements become the body of the
loop, the branch or the block. ``allocate``, ``let`` and ``scope_attr`` wrap everything emitted after them
in the current scope (the allocation lives, the variable is bound, the attribute holds
until the scope closes), as in TVM.

Indexing a :class:`BufferVar` (``x[i]``, ``x[i, j]``) loads from its buffer and assigning
to it stores, with the buffer's strides and ``elem_offset`` applied (TVM 0.9 and later);
a single index into a buffer of several dimensions counts elements in row-major order of
its shape.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from .. import dtypes
from ..errors import LoweringError
from . import expr as _expr  # noqa: F401  (first: the expression module loads buffers' dependencies)
from .buffer import Buffer, decl_buffer
from .expr import BufferLoad, IterVar, PrimExpr, StringImm, Var, const, convert, is_const_int
from .stmt import NOP, Allocate, AttrStmt, Evaluate, For, ForKind, IfThenElse, LetStmt, Stmt, While, seq

__all__ = ["IRBuilder", "BufferVar", "create"]

_KINDS = {"serial": ForKind.SERIAL, "parallel": ForKind.PARALLEL, "vectorize": ForKind.VECTORIZED,
          "unroll": ForKind.UNROLLED}


class BufferVar:
    """A buffer as :class:`IRBuilder` code reads and writes it: ``x[i]`` is a load,
    ``x[i] = v`` emits a store into the builder (TVM's ``BufferVar``)."""

    def __init__(self, builder: IRBuilder, buffer: Buffer):
        self._builder = builder
        self._buffer = buffer

    def asobject(self) -> Buffer:
        """The buffer itself."""
        return self._buffer

    @property
    def buffer(self) -> Buffer:
        return self._buffer

    @property
    def data(self) -> Var:
        """The buffer's pointer variable (for ``call_extern`` and ``scope_attr``)."""
        return self._buffer.data

    @property
    def dtype(self) -> str:
        return self._buffer.dtype

    def __repr__(self) -> str:
        return f"BufferVar({self._buffer!r})"

    def _indices(self, index) -> tuple:
        index = list(index) if isinstance(index, (tuple, list)) else [index]
        index = [convert(i.var if isinstance(i, IterVar) else i) for i in index]
        for i in index:
            if not dtypes.is_int(i.dtype):
                raise LoweringError(f"buffer {self._buffer.name!r}: index {i} is {i.dtype}, not an integer")
        shape = self._buffer.shape
        if len(index) == 1 and len(shape) > 1:
            # A flat index, as into the buffer's memory laid out in row-major order of its shape.
            flat, index = index[0], []
            for d in reversed(shape):
                index.append(flat % d)
                flat = flat // d
            index.reverse()
        if len(index) != len(shape):
            raise LoweringError(f"buffer {self._buffer.name!r} has {len(shape)} dimensions, indexed with "
                                f"{len(index)}")
        return tuple(index)

    def __getitem__(self, index) -> PrimExpr:
        return BufferLoad(self._buffer, self._indices(index), self._buffer.dtype)

    def __setitem__(self, index, value) -> None:
        self._builder.emit(self._buffer.vstore(self._indices(index), _value(self._buffer, value)))


def _value(buf: Buffer, value) -> PrimExpr:
    """``value`` as an element of ``buf``: a Python number takes the buffer's dtype; an
    expression must already have it (TVM refuses a mismatch rather than converting)."""
    if isinstance(value, (bool, int, float)):
        return const(value, buf.dtype)
    value = convert(value)
    if value.dtype != buf.dtype:
        raise LoweringError(f"buffer {buf.name!r} holds {buf.dtype}, the value {value} is {value.dtype}; "
                            f"convert it with .astype({buf.dtype!r})")
    return value


class IRBuilder:
    """Collects statements; :meth:`get` returns them as one statement."""

    def __init__(self) -> None:
        # Each scope holds statements and "wrappers" (functions from the rest of the scope to a
        # statement: an allocation, a let binding, an attribute).
        self._scopes: list[list] = [[]]
        self._loops = 0  # how many loops were named by default (TVM names them i, j, k, i_0, ...)

    def _close(self) -> Stmt:
        items = self._scopes.pop()
        body: Stmt | None = None
        for item in reversed(items):
            if callable(item):
                body = item(body if body is not None else NOP)
            else:
                body = seq(item, body)
        return body if body is not None else NOP

    def emit(self, stmt) -> None:
        """Append a statement; an expression (a ``call_extern``) is evaluated for its effect, and a
        function ``body -> statement`` wraps everything emitted after it in the current scope."""
        if isinstance(stmt, PrimExpr):
            stmt = Evaluate(stmt)
        if not isinstance(stmt, Stmt) and not callable(stmt):
            raise LoweringError("ir_builder.emit needs a statement, an expression or a function of the "
                                f"body, got {stmt!r}")
        self._scopes[-1].append(stmt)

    @contextlib.contextmanager
    def _scope(self, make: Callable[[Stmt], Stmt]) -> Iterator[None]:
        self._scopes.append([])
        yield
        self.emit(make(self._close()))

    @contextlib.contextmanager
    def for_range(self, begin, end, name: str = "i", dtype: str | None = None,
                  kind: str = "serial") -> Iterator[Var]:
        """A loop ``for name in [begin, end)`` around the statements emitted in the block; ``kind``
        is "serial", "parallel", "vectorize" or "unroll"."""
        if kind not in _KINDS:
            raise LoweringError(f"ir_builder.for_range: unknown kind {kind!r}; use one of {list(_KINDS)}")
        begin, end = convert(begin), convert(end)
        for what, e in (("begin", begin), ("end", end)):
            if not dtypes.is_int(e.dtype):
                raise LoweringError(f"ir_builder.for_range: {what} {e} is {e.dtype}, not an integer")
        if dtype is None:
            dtype = "int64" if "int64" in (begin.dtype, end.dtype) else "int32"
        if name == "i":
            name = "ijk"[self._loops] if self._loops < 3 else f"i_{self._loops - 3}"
            self._loops += 1
        var = Var(name, dtype)
        begin, end = begin.astype(dtype), end.astype(dtype)
        extent = end if is_const_int(begin, 0) else end - begin
        self._scopes.append([])
        yield var
        self.emit(For(var, begin, extent, _KINDS[kind], self._close()))

    @contextlib.contextmanager
    def while_loop(self, condition) -> Iterator[None]:
        """The statements emitted in the block run again and again while ``condition`` holds
        (it is evaluated before each iteration, typically on a value the body updates in an
        ``allocate``-d buffer)."""
        cond = convert(condition)
        if cond.dtype != "bool":
            raise LoweringError(f"ir_builder.while_loop needs a boolean condition, got {cond} ({cond.dtype})")
        with self._scope(lambda body: While(cond, body)):
            yield

    @contextlib.contextmanager
    def if_scope(self, cond) -> Iterator[None]:
        """The statements emitted in the block run only where ``cond`` holds."""
        cond = convert(cond)
        if cond.dtype != "bool":
            raise LoweringError(f"ir_builder.if_scope needs a boolean condition, got {cond} ({cond.dtype})")
        with self._scope(lambda body: IfThenElse(cond, body)):
            yield

    @contextlib.contextmanager
    def else_scope(self) -> Iterator[None]:
        """The other branch of the ``if_scope`` emitted just before."""
        scope = self._scopes[-1]
        last = scope[-1] if scope else None
        if not isinstance(last, IfThenElse) or last.else_case is not None:
            raise LoweringError("ir_builder.else_scope must directly follow an if_scope")
        scope.pop()
        with self._scope(lambda body: IfThenElse(last.condition, last.then_case, body)):
            yield

    @contextlib.contextmanager
    def new_scope(self) -> Iterator[None]:
        """A block: the allocations, let bindings and attributes made inside end with it."""
        with self._scope(lambda body: body):
            yield

    def let(self, var_name: str, value) -> Var:
        """A new variable bound to ``value`` for the rest of the current scope."""
        value = convert(value)
        var = Var(var_name, value.dtype)
        self.emit(lambda body: LetStmt(var, value, body))
        return var

    def scope_attr(self, node, attr_key: str, value) -> None:
        """An attribute ``attr_key`` of ``node`` around the rest of the current scope (TVM's
        ``AttrStmt``; pragmas and other keys that the CPU code generator does not act on are
        kept in the IR and ignored there). ``scope_attr(te.thread_axis("threadIdx.x"),
        "thread_extent", n)`` launches the rest of the scope on ``n`` GPU threads, as in TVM."""
        if isinstance(node, str):
            node = StringImm(node)
        if isinstance(node, BufferVar):
            node = node.data
        value = StringImm(value) if isinstance(value, str) else convert(value)
        if attr_key == "thread_extent" and isinstance(node, IterVar) and node.thread_tag:
            # The loop IR holds a thread binding as a loop over the thread axis, as a schedule's
            # bind() makes it: the GPU lowering then sees the kernel's threads.
            self.emit(lambda body: For(node.var, const(0, node.var.dtype), value, ForKind.THREAD_BINDING,
                                       body, thread_tag=node.thread_tag))
            return
        self.emit(lambda body: AttrStmt(node, attr_key, value, body))

    def allocate(self, dtype: str, shape, name: str = "buf", axis_separators=None,
                 scope: str = "") -> BufferVar:
        """A buffer of ``shape`` that lives until the current scope ends; ``scope`` is "global"
        (also ""), "shared" or "local"."""
        if axis_separators:
            raise LoweringError("ir_builder.allocate: axis_separators are not supported")
        if not isinstance(shape, (list, tuple)):
            shape = (shape,)
        buf = decl_buffer(tuple(shape), dtype, name, scope=scope or "global")
        self.emit(lambda body: Allocate(buf, body))
        return BufferVar(self, buf)

    def pointer(self, content_type: str, name: str = "ptr", scope: str = "") -> BufferVar:
        """A pointer to ``content_type`` elements, indexed as a one-dimensional buffer; its
        variable (``.data``) must be bound before use, e.g. by a ``tir.LetStmt``."""
        return BufferVar(self, decl_buffer((1,), content_type, name, scope=scope or "global"))

    def buffer_ptr(self, buf: Buffer, shape=None) -> BufferVar:
        """``buf`` (an extern op's or an intrinsic's buffer) for indexing: ``x[i] = x[i - 1] + 1``."""
        if shape is not None:
            raise LoweringError("ir_builder.buffer_ptr(buf, shape) (TVM 0.8) is not supported: index the "
                                "buffer with its own indices, or with one flat index in row-major order")
        if isinstance(buf, BufferVar):
            buf = buf.buffer
        if not isinstance(buf, Buffer):
            raise LoweringError(f"ir_builder.buffer_ptr needs a buffer (tir.decl_buffer), got {buf!r}")
        return BufferVar(self, buf)

    def likely(self, expr) -> PrimExpr:
        """``expr``: a hint that a condition usually holds, which the code generators here do not use."""
        return convert(expr)

    def get(self) -> Stmt:
        """Everything emitted so far, as one statement."""
        if len(self._scopes) != 1:
            raise LoweringError("ir_builder.get called inside an open for_range, if_scope or new_scope")
        out = self._close()
        self._scopes.append([])
        return out


def create() -> IRBuilder:
    """A new, empty builder."""
    return IRBuilder()
