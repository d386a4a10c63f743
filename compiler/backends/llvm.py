"""The ``llvm`` backend: CPUs, through LLVM (llvmlite).

After :func:`compiler.lower`, a function goes through :data:`PIPELINE` (intrinsics lowered
by the ``llvm`` rules); then the code generator emits LLVM IR (:mod:`compiler.codegen.llvm`),
LLVM's O3 pipeline optimises it (loop and SLP vectorisation included) and emits a
position-independent object file, which LLVM's JIT linker links into this process. An
artifact is that object file, which a measure worker links in about a millisecond.

The steps are :mod:`compiler.codegen.llvm_build`'s. They load llvmlite, so they are imported
on the first build: a process that only loads exported libraries
(:func:`compiler.runtime.load_module`) needs no LLVM.
"""

from __future__ import annotations

from functools import partial

from ..runtime.module import Module
from ..target import Target, check_llvm_options
from ..tir.function import IRModule
from ..tir.op import MATH_OPS
from ..transform.lower_intrin import lower_intrin
from ..transform.pipeline import Pass, Pipeline
from .base import Artifact, Backend, register

__all__ = ["PIPELINE", "BACKEND", "build", "save_artifact", "load_artifact"]

KIND = "llvm"

PIPELINE = Pipeline(KIND, (
    Pass("lower_intrin", partial(lower_intrin, target_kind=KIND)),
))


def build(mod: IRModule, target: Target) -> Module:
    """JIT-compile ``mod`` (after :data:`PIPELINE`) for ``target`` in this process."""
    return _steps().build(mod, target)


def save_artifact(mod: IRModule, target: Target) -> Artifact:
    """What :func:`build` compiles, as a relocatable object file (no JIT, no linking)."""
    data, infos = _steps().save_object(mod, target)
    return Artifact.of_functions("object", data, target, infos)


def load_artifact(artifact: Artifact) -> Module:
    """The module of an ``"object"`` artifact, linked against this process's symbols."""
    target, entry = Target(artifact.metadata["target"]), artifact.metadata["entry"]
    return _steps().load_object(artifact.data, target, artifact.function_infos(), entry)


def _steps():
    # Imported on the first build: the code generator loads llvmlite, which a process that only
    # loads exported libraries never needs.
    from ..codegen import llvm_build

    return llvm_build


def _model(target: Target) -> str | None:
    return target.mcpu


BACKEND = register(Backend(
    kind=KIND,
    device_type="cpu",
    template_kind="cpu",
    pipeline=PIPELINE,
    codegen=build,
    save_artifact=save_artifact,
    load_artifact=load_artifact,
    target_options={"mcpu": True, "mtriple": True, "mattr": True, "fast-math": False},
    check_target=check_llvm_options,
    model=_model,
    model_option="mcpu",
    native_math=frozenset(MATH_OPS),
))
