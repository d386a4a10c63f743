"""The vector register file of an ``llvm`` target: how wide a register is and how many
there are, which is what sizes a kernel's vectors and register tiles.

Both are read off the assembly LLVM writes for the target, so they follow ``-mcpu`` and
``-mattr`` exactly as code generation does.
"""

from __future__ import annotations

import functools
import re

from compiler import dtypes
from compiler.errors import CompilerError
from compiler.target import Target, default_target

__all__ = ["vector_lanes", "vector_registers"]


def _llvm_target(target: str | Target | None) -> Target | None:
    """``target`` (default: the current one, else the default CPU target) if its code runs on
    the CPU, else None."""
    t = Target.from_any(target) or default_target()  # from_any(None) is the current target
    return t if t.device_type == "cpu" else None


def vector_lanes(dtype: str, target: str | Target | None = None) -> int:
    """Elements of ``dtype`` in one vector register of ``target`` (default: the current
    target, else the host): 16 float32 on AVX-512, 8 on AVX2, 4 where it cannot be told."""
    t = _llvm_target(target)
    nbytes = _vector_file(str(t))[0] if t is not None else 16
    return max(1, nbytes // max(1, dtypes.bits(dtype) // 8))


def vector_registers(target: str | Target | None = None) -> int:
    """How many vector registers ``target`` has (default: the current target, else the
    host): 32 with AVX-512, 16 with AVX2 or SSE."""
    t = _llvm_target(target)
    return _vector_file(str(t))[1] if t is not None else 16


# What LLVM makes of it is what the target's features mean for a kernel: the widest integer
# vector it keeps in one register gives the width; 24 values live across a loop show
# whether it has registers beyond the 16th (x86's %xmm16-31 need AVX-512) or must spill.
_LIVE = 24
_PROBE_IR = "\n".join([
    "define void @width(<64 x i8>* %p) {",
    "  %v = load <64 x i8>, <64 x i8>* %p",
    "  %w = add <64 x i8> %v, %v",
    "  store <64 x i8> %w, <64 x i8>* %p",
    "  ret void",
    "}",
    "define void @pressure(<4 x float>* noalias %p, <4 x float>* noalias %q, i64 %n) {",
    "entry:",
    "  br label %loop",
    "loop:",
    "  %i = phi i64 [0, %entry], [%i1, %loop]",
    *[f"  %a{k} = phi <4 x float> [zeroinitializer, %entry], [%b{k}, %loop]" for k in range(_LIVE)],
    "  %x = getelementptr <4 x float>, <4 x float>* %p, i64 %i",
    "  %v = load volatile <4 x float>, <4 x float>* %x",
    *[f"  %b{k} = fadd <4 x float> %a{k}, %v" for k in range(_LIVE)],
    "  %i1 = add i64 %i, 1",
    "  %c = icmp slt i64 %i1, %n",
    "  br i1 %c, label %loop, label %exit",
    "exit:",
    *[f"  %g{k} = getelementptr <4 x float>, <4 x float>* %q, i64 {k}\n"
      f"  store <4 x float> %a{k}, <4 x float>* %g{k}" for k in range(_LIVE)],
    "  ret void",
    "}",
])


@functools.cache
def _vector_file(target: str) -> tuple[int, int]:
    """``(bytes per vector register, vector registers)`` of an ``llvm`` target, read off the
    assembly LLVM writes for it (16 bytes and 16 registers where that cannot be told)."""
    # Deferred: reading the vector file compiles with LLVM, which importing this module must not load.
    import llvmlite.binding as llvm

    from compiler.codegen.llvm_machine import create_target_machine, is_x86

    try:
        tm = create_target_machine(Target(target))
        module = llvm.parse_assembly(_PROBE_IR)
        module.triple = tm.triple
        asm = tm.emit_assembly(module)
    except (CompilerError, RuntimeError):
        return 16, 16
    if not is_x86(tm.triple):
        return 16, 16
    width = asm[asm.index("width:"):asm.index("pressure:")] if "pressure:" in asm else asm
    nbytes = 64 if "%zmm" in width else 32 if "%ymm" in width else 16
    registers = 32 if re.search(r"%[xyz]mm(1[6-9]|2\d|3[01])\b", asm) else 16
    return nbytes, registers
