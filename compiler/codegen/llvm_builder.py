"""The IR builder of the CPU code generator: each pure instruction once per basic block.

Index arithmetic is written out per access: an unrolled body of a hundred loads computes
``n // 2``, ``x * 16`` and the like a hundred times over. Emitting each distinct operation
once per block keeps the LLVM IR (and the text llvmlite prints and LLVM parses and
optimises) to the operations that differ. Reusing a value only in the block that made it
needs no knowledge of the control flow: an earlier instruction of a block dominates the
later ones.
"""

from __future__ import annotations

from llvmlite import ir

__all__ = ["NumberingBuilder"]

# Instructions without side effects whose result depends on nothing but their operands (a
# division by a divisor that may trap is guarded before it is emitted: see CodeGenLLVM).
_PURE = ("add", "sub", "mul", "sdiv", "udiv", "srem", "urem", "and_", "or_", "xor", "shl", "ashr",
         "lshr", "not_", "neg", "icmp_signed", "icmp_unsigned", "select", "zext", "sext", "trunc",
         "bitcast", "sitofp", "uitofp", "fptosi", "fptoui", "fpext", "fptrunc", "gep",
         "insert_element", "extract_element", "shuffle_vector",
         "fadd", "fsub", "fmul", "fdiv", "fcmp_ordered", "fcmp_unordered")


class NumberingBuilder(ir.IRBuilder):
    """An ``ir.IRBuilder`` that, asked for a pure instruction it already emitted in the current
    block with the same operands, returns that instruction instead of a copy."""

    def __init__(self, block: ir.Block | None = None):
        super().__init__(block)
        self._made: dict[tuple, ir.Instruction] = {}


def _key_part(value):
    if isinstance(value, list):
        return tuple(value)
    return value


def _numbered(name: str):
    emit = getattr(ir.IRBuilder, name)

    def method(self, *args, **kwargs):
        key = (self.block, name, *map(_key_part, args), *sorted((k, _key_part(v)) for k, v in kwargs.items()))
        try:
            made = self._made.get(key)
        except TypeError:  # an operand that cannot be a key
            return emit(self, *args, **kwargs)
        if made is None:
            made = self._made[key] = emit(self, *args, **kwargs)
        return made

    method.__name__ = method.__qualname__ = name
    method.__doc__ = emit.__doc__
    return method


for _name in _PURE:
    setattr(NumberingBuilder, _name, _numbered(_name))
