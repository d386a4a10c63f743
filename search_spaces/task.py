"""Tasks: a template, its arguments and a target; the unit of tuning.

A :class:`Task` is plain data (template name, JSON-serialisable args, target string)
plus what follows from it: the workload key that tuning logs use, the config space
(defined by running the template once in define mode), the FLOP count of the compute
definition, and :meth:`Task.instantiate` turning a config into a schedule.

Tasks cross process boundaries as JSON (``to_json``/``from_json``, which rebuild the
space from the registry). The JSON names the template by reference: the other side
imports the template's module. Templates defined in ``__main__`` (or in modules that
cannot be imported by name) cannot be found that way; ``to_json(by_value=True)``,
which measurement workers receive, adds them by value (``"code"``: the template,
its reference and its kind, pickled with cloudpickle, base64), and
``from_json(data, allow_code=True)`` registers them again where they land. Plain
``to_json()`` is data only, as tuning logs require. Pickling a task goes through the
same by-value JSON.

While a template runs, :func:`get_config` is the config in effect: the task's
:class:`~search_spaces.space.ConfigSpace` while it defines its space, the config being
applied when it is instantiated (:func:`config_scope`).
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import importlib.util
import inspect
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from compiler.target import Target, default_target
from search_spaces import registry
from search_spaces.errors import InstantiationError, SearchSpaceError
from search_spaces.flops import count_flops
from search_spaces.registry import TemplateImpl, template_kind
from search_spaces.space import ConfigEntity, ConfigSpace, FallbackConfigEntity

__all__ = ["Task", "create_task", "workload_key", "target_key", "get_config", "config_scope"]

_from_code: dict[str, str] = {}  # template name -> digest of the code it was registered from here


def target_key(target) -> str:
    """``"<kind>:<model>"`` of a target (``"llvm:znver4"``, ``"cuda:sm_90"``): what tuning logs key on."""
    t = Target.from_any(target) or default_target()
    return f"{t.kind}:{t.model}"


# ---------------------------------------------------------------------------- config in effect

_local = threading.local()


def _config_stack() -> list:
    stack = getattr(_local, "configs", None)
    if stack is None:
        stack = _local.configs = []
    return stack


@contextmanager
def config_scope(config) -> Iterator:
    """Make ``config`` (a ConfigSpace to define, or a ConfigEntity to apply) what
    :func:`get_config` returns inside the block, in this thread."""
    stack = _config_stack()
    stack.append(config)
    try:
        yield config
    finally:
        stack.pop()


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


# ---------------------------------------------------------------------------- tasks


def _plain(value, where: str):
    """``value`` as JSON-able data: tuples and lists become tuples, numpy scalars Python ones."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v, where) for v in value)
    if isinstance(value, np.dtype):
        return str(value)
    raise SearchSpaceError(f"{where}: argument {value!r} is not JSON-serialisable data "
                           "(use ints, floats, strings, bools, None and lists of them)")


def _canonical_args(impl: TemplateImpl, args: Sequence, kwargs: dict | None) -> tuple:
    """All of the template's parameters, positionally, with defaults filled in; except trailing
    option lists (parameters whose default is ``()``, such as the CPU templates' ``epilogue``)
    left empty, so that adding one to a template keeps the workload keys of its tuning logs."""
    sig = inspect.signature(impl.func)
    try:
        bound = sig.bind(*args, **(kwargs or {}))
    except TypeError as exc:
        raise SearchSpaceError(f"template {impl.name!r}{sig}: {exc}") from None
    bound.apply_defaults()
    out = list(_plain(tuple(bound.args), f"template {impl.name!r}"))
    params = list(sig.parameters.values())
    while out and len(out) <= len(params) and _empty_option(params[len(out) - 1]) and out[-1] == ():
        out.pop()
    return tuple(out)


def _empty_option(param: inspect.Parameter) -> bool:
    return isinstance(param.default, tuple) and param.default == () and param.kind is not param.VAR_POSITIONAL


def _args_json(args: tuple) -> str:
    return json.dumps(list(args), separators=(",", ":"), sort_keys=True)


def workload_key(template: str, args: Sequence, target) -> str:
    """A stable fingerprint of (template, args, target kind and model): a sha1 hex digest."""
    payload = json.dumps({"template": template, "args": json.loads(_args_json(tuple(args))),
                          "target": target_key(target)}, separators=(",", ":"), sort_keys=True)
    return hashlib.sha1(payload.encode()).hexdigest()


class Task:
    """A template instantiated on concrete arguments for a target.

    Build one with :func:`create_task`. ``config_space``, ``flop`` and the keys are
    computed on first use; :meth:`instantiate` gives ``(schedule, tensors)``.
    """

    def __init__(self, template: str, args: Sequence, target):
        self.template = template
        tgt = Target.from_any(target) or default_target()
        self.target = str(tgt)
        self.args = _plain(tuple(args), f"task {template!r}")
        self._impl = registry.implementation(template, template_kind(tgt))
        self._space: ConfigSpace | None = None
        self._flop: int | None = None
        self._code: str | None = None  # the template by value (base64 cloudpickle), made once
        self._key: str | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ identity

    @property
    def name(self) -> str:
        """The template name (as AutoTVM calls it)."""
        return self.template

    @property
    def target_kind(self) -> str:
        """The template kind of this task's target ("cpu", "cuda":
        :func:`search_spaces.registry.template_kind`); its template implementation is the one
        for this kind, else the one that serves every target."""
        return template_kind(self.target)

    @property
    def workload(self) -> tuple:
        """``(name, *args)``: the workload as AutoTVM writes it, e.g.
        ``("tutorial/matmul", 512, 512, 512, "float32")`` (the target is not part of it)."""
        return (self.template, *self.args)

    @property
    def workload_key(self) -> str:
        """Stable fingerprint of (template, args, target kind and model); see :func:`workload_key`."""
        if self._key is None:  # a task's identity never changes; tuners ask for it per config
            self._key = workload_key(self.template, self.args, self.target)
        return self._key

    @property
    def workload_name(self) -> str:
        """A readable form of the workload, e.g. ``matmul(64,64,64,float32)@llvm:znver4``."""
        def fmt(v) -> str:
            if isinstance(v, tuple):
                return "(" + ",".join(fmt(x) for x in v) + ")"
            return str(v)

        return f"{self.template}({','.join(fmt(a) for a in self.args)})@{target_key(self.target)}"

    def __eq__(self, other) -> bool:
        return (isinstance(other, Task) and self.template == other.template
                and self.args == other.args and self.target == other.target)

    def __hash__(self) -> int:
        return hash((self.template, self.args, self.target))

    def __repr__(self) -> str:
        return f"Task({self.template!r}, args={list(self.args)!r}, target={self.target!r})"

    # ------------------------------------------------------------------ space, flops, reference

    def _define(self) -> None:
        with self._lock:
            if self._space is not None:
                return
            space = ConfigSpace()
            with Target(self.target), config_scope(space):
                try:
                    _, tensors = _call(self._impl, self.args)
                except InstantiationError:
                    raise
                except Exception as exc:
                    raise InstantiationError(
                        f"template {self.template!r} failed while defining its space for args "
                        f"{list(self.args)!r}: {type(exc).__name__}: {exc}",
                        self.template, None, exc) from exc
            self._flop = space.flop or count_flops(tensors)
            self._space = space

    @property
    def config_space(self) -> ConfigSpace:
        """The template's knobs and constraints for these arguments."""
        if self._space is None:
            self._define()
        return self._space

    @property
    def flop(self) -> int:
        """Arithmetic operations of one run (multiply-adds count two): what the template declared
        with ``cfg.add_flop``, else counted from the compute definition."""
        if self._space is None:
            self._define()
        return self._flop

    @property
    def reference(self):
        """The template's numpy reference ``fn(*args) -> (inputs, expected)``, or None."""
        return self._impl.reference

    def reference_data(self, rng: np.random.Generator | int | None = None):
        """``(inputs, expected_outputs)`` from the numpy reference (lists of arrays).

        References that accept an ``rng`` keyword get it, so the data is reproducible.
        """
        ref = self._impl.reference
        if ref is None:
            raise SearchSpaceError(f"template {self.template!r} has no numpy reference")
        if "rng" in inspect.signature(ref).parameters:
            rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
            return ref(*self.args, rng=rng)
        return ref(*self.args)

    # ------------------------------------------------------------------ instantiation

    def instantiate(self, config: ConfigEntity | None = None):
        """``(schedule, tensors)`` for ``config`` (the space's default when None).

        A config that does not belong to the space, or a template that fails with it,
        raises :class:`InstantiationError` naming the template, the config and the cause.
        """
        space = self.config_space
        if config is None:
            config = space.default_config
        if not isinstance(config, ConfigEntity):
            raise InstantiationError(f"template {self.template!r}: a config is a ConfigEntity, "
                                     f"got {type(config).__name__}", self.template, config)
        if isinstance(config, FallbackConfigEntity):
            # The template gets the fallback config itself: what it sets there is kept, and
            # its values may lie outside the space (a split of 64 by 3).
            if not config.knob_kinds_match(space):
                raise InstantiationError(f"template {self.template!r}: fallback config "
                                         f"{config.knob_values()!r} has other knobs than its space "
                                         f"({', '.join(space.space_map) or 'none'})", self.template, config)
            checked = config
        else:
            try:
                checked = space.from_json(config.to_json())
            except SearchSpaceError as exc:
                raise InstantiationError(f"template {self.template!r}: config {config.knob_values()!r} "
                                         f"is not in its space: {exc}", self.template, config, exc) from exc
            checked.is_fallback = config.is_fallback
        with Target(self.target), config_scope(checked):
            try:
                return _call(self._impl, self.args)
            except Exception as exc:
                raise InstantiationError(
                    f"template {self.template!r} failed with config {config.knob_values()!r}: "
                    f"{type(exc).__name__}: {exc}", self.template, config, exc) from exc

    # ------------------------------------------------------------------ transport

    def to_json(self, by_value: bool = False) -> dict:
        """``{"template", "args", "target"}``, plus ``"module"`` for an importable template
        outside this package.

        With ``by_value`` a template that no other process can import (defined in
        ``__main__`` or inside a function) comes along as ``"code"``: pickled code, for
        measurement workers only, never for a tuning log.
        """
        out = {"template": self.template, "args": json.loads(_args_json(self.args)), "target": self.target}
        if _by_reference(self._impl):
            if not self._impl.module.startswith("search_spaces."):
                out["module"] = self._impl.module
        elif by_value:
            out["code"] = self._template_code()
        return out

    def _template_code(self) -> str:
        with self._lock:
            if self._code is None:
                impl = self._impl
                blob = _cloudpickle().dumps((impl.func, impl.reference, impl.kind))
                self._code = base64.b64encode(blob).decode("ascii")
            return self._code

    @classmethod
    def from_json(cls, data: dict | str, allow_code: bool = False) -> Task:
        """The task described by ``data``; imports ``data["module"]`` if its template is not
        registered yet. A template sent by value (``"code"``) is unpickled and registered
        only with ``allow_code`` (data from a process this one trusts: its tuner)."""
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, dict) or not {"template", "args", "target"} <= set(data):
            raise SearchSpaceError(f"a task is {{'template', 'args', 'target'}}, got {data!r}")
        code = data.get("code")
        if code is not None and not allow_code:
            raise SearchSpaceError(f"task of template {data['template']!r} carries pickled code; only "
                                   "measurement workers load it (from_json(..., allow_code=True))")
        _ensure_registered(data["template"], data.get("module"), code)
        return create_task(data["template"], data["args"], data["target"])

    def __reduce__(self):
        return (_task_from_json, (self.to_json(by_value=True),))


def _call(impl: TemplateImpl, args: tuple):
    out = impl.func(*args)
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], (list, tuple))):
        raise SearchSpaceError(f"template {impl.name!r} must return (schedule, [tensors...]), got {out!r}")
    return out[0], list(out[1])


def _by_reference(impl: TemplateImpl) -> bool:
    """Whether another process can find ``impl`` by importing its module: it is defined at
    the top level of a module that is not ``__main__`` and can be imported by name."""
    if impl.module == "__main__" or "<locals>" in getattr(impl.func, "__qualname__", "<locals>"):
        return False
    try:
        return importlib.util.find_spec(impl.module) is not None
    except (ImportError, ValueError):
        return False


def _cloudpickle():
    # An optional dependency, imported when a template travels by value.
    try:
        import cloudpickle
    except ImportError:  # ray ships a copy
        from ray import cloudpickle
    return cloudpickle


def _ensure_registered(name: str, module: str | None, code: str | None) -> None:
    """Make template ``name`` known here: import its module, or register it from ``code``
    (again when the code changed: a redefined template in the tuner's notebook)."""
    digest = None if code is None else hashlib.sha1(code.encode("ascii")).hexdigest()
    if registry.is_registered(name) and (digest is None or _from_code.get(name, digest) == digest):
        return
    if module is not None:
        importlib.import_module(module)
    elif code is not None:
        func, reference, kind = _cloudpickle().loads(base64.b64decode(code))
        registry.register(TemplateImpl(name, kind, func, reference))
        _from_code[name] = digest


def _task_from_json(data: dict) -> Task:
    """Unpickling a task (pickles are code already)."""
    return Task.from_json(data, allow_code=True)


def create_task(name: str, args: Sequence, target=None, kwargs: dict | None = None) -> Task:
    """The task of template ``name`` on ``args`` (plus ``kwargs``) for ``target``.

    ``target`` is a Target or a string, defaulting to the current target, else
    :func:`compiler.target.default_target` (``"llvm"``). Args are normalised to every
    parameter of the template, in order, with defaults filled in. Tasks are cached
    (:func:`search_spaces.registry.cached_task`), so the space is defined once per workload.
    """
    tgt = Target.from_any(target) or default_target()
    impl = registry.implementation(name, template_kind(tgt))
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise SearchSpaceError(f"create_task({name!r}): args is a list or tuple, got {args!r}")
    full = _canonical_args(impl, tuple(args), kwargs)
    return registry.cached_task((name, _args_json(full), str(tgt)), lambda: Task(name, full, tgt))
