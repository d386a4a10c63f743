"""``build()``: from a schedule, a PrimFunc or an IRModule to a callable runtime Module.

(``lower()`` lives in :mod:`compiler.lowering`.)
"""

from __future__ import annotations

from .errors import CompilerError
from .passes import build_module
from .runtime.module import Module
from .target import Target
from .tir.function import IRModule, PrimFunc

__all__ = ["build"]


def build(inputs, args=None, target=None, target_host=None, name: str = "default_function",
          binds=None) -> Module:
    """Compile ``inputs`` for ``target`` and return a runtime Module.

    ``inputs`` may be a schedule (lowered with ``args``, ``name`` and ``binds``), a
    PrimFunc (named ``name`` if it is still called "main"), an IRModule, or a dict
    ``{target: IRModule}``. ``target`` defaults to the current target
    (``with Target(...)``) or "llvm". ``target_host`` is the CPU target of host
    code; it matters only once device targets exist. The module's entry function
    is the first function.
    """
    if isinstance(inputs, dict):
        return _build_per_target(inputs, target_host)
    tgt = Target.from_any(target) or Target("llvm")
    mod = _to_module(inputs, args, name, binds)
    return build_module(mod, tgt)


def _to_module(inputs, args, name: str, binds) -> IRModule:
    if isinstance(inputs, IRModule):
        return inputs
    if isinstance(inputs, PrimFunc):
        func = inputs.with_name(name) if inputs.name == "main" else inputs
        return IRModule({func.name: func})
    from .lowering import lower

    return lower(inputs, args, name=name, binds=binds)


def _build_per_target(inputs: dict, target_host) -> Module:
    # The functions of one kind are compiled together for the first entry's target of that
    # kind. The host code of CUDA functions runs in Python, so target_host has nothing to add.
    del target_host
    merged: dict = {}
    first: Target | None = None
    for key, mod in inputs.items():
        tgt = Target.from_any(key) or Target("llvm")
        if not isinstance(mod, IRModule):
            raise CompilerError(f"build({{target: module}}) expects IRModules as values, got "
                                f"{type(mod).__name__} for {tgt}")
        if first is not None and first.kind != tgt.kind:
            raise CompilerError(f"build({{target: module}}) mixes {first.kind} and {tgt.kind} functions; "
                                "build each kind separately")
        first = first or tgt
        for name, func in mod.items():
            if name in merged:
                raise CompilerError(f"function {name!r} appears in more than one module")
            merged[name] = func
    if first is None or not merged:
        raise CompilerError("build() was given no functions")
    return build_module(IRModule(merged), first)
