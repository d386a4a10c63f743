"""Helpers shared by the CPU templates: vector width, accumulators, knobs, test data.

Convolution arguments (strides, paddings, output sizes) are read by ``compiler.topi.nn.utils``.
"""

from __future__ import annotations

import functools
import re

import numpy as np

__all__ = ["vector_lanes", "vector_registers", "accumulator", "random_data", "float_dtype_check"]

def _current_llvm_target():
    from compiler.target import Target

    t = Target.current() or Target("llvm")
    return t if t.kind == "llvm" else None


def vector_lanes(dtype: str) -> int:
    """Elements of ``dtype`` in one vector register of the current target (16 f32 on AVX-512)."""
    t = _current_llvm_target()
    nbytes = _vector_file(str(t))[0] if t is not None else 16
    return max(1, nbytes // np.dtype(dtype).itemsize)


def vector_registers() -> int:
    """How many vector registers the current target has (32 with AVX-512, 16 with AVX2 or SSE)."""
    t = _current_llvm_target()
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
    import llvmlite.binding as llvm

    from compiler.codegen.llvm_jit import create_target_machine
    from compiler.errors import CompilerError
    from compiler.target import Target

    try:
        tm = create_target_machine(Target(target))
        module = llvm.parse_assembly(_PROBE_IR)
        module.triple = tm.triple
        asm = tm.emit_assembly(module)
    except (CompilerError, RuntimeError):
        return 16, 16
    if not tm.triple.startswith(("x86_64", "i386", "i686")):
        return 16, 16
    width = asm[asm.index("width:"):asm.index("pressure:")] if "pressure:" in asm else asm
    nbytes = 64 if "%zmm" in width else 32 if "%ymm" in width else 16
    registers = 32 if re.search(r"%[xyz]mm(1[6-9]|2\d|3[01])\b", asm) else 16
    return nbytes, registers


def accumulator(s, C, out):
    """The stage that accumulates reduction ``C``: a local cache of ``C`` when ``C`` is the
    output, else ``C`` itself (to be computed inside ``out``'s loops)."""
    if out is C:
        return s.cache_write(C, "local")
    return C


def random_data(rng: np.random.Generator | None, shape, dtype: str) -> np.ndarray:
    """Random non-zero data: floats in +-[0.5, 1.5), integers in +-[1, 4)."""
    rng = np.random.default_rng(0) if rng is None else rng
    dt = np.dtype(dtype)
    sign = rng.choice(np.array([-1, 1]), size=shape)
    if dt.kind == "f":
        return (sign * rng.uniform(0.5, 1.5, size=shape)).astype(dt)
    if dt.kind == "u":
        return rng.integers(1, 4, size=shape).astype(dt)
    if dt.kind == "i":
        return (sign * rng.integers(1, 4, size=shape)).astype(dt)
    raise ValueError(f"unsupported dtype {dtype!r}")


def float_dtype_check(dtype: str, what: str) -> None:
    if np.dtype(dtype).kind != "f":
        raise ValueError(f"{what} needs a floating-point dtype, got {dtype!r}")


def parallel_and_vectorize(s, cfg, stage, outer, inner) -> None:
    """Apply the "parallel" and "vec" knobs: ``outer`` on threads, ``inner`` as vector lanes."""
    if cfg["parallel"].val:
        s[stage].parallel(outer)
    if cfg["vec"].val:
        s[stage].vectorize(inner)


def place_padding(s, cfg, P, X, stage, axis) -> None:
    """Apply the "pad" knob: inline the padding stage ``P`` (when there is one, i.e. ``P is
    not X``) into its reader, or compute it once per iteration of ``stage``'s loop ``axis``."""
    if P is X:
        return
    if cfg["pad"].val == "inline":
        s[P].compute_inline()
    else:
        s[P].compute_at(s[stage], axis)
