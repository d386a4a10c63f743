"""Functions and modules of the loop IR, and the calling convention they imply."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..runtime.signature import ArgSpec, Signature
from .analysis import free_vars
from .buffer import Buffer
from .expr import IntImm, Var
from .printer import expr_to_str, func_to_str
from .stmt import Stmt

__all__ = ["PrimFunc", "IRModule", "ArgSpec", "Signature"]


@dataclass(frozen=True, slots=True, eq=False)
class PrimFunc:
    """A lowered function: its parameters (buffers and scalar variables) and its body."""

    params: tuple
    body: Stmt
    name: str = "main"
    attrs: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return func_to_str(self)

    __str__ = __repr__

    def with_body(self, body: Stmt) -> PrimFunc:
        return PrimFunc(self.params, body, self.name, dict(self.attrs))

    def with_name(self, name: str) -> PrimFunc:
        return PrimFunc(self.params, self.body, name, dict(self.attrs))

    def buffer_params(self) -> list[Buffer]:
        return [p for p in self.params if isinstance(p, Buffer)]

    def scalar_vars(self) -> list[Var]:
        """Every scalar the compiled kernel receives, in its order.

        These are the explicit scalar parameters and the symbolic variables that
        appear in the shapes, strides and offsets of buffer parameters; the runtime
        binds the latter from the arrays it is given.
        """
        seen: dict[Var, None] = {}  # an ordered set

        for p in self.params:
            if isinstance(p, Var):
                seen.setdefault(p, None)
            else:
                for e in (*p.shape, *p.strides, p.elem_offset):
                    if e is not None:
                        for v in free_vars(e):
                            seen.setdefault(v, None)
        return list(seen)

    def signature(self, align_of=None) -> Signature:
        """The plain-data description of how to call this function (see :class:`Signature`);
        ``align_of(buffer)`` gives the alignment the compiled code assumes of a buffer
        argument (see :attr:`ArgSpec.align`)."""
        args = []
        for p in self.params:
            if isinstance(p, Var):
                args.append(ArgSpec("scalar", p.name, p.dtype))
            else:
                args.append(ArgSpec(
                    "buffer", p.name, p.dtype,
                    shape=[_dim(e) for e in p.shape],
                    strides=[_dim(e) for e in p.strides] if p.strides else None,
                    elem_offset=None if p.elem_offset is None else _dim(p.elem_offset),
                    align=align_of(p) if align_of is not None else None,
                ))
        return Signature(self.name, args, [(v.name, v.dtype) for v in self.scalar_vars()])


def _dim(e) -> int | str:
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return e.name
    return expr_to_str(e)


class IRModule:
    """A set of named PrimFuncs; ``print(mod)`` shows them all."""

    def __init__(self, functions: dict | None = None, attrs: dict | None = None):
        self.functions: dict[str, PrimFunc] = dict(functions or {})
        self.attrs: dict = dict(attrs or {})

    def __getitem__(self, name: str) -> PrimFunc:
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"IRModule has no function {name!r}; it has {list(self.functions)}") from None

    def __setitem__(self, name: str, func: PrimFunc) -> None:
        self.functions[name] = func

    def __contains__(self, name: str) -> bool:
        return name in self.functions

    def __iter__(self):
        return iter(self.functions.items())

    def __len__(self) -> int:
        return len(self.functions)

    def items(self):
        return self.functions.items()

    def with_functions(self, functions: dict) -> IRModule:
        return IRModule(functions, self.attrs)

    def __repr__(self) -> str:
        return "\n\n".join(func_to_str(f) for f in self.functions.values())

    __str__ = __repr__
