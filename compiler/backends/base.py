"""The backend record, the registry of backends, and the artifact that carries compiled code.

A :class:`Backend` says everything the rest of the project needs of one target kind: the
kind and its target options, where its code runs (its device type, and how arrays live
there), the template implementations that serve it, the pipeline of passes its functions
go through after :func:`compiler.lower`, the code generator that turns the result into a
runtime Module, and how compiled code is saved as an :class:`Artifact` and loaded back in
another process. :func:`register` is the one place where a target kind is named: it makes
the kind known to :class:`compiler.Target`, its device to :mod:`compiler.runtime.device`
and its intrinsic rules to :mod:`compiler.tir.op`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..errors import CompilerError
from ..runtime.arguments import FunctionInfo
from ..runtime.device import (
    DeviceMemory,
    register_device_alias,
    register_device_type,
    unregister_device_alias,
    unregister_device_type,
)
from ..runtime.module import Module
from ..target import Target, TargetKindInfo, register_target_kind, unregister_target_kind
from ..tir.function import IRModule
from ..tir.op import register_target_rules
from ..transform.pipeline import Pipeline

__all__ = ["Artifact", "Backend", "register", "unregister", "get", "registered", "for_artifact"]


@dataclass
class Artifact:
    """Compiled code that a process loads without rebuilding: ``kind`` names its format
    (``"object"``: a relocatable object file; ``"ptx"``: PTX and launch plans), ``metadata``
    holds at least the target (``"target"``), the entry function and each function's
    :class:`~compiler.runtime.FunctionInfo` as JSON."""

    kind: str
    data: bytes
    metadata: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """The artifact as JSON-ready data (the bytes in base64)."""
        return {"kind": self.kind, "data": base64.b64encode(self.data).decode("ascii"),
                "metadata": self.metadata}

    @classmethod
    def from_json(cls, data: dict) -> Artifact:
        """The artifact of :meth:`to_json`'s output."""
        return cls(data["kind"], base64.b64decode(data["data"]), dict(data.get("metadata", {})))

    @classmethod
    def of_functions(cls, kind: str, data: bytes, target: Target, infos: Mapping[str, FunctionInfo],
                     **extra) -> Artifact:
        """The artifact of compiled ``data`` for ``target`` whose functions ``infos`` describes
        (by name, the entry first); ``extra`` joins the metadata."""
        return cls(kind, data, {"target": str(target), "entry": next(iter(infos)),
                                "functions": [info.to_json() for info in infos.values()], **extra})

    def function_infos(self) -> dict[str, FunctionInfo]:
        """The FunctionInfo of each function, by name, as :meth:`of_functions` recorded them."""
        return {i.name: i for i in map(FunctionInfo.from_json, self.metadata["functions"])}


@dataclass(frozen=True)
class Backend:
    """One target kind's way from lowered loop IR to code that runs.

    * ``kind``: the target kind (the first word of a target string), with its
      ``target_options`` (option name -> whether it takes a value, in the order ``str(target)``
      writes them), ``check_target(options, spec)`` raising TargetError for options it cannot
      compile for, ``model(target)`` naming the hardware its tuning records are for, and
      ``default_host``, the kind of the host target of a device kind;
    * ``device_type``: where its code runs and its arrays live; ``device_memory`` says how
      arrays live there (None for the host's memory, which the runtime has), and
      ``device_aliases`` are more names that select the device;
    * ``template_kind``: which template implementations serve its tasks (``"cpu"``, ``"cuda"``);
    * ``pipeline``: the passes after :func:`compiler.lower`; ``intrinsic_keys`` are the rule keys
      that its ``lower_intrin`` pass consults and ``native_math`` the math its code generator
      lowers itself (see :mod:`compiler.tir.op`);
    * ``codegen(mod, target) -> Module``: the code generator, on a module the pipeline prepared;
    * ``save_artifact(mod, target) -> Artifact`` and ``load_artifact(artifact) -> Module``: the
      same compiled code as bytes for another process (a measure worker), and back.
    """

    kind: str
    device_type: str
    template_kind: str
    pipeline: Pipeline
    codegen: Callable[[IRModule, Target], Module]
    save_artifact: Callable[[IRModule, Target], Artifact]
    load_artifact: Callable[[Artifact], Module]
    target_options: Mapping[str, bool] = field(default_factory=dict)
    check_target: Callable[[dict, str], None] | None = None
    model: Callable[[Target], str | None] | None = None
    model_option: str | None = None  # the target option that names the model (Target.pinned)
    default_host: str | None = None
    device_memory: DeviceMemory | None = None
    device_aliases: tuple[str, ...] = ()
    intrinsic_keys: tuple[str, ...] = ()
    native_math: frozenset = frozenset()


_BACKENDS: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    """Make ``backend`` build its target kind (replacing an earlier backend of that kind)."""
    if not isinstance(backend, Backend):
        raise TypeError(f"register() takes a Backend, got {type(backend).__name__}")
    register_target_kind(TargetKindInfo(backend.kind, backend.device_type, dict(backend.target_options),
                                        backend.check_target, backend.model, backend.default_host,
                                        backend.model_option))
    if backend.device_memory is not None:
        register_device_type(backend.device_type, backend.device_memory)
    for alias in (backend.kind, *backend.device_aliases):
        register_device_alias(alias, backend.device_type)
    register_target_rules(backend.kind, backend.intrinsic_keys or (backend.kind,), backend.native_math)
    _BACKENDS[backend.kind] = backend
    return backend


def unregister(kind: str) -> None:
    """Forget the backend of target kind ``kind``, its target kind and its device names."""
    backend = _BACKENDS.pop(kind, None)
    if backend is None:
        return
    unregister_target_kind(kind)
    for alias in (backend.kind, *backend.device_aliases):
        unregister_device_alias(alias)
    if backend.device_memory is not None and not any(b.device_type == backend.device_type
                                                     for b in _BACKENDS.values()):
        unregister_device_type(backend.device_type)


def get(target: Target | str) -> Backend:
    """The backend that builds ``target`` (a Target, a target string or a kind)."""
    words = [target.kind] if isinstance(target, Target) else str(target).split()
    kind = words[0] if words else ""
    backend = _BACKENDS.get(kind)
    if backend is None:
        raise CompilerError(f"no backend builds target kind {kind!r}; known: {sorted(_BACKENDS)}")
    return backend


def registered() -> list[Backend]:
    """Every registered backend, in the order they were registered."""
    return list(_BACKENDS.values())


def for_artifact(artifact: Artifact) -> Backend:
    """The backend that loads ``artifact``: that of the target its metadata names."""
    target = artifact.metadata.get("target") if isinstance(artifact.metadata, dict) else None
    if not isinstance(target, str):
        raise CompilerError(f"the {artifact.kind!r} artifact does not say which target it was built for")
    return get(target)
