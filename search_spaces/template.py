"""The template registry: ``@template``, ``get_config`` and template calls.

A template is a plain function ``f(*args) -> (schedule, tensors)``: compute
definition, then knobs (through :func:`get_config`), then schedule. It is
registered under a name (identifiers joined by ``/`` or ``.``, as in AutoTVM's
``"tutorial/matmul"``) and optionally a numpy reference
``reference(*args) -> (inputs, expected_outputs)``. Registered without a target, one
implementation serves every target, as in AutoTVM; ``target="cpu"`` (``llvm``
targets) or ``target="cuda"`` restricts it to one kind, and such an implementation
takes precedence over a generic one::

    @template("my_matmul", target="cpu", reference=my_matmul_ref)
    def my_matmul(N, L, M, dtype):
        ...
        cfg = get_config()
        cfg.define_split("tile_y", y, num_outputs=2)
        yo, yi = cfg["tile_y"].apply(s, C, y)
        return s, [A, B, C]

The decorator returns a :class:`Template`; calling it (``my_matmul(64, 64, 64,
"float32", target="llvm")``) creates the task and instantiates it with the config
the current dispatch context gives.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from search_spaces.errors import SearchSpaceError

__all__ = ["template", "get_config", "get_template", "list_templates", "Template", "TemplateImpl",
           "target_kind", "unregister_template", "ANY"]

_KINDS = {"llvm": "cpu", "cuda": "cuda"}
ANY = "any"  # the kind of an implementation that serves every target
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[/.][A-Za-z_0-9][A-Za-z0-9_]*)*")


@dataclass
class TemplateImpl:
    """One implementation of a template for one target kind."""

    name: str
    kind: str                      # "cpu", "cuda" or "any" (every target)
    func: Callable
    reference: Callable | None = None

    @property
    def module(self) -> str:
        return getattr(self.func, "__module__", None) or "__main__"


class Template:
    """Every implementation registered under one name; call it to instantiate a schedule."""

    def __init__(self, name: str):
        self.name = name
        self.impls: dict[str, TemplateImpl] = {}
        self.__doc__ = f"Template {name!r}."

    def impl(self, kind: str) -> TemplateImpl:
        """The implementation for target kind ``kind`` ("cpu" or "cuda"): the one registered for
        that kind, else the one that serves every target."""
        found = self.impls.get(kind) or self.impls.get(ANY)
        if found is None:
            have = ", ".join(self.impls) or "none"
            raise SearchSpaceError(f"template {self.name!r} has no {kind!r} implementation "
                                   f"(it has: {have})")
        return found

    def __call__(self, *args, target=None, **kwargs):
        """``(schedule, tensors)`` for ``args`` on ``target`` (default: the current target,
        else "llvm"), with the config the current dispatch context gives."""
        from compiler.target import Target
        from search_spaces.dispatch import current_context
        from search_spaces.task import create_task

        tgt = Target.from_any(target) or Target("llvm")
        task = create_task(self.name, args, tgt, kwargs=kwargs)
        cfg = current_context().query(tgt, task)
        return task.instantiate(cfg)

    def __repr__(self) -> str:
        return f"<template {self.name!r} for {', '.join(self.impls)}>"


_registry: dict[str, Template] = {}
_registry_lock = threading.Lock()


def target_kind(target) -> str:
    """The template kind ("cpu" or "cuda") that implements templates for ``target``."""
    from compiler.target import Target

    t = Target.from_any(target) or Target("llvm")
    return _KINDS[t.kind]


def template(name: str, target: str | None = None, reference: Callable | None = None):
    """Register the decorated function as template ``name``; returns the :class:`Template`
    for ``name``.

    Without ``target`` the function serves every target; ``target="cpu"`` or ``"cuda"``
    registers it for that kind only (it then wins over a generic implementation).
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SearchSpaceError("a template name is an identifier, or identifiers joined by '/' or '.', "
                               f"such as 'matmul' or 'tutorial/matmul'; got {name!r}")
    if target is not None and target not in _KINDS.values():
        raise SearchSpaceError(f"template {name!r}: target must be 'cpu', 'cuda' or None (every target), "
                               f"got {target!r}")
    kind = ANY if target is None else target
    if reference is not None and not callable(reference):
        raise SearchSpaceError(f"template {name!r}: reference must be callable, got {reference!r}")

    def register(func: Callable) -> Template:
        if not callable(func):
            raise SearchSpaceError(f"@template({name!r}) decorates a function, got {func!r}")
        _check_signature(name, func)
        with _registry_lock:
            tmpl = _registry.setdefault(name, Template(name))
            # A generic implementation would shadow nothing but fill in for every other kind:
            # it clashes with any implementation of another function.
            rivals = list(tmpl.impls.values()) if kind == ANY else [tmpl.impls.get(kind)]
            for old in rivals:
                if old is not None and (old.module, old.func.__qualname__) != (func.__module__,
                                                                                func.__qualname__):
                    raise SearchSpaceError(
                        f"template {name!r} already has a {old.kind!r} implementation "
                        f"({old.module}.{old.func.__qualname__}); pick another name")
            # Redefining the same function (a reloaded module, a re-run notebook cell) replaces it.
            tmpl.impls[kind] = TemplateImpl(name, kind, func, reference)
            if func.__doc__ and tmpl.__doc__.startswith("Template "):
                tmpl.__doc__ = func.__doc__
        from search_spaces.task import _forget_tasks

        _forget_tasks(name)
        return tmpl

    return register


def _check_signature(name: str, func: Callable) -> None:
    for p in inspect.signature(func).parameters.values():
        if p.kind is p.KEYWORD_ONLY or p.kind is p.VAR_KEYWORD:
            raise SearchSpaceError(f"template {name!r}: parameter {p.name!r} must be positional "
                                   "(task arguments are a plain list)")
        if p.name == "target":
            raise SearchSpaceError(f"template {name!r}: 'target' is reserved for the target of a call")


def get_template(name: str) -> Template:
    """The registered template ``name``."""
    try:
        return _registry[name]
    except KeyError:
        raise SearchSpaceError(f"unknown template {name!r}; registered: "
                               f"{', '.join(sorted(_registry)) or 'none'}") from None


def list_templates() -> dict[str, list[str]]:
    """``{template name: [target kinds]}`` of every registered template ("any" for an
    implementation that serves every target)."""
    return {n: sorted(t.impls) for n, t in sorted(_registry.items())}


def unregister_template(name: str, target: str | None = None) -> None:
    """Remove template ``name`` (only its ``target`` implementation when given: "cpu", "cuda"
    or "any")."""
    from search_spaces.task import _forget_tasks

    with _registry_lock:
        tmpl = _registry.get(name)
        if tmpl is None:
            return
        if target is None:
            del _registry[name]
        else:
            tmpl.impls.pop(target, None)
            if not tmpl.impls:
                del _registry[name]
    _forget_tasks(name)


# ---------------------------------------------------------------------------- config in effect

_local = threading.local()


def _config_stack() -> list:
    stack = getattr(_local, "configs", None)
    if stack is None:
        stack = _local.configs = []
    return stack


class _ConfigScope:
    """Makes ``config`` what :func:`get_config` returns inside the block."""

    def __init__(self, config):
        self.config = config

    def __enter__(self):
        _config_stack().append(self.config)
        return self.config

    def __exit__(self, *exc) -> None:
        _config_stack().pop()


def get_config():
    """The config in effect inside a running template.

    While a task defines its space this is the :class:`~search_spaces.space.ConfigSpace`
    (``define_*`` record knobs); when a config is applied it is that
    :class:`~search_spaces.space.ConfigEntity`.
    """
    stack = _config_stack()
    if not stack:
        raise SearchSpaceError("get_config() is only available inside a template while it runs "
                               "(call the template, or task.instantiate(config))")
    return stack[-1]
