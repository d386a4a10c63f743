"""How to call a compiled function, as plain data: what a runtime module checks arguments
against, and what a shared library or an artifact carries (JSON).

The compiler writes it (:meth:`compiler.tir.PrimFunc.signature`); the runtime reads it, and
needs nothing of the compiler to do so.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ArgSpec", "Signature"]


@dataclass
class ArgSpec:
    """One argument of a compiled function.

    ``shape``/``strides`` entries are ints or the names of symbolic variables
    (or, for derived sizes, an expression's text: such arguments are checked
    only after the variables are bound). ``align`` is the alignment in bytes that the
    compiled code assumes of a compact buffer's data pointer; ``None`` (as in modules
    exported without it) means :data:`compiler.runtime.ndarray.ALIGNMENT`.
    """

    kind: str  # "buffer" or "scalar"
    name: str
    dtype: str
    shape: list | None = None
    strides: list | None = None
    elem_offset: int | str | None = None
    align: int | None = None

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "dtype": self.dtype, "shape": self.shape,
                "strides": self.strides, "elem_offset": self.elem_offset, "align": self.align}

    @staticmethod
    def from_json(d: dict) -> ArgSpec:
        return ArgSpec(d["kind"], d["name"], d["dtype"], d.get("shape"), d.get("strides"),
                       d.get("elem_offset"), d.get("align"))


@dataclass
class Signature:
    """How to call a compiled function: its arguments, and the scalars its kernel takes.

    The kernel's C signature is ``void name(void **buffers, int64_t *scalars)``:
    ``buffers`` holds the data pointers of the buffer arguments in order;
    ``scalars`` the values of ``scalar_vars`` in order.
    """

    name: str
    args: list
    scalar_vars: list  # [(name, dtype)]

    def to_json(self) -> dict:
        return {"name": self.name, "args": [a.to_json() for a in self.args],
                "scalar_vars": [list(v) for v in self.scalar_vars]}

    @staticmethod
    def from_json(d: dict) -> Signature:
        return Signature(d["name"], [ArgSpec.from_json(a) for a in d["args"]],
                         [tuple(v) for v in d["scalar_vars"]])
