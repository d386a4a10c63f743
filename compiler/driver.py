"""``build()``: from a schedule, a PrimFunc or an IRModule to a callable runtime Module, and
:func:`build_artifact`/:func:`load_artifact`, the same compiled code as bytes for another
process.

Every build is the same three steps: :func:`compiler.lower` (when given a schedule), the
pipeline of the target's backend (:mod:`compiler.backends`), and that backend's code
generator.
"""

from __future__ import annotations

from . import backends
from .backends import Artifact, Backend
from .errors import CompilerError
from .lowering import lower
from .runtime.module import Module
from .target import Target, default_target
from .tir.function import IRModule, PrimFunc

__all__ = ["build", "build_artifact", "load_artifact"]


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
    tgt = Target.from_any(target) or default_target()
    backend, mod = _prepared(_to_module(inputs, args, name, binds), tgt)
    return backend.codegen(mod, tgt)


def build_artifact(inputs, args=None, target=None, name: str = "default_function", binds=None) -> Artifact:
    """What :func:`build` compiles, as an :class:`~compiler.backends.Artifact` (bytes and
    metadata) that :func:`load_artifact` turns into a Module in another process."""
    tgt = Target.from_any(target) or default_target()
    backend, mod = _prepared(_to_module(inputs, args, name, binds), tgt)
    return backend.save_artifact(mod, tgt)


def load_artifact(artifact: Artifact) -> Module:
    """The runtime Module of ``artifact``, loaded by the backend of the target it names."""
    return backends.for_artifact(artifact).load_artifact(artifact)


def _prepared(mod: IRModule, target: Target) -> tuple[Backend, IRModule]:
    """The backend of ``target`` and ``mod`` after its pipeline, each function under its name."""
    if len(mod) == 0:
        raise CompilerError("cannot build an empty IRModule")
    backend = backends.get(target)
    named = {name: (f if f.name == name else f.with_name(name)) for name, f in mod.items()}
    return backend, backend.pipeline.run(mod.with_functions(named))


def _to_module(inputs, args, name: str, binds) -> IRModule:
    if isinstance(inputs, IRModule):
        return inputs
    if isinstance(inputs, PrimFunc):
        func = inputs.with_name(name) if inputs.name == "main" else inputs
        return IRModule({func.name: func})
    return lower(inputs, args, name=name, binds=binds)


def _build_per_target(inputs: dict, target_host) -> Module:
    # The functions of one kind are compiled together for the first entry's target of that
    # kind. The host code of device functions runs in Python, so target_host has nothing to add.
    del target_host
    merged: dict = {}
    first: Target | None = None
    for key, mod in inputs.items():
        tgt = Target.from_any(key) or default_target()
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
    backend, mod = _prepared(IRModule(merged), first)
    return backend.codegen(mod, first)
