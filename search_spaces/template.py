"""Templates as users write and call them: ``@template``, ``get_config`` and template calls.

A template is a plain function ``f(*args) -> (schedule, tensors)``: compute
definition, then knobs (through :func:`get_config`), then schedule. It is
registered under a name (identifiers joined by ``/`` or ``.``, as in AutoTVM's
``"tutorial/matmul"``) and optionally a numpy reference
``reference(*args) -> (inputs, expected_outputs)``. Registered without a target, one
implementation serves every target, as in AutoTVM; ``target="cpu"`` (``llvm``
targets) or ``target="cuda"`` restricts it to one template kind (the kinds are those of
the registered backends, :attr:`compiler.backends.Backend.template_kind`), and such an
implementation takes precedence over a generic one::

    @template("my_matmul", target="cpu", reference=my_matmul_ref)
    def my_matmul(N, L, M, dtype):
        ...
        cfg = get_config()
        cfg.define_split("tile_y", y, num_outputs=2)
        yo, yi = cfg["tile_y"].apply(s, C, y)
        return s, [A, B, C]

The decorator returns a :class:`Template`; calling it (``my_matmul(64, 64, 64,
"float32", target="llvm")``) creates the task and instantiates it with the config
the current dispatch context gives. The implementations themselves are kept by
:mod:`search_spaces.registry`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from compiler.target import Target, default_target
from search_spaces import registry
from search_spaces.dispatch import current_context
from search_spaces.errors import SearchSpaceError
from search_spaces.registry import ANY, TemplateImpl, list_templates
from search_spaces.registry import template_kind as target_kind
from search_spaces.task import create_task, get_config

__all__ = ["template", "get_config", "get_template", "list_templates", "Template", "TemplateImpl",
           "target_kind", "unregister_template", "ANY"]


class Template:
    """Every implementation registered under one name; call it to instantiate a schedule.

    There is one Template per name (:func:`get_template` and every ``@template`` of that
    name give the same object); its implementations are those the registry holds now.
    """

    def __init__(self, name: str):
        self.name = name
        self.__doc__ = f"Template {name!r}."

    @property
    def impls(self) -> dict[str, TemplateImpl]:
        """``{template kind: implementation}``, in registration order (empty once removed)."""
        return registry.implementations(self.name) if registry.is_registered(self.name) else {}

    def impl(self, kind: str) -> TemplateImpl:
        """The implementation for template kind ``kind`` ("cpu" or "cuda"): the one registered
        for that kind, else the one that serves every target."""
        return registry.implementation(self.name, kind)

    def __call__(self, *args, target=None, **kwargs):
        """``(schedule, tensors)`` for ``args`` on ``target`` (default: the current target,
        else :func:`compiler.target.default_target`), with the config the current dispatch
        context gives."""
        tgt = Target.from_any(target) or default_target()
        task = create_task(self.name, args, tgt, kwargs=kwargs)
        cfg = current_context().query(tgt, task)
        return task.instantiate(cfg)

    def __repr__(self) -> str:
        return f"<template {self.name!r} for {', '.join(self.impls)}>"


_templates: dict[str, Template] = {}  # the one Template object of each name ever registered
_templates_lock = threading.Lock()


def _template_named(name: str) -> Template:
    with _templates_lock:
        tmpl = _templates.get(name)
        if tmpl is None:
            tmpl = _templates[name] = Template(name)
        return tmpl


def template(name: str, target: str | None = None, reference: Callable | None = None):
    """Register the decorated function as template ``name``; returns the :class:`Template`
    for ``name``.

    Without ``target`` (or with ``"any"``) the function serves every target; a template
    kind, ``target="cpu"`` or ``"cuda"``, registers it for that kind only (it then wins
    over a generic implementation).
    """
    registry.check_name(name)
    kinds = registry.template_kinds()
    if target is not None and target not in (*kinds, ANY):
        raise SearchSpaceError(f"template {name!r}: target must be {', '.join(map(repr, kinds))} or None "
                               f"(every target; also written {ANY!r}), got {target!r}")
    kind = ANY if target is None else target
    if reference is not None and not callable(reference):
        raise SearchSpaceError(f"template {name!r}: reference must be callable, got {reference!r}")

    def register(func: Callable) -> Template:
        registry.register(TemplateImpl(name, kind, func, reference))
        tmpl = _template_named(name)
        if func.__doc__ and tmpl.__doc__.startswith("Template "):
            tmpl.__doc__ = func.__doc__
        return tmpl

    return register


def get_template(name: str) -> Template:
    """The registered template ``name``."""
    registry.implementations(name)  # a SearchSpaceError naming the registered ones, if unknown
    return _template_named(name)


def unregister_template(name: str, target: str | None = None) -> None:
    """Remove template ``name`` (only its ``target`` implementation when given: "cpu", "cuda"
    or "any")."""
    registry.unregister(name, target)
