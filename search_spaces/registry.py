"""The template registry and the task cache: which function implements a template for a
target, and the tasks already made of it.

A template name maps to one implementation (:class:`TemplateImpl`) per *template kind*:
the kind that a backend's tasks use (:attr:`compiler.backends.Backend.template_kind`:
``"cpu"`` for ``llvm`` targets, ``"cuda"`` for ``cuda`` ones), or :data:`ANY` for one that
serves every target. Tasks are cached here too, so that calling a template again reuses
the space it defined; a template registered again or removed drops its cached tasks, so
a redefined template never serves a stale space.

This module is plain bookkeeping and sits below the rest of the package:
:mod:`search_spaces.task` makes tasks (through :func:`cached_task`),
:mod:`search_spaces.dispatch` picks their configs, and :mod:`search_spaces.template` is the
``@template`` decorator and the callable :class:`~search_spaces.template.Template` users see.

* :func:`register`, :func:`unregister`: add or remove implementations;
* :func:`implementation`, :func:`implementations`, :func:`is_registered`,
  :func:`list_templates`: look them up;
* :func:`template_kind`, :func:`template_kinds`: the template kinds of targets and backends;
* :func:`check_name`: what a template name may be;
* :func:`cached_task`: the task cache.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from compiler import backends
from compiler.target import Target, default_target
from search_spaces.errors import SearchSpaceError

__all__ = ["ANY", "TemplateImpl", "check_name", "register", "unregister", "is_registered",
           "implementation", "implementations", "list_templates", "template_kind", "template_kinds",
           "cached_task", "TASK_CACHE_SIZE"]

ANY = "any"  # the kind of an implementation that serves every target
TASK_CACHE_SIZE = 256  # tasks kept, the least recently used dropped first

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[/.][A-Za-z_0-9][A-Za-z0-9_]*)*")

T = TypeVar("T")


@dataclass
class TemplateImpl:
    """One implementation of a template for one template kind."""

    name: str
    kind: str                      # a template kind ("cpu", "cuda") or ANY (every target)
    func: Callable
    reference: Callable | None = None

    @property
    def module(self) -> str:
        return getattr(self.func, "__module__", None) or "__main__"


_impls: dict[str, dict[str, TemplateImpl]] = {}  # template name -> template kind -> implementation
_tasks: OrderedDict = OrderedDict()               # (template name, ...) -> task, least recent first
_lock = threading.RLock()


# ---------------------------------------------------------------------------- template kinds


def template_kind(target) -> str:
    """The template kind (``"cpu"``, ``"cuda"``) that implements templates for ``target`` (a
    Target or its string; None: the current target, else :func:`compiler.target.default_target`):
    the ``template_kind`` of the target's backend."""
    return backends.get(Target.from_any(target) or default_target()).template_kind


def template_kinds() -> list[str]:
    """The template kinds of the registered backends, sorted (``["cpu", "cuda"]``); with
    :data:`ANY`, the kinds an implementation may be registered for."""
    return sorted({b.template_kind for b in backends.registered()})


# ---------------------------------------------------------------------------- templates


def check_name(name) -> None:
    """Raise :class:`SearchSpaceError` unless ``name`` is a template name: an identifier, or
    identifiers joined by ``/`` or ``.`` (``"matmul"``, ``"tutorial/matmul"``)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SearchSpaceError("a template name is an identifier, or identifiers joined by '/' or '.', "
                               f"such as 'matmul' or 'tutorial/matmul'; got {name!r}")


def register(impl: TemplateImpl) -> None:
    """Add ``impl`` under ``impl.name`` for ``impl.kind``, and forget the cached tasks of that name.

    The same function registered again (a reloaded module, a re-run notebook cell)
    replaces its earlier registration; an implementation of another function for the same
    kind raises :class:`SearchSpaceError`, and so does a generic one (:data:`ANY`) beside
    any implementation of another function, since it would fill in for every other kind.
    """
    check_name(impl.name)
    if not callable(impl.func):
        raise SearchSpaceError(f"@template({impl.name!r}) decorates a function, got {impl.func!r}")
    _check_signature(impl.name, impl.func)
    with _lock:
        impls = _impls.setdefault(impl.name, {})
        rivals = list(impls.values()) if impl.kind == ANY else [impls.get(impl.kind)]
        for old in rivals:
            if old is not None and (old.module, old.func.__qualname__) != (impl.module,
                                                                            impl.func.__qualname__):
                raise SearchSpaceError(
                    f"template {impl.name!r} already has a {old.kind!r} implementation "
                    f"({old.module}.{old.func.__qualname__}); pick another name")
        impls[impl.kind] = impl
        _forget_tasks(impl.name)


def _check_signature(name: str, func: Callable) -> None:
    for p in inspect.signature(func).parameters.values():
        if p.kind is p.KEYWORD_ONLY or p.kind is p.VAR_KEYWORD:
            raise SearchSpaceError(f"template {name!r}: parameter {p.name!r} must be positional "
                                   "(task arguments are a plain list)")
        if p.name == "target":
            raise SearchSpaceError(f"template {name!r}: 'target' is reserved for the target of a call")


def unregister(name: str, kind: str | None = None) -> None:
    """Remove template ``name`` (only its implementation for ``kind`` when given: a template
    kind or :data:`ANY`) and forget its cached tasks; nothing happens for an unknown name."""
    with _lock:
        impls = _impls.get(name)
        if impls is None:
            return
        if kind is not None:
            impls.pop(kind, None)
        if kind is None or not impls:
            del _impls[name]
        _forget_tasks(name)


def is_registered(name: str) -> bool:
    """Whether template ``name`` has an implementation."""
    return name in _impls


def implementations(name: str) -> dict[str, TemplateImpl]:
    """``{template kind: implementation}`` of template ``name``, in registration order."""
    with _lock:
        impls = _impls.get(name)
        if impls is None:
            raise SearchSpaceError(f"unknown template {name!r}; registered: "
                                   f"{', '.join(sorted(_impls)) or 'none'}")
        return dict(impls)


def implementation(name: str, kind: str) -> TemplateImpl:
    """The implementation of template ``name`` for template kind ``kind``: the one registered
    for that kind, else the one that serves every target."""
    impls = implementations(name)
    found = impls.get(kind) or impls.get(ANY)
    if found is None:
        have = ", ".join(impls) or "none"
        raise SearchSpaceError(f"template {name!r} has no {kind!r} implementation (it has: {have})")
    return found


def list_templates() -> dict[str, list[str]]:
    """``{template name: [template kinds]}`` of every registered template (:data:`ANY` for an
    implementation that serves every target)."""
    with _lock:
        return {n: sorted(impls) for n, impls in sorted(_impls.items())}


# ---------------------------------------------------------------------------- tasks


def cached_task(key: tuple, make: Callable[[], T]) -> T:
    """The task cached under ``key``, else ``make()``, cached.

    ``key[0]`` is the template name (its tasks are forgotten when it is registered again or
    removed); the rest identifies the task (:func:`search_spaces.create_task` uses the
    normalised arguments and the target). ``make`` runs outside the lock; when two threads
    make the same task, the first cached wins. At most :data:`TASK_CACHE_SIZE` tasks are kept.
    """
    with _lock:
        task = _tasks.get(key)
        if task is not None:
            _tasks.move_to_end(key)
            return task
    task = make()
    with _lock:
        task = _tasks.setdefault(key, task)
        while len(_tasks) > TASK_CACHE_SIZE:
            _tasks.popitem(last=False)
    return task


def _forget_tasks(name: str) -> None:
    """Drop the cached tasks of template ``name`` (called with the lock held)."""
    for key in [k for k in _tasks if k[0] == name]:
        del _tasks[key]
