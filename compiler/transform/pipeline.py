"""Pass infrastructure: passes, pipelines of them, the pass context and instruments.

A :class:`Pass` is a named step. Its ``scope`` says what it runs on: ``"function"`` (each
host function of an IRModule, ``PrimFunc -> PrimFunc``), ``"kernel"`` (each device kernel,
a function whose ``calling_conv`` attribute is ``"kernel"``) or ``"module"`` (the whole
``IRModule -> IRModule``, for passes that add or remove functions, such as splitting host
from device code).

A :class:`Pipeline` is a named tuple of passes and :class:`Phase` markers, written once as
data (see :mod:`compiler.passes` and :mod:`compiler.backends`). A marker is where a user's
passes of that phase go, as TVM's ``PassContext(config={"tir.add_lower_pass": [(phase, pass)]})``
puts them::

    with PassContext(config={"tir.add_lower_pass": [(1, my_pass)]}):
        compiler.lower(s, args)

:class:`PassInstrument` objects see the module before and after each pass: the pass
context's, the ones given to :meth:`Pipeline.run`, and two that the environment turns on
for every pipeline:

* ``COMPILER_DUMP_IR=DIR`` writes the IR after each named pass into ``DIR``
  (:class:`DumpIR`; the code generators add their own text, LLVM IR and PTX);
* ``COMPILER_VERIFY_IR=1`` checks that the IR is well formed after each pass
  (:class:`VerifyIR`; the test suite turns it on).
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import LoweringError
from ..tir.function import IRModule, PrimFunc
from .verify import verify_ir

__all__ = ["Pass", "Phase", "Pipeline", "PassContext", "PassInfo", "PassInstrument", "DumpIR", "VerifyIR",
           "prim_func_pass", "is_kernel", "dump_text", "DUMP_IR_ENV", "VERIFY_IR_ENV", "ADD_LOWER_PASS"]

DUMP_IR_ENV = "COMPILER_DUMP_IR"
VERIFY_IR_ENV = "COMPILER_VERIFY_IR"
#: The PassContext config key of user passes, as in TVM: a list of ``(phase, pass)``.
ADD_LOWER_PASS = "tir.add_lower_pass"
_SCOPES = ("function", "kernel", "module")


def is_kernel(func: PrimFunc) -> bool:
    """Whether ``func`` is a device kernel (launched by host code, not called directly)."""
    return func.attrs.get("calling_conv") == "kernel"


@dataclass(frozen=True)
class Pass:
    """One step of a pipeline.

    ``run`` takes and returns a PrimFunc (scope ``"function"`` or ``"kernel"``) or an IRModule
    (scope ``"module"``); a function pass with ``with_module`` also receives the module the
    function is in. ``optimize`` steps are skipped by ``lower(simple_mode=True)``.
    ``when_disabled`` runs in its place when a PassContext disables it (the part of its work
    that later passes rely on, as the simplification that ``unroll_loops`` does on the way).
    """

    name: str
    run: Callable
    optimize: bool = False
    scope: str = "function"
    with_module: bool = False
    when_disabled: Pass | None = None

    def __post_init__(self):
        if self.scope not in _SCOPES:
            raise ValueError(f"pass {self.name!r}: scope must be one of {_SCOPES}, got {self.scope!r}")
        if not callable(self.run):
            raise TypeError(f"pass {self.name!r}: run must be callable, got {self.run!r}")
        if self.when_disabled is not None and not isinstance(self.when_disabled, Pass):
            raise TypeError(f"pass {self.name!r}: when_disabled must be a Pass or None, "
                            f"got {self.when_disabled!r}")


@dataclass(frozen=True)
class Phase:
    """Where the user passes of phase ``number`` run (see :data:`ADD_LOWER_PASS`)."""

    number: int


@dataclass(frozen=True)
class PassInfo:
    """What an instrument is told of the pass at hand: its name, its pipeline and its place."""

    name: str
    pipeline: str
    index: int
    scope: str


class PassInstrument:
    """Sees the module around every pass; override either method (both do nothing here)."""

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        """Called with the module a pass is about to transform."""

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        """Called with the module a pass returned."""


def prim_func_pass(pass_func: Callable | None = None, opt_level: int = 0, name: str | None = None):
    """A function pass from ``pass_func(func, mod, ctx) -> func``, as TVM's
    ``tir.transform.prim_func_pass`` (also usable as a decorator, with or without arguments).

    ``mod`` is the module the function belongs to and ``ctx`` the current :class:`PassContext`.
    ``opt_level`` is accepted for TVM's signature; every pass given to a pipeline runs.
    """
    del opt_level

    def make(fn: Callable) -> Pass:
        def run(func: PrimFunc, mod: IRModule) -> PrimFunc:
            return fn(func, mod, PassContext.current())

        return Pass(name or getattr(fn, "__name__", "user_pass"), run, with_module=True)

    return make if pass_func is None else make(pass_func)


class PassContext:
    """The configuration that every pipeline run inside ``with PassContext(...):`` sees.

    ``config`` holds :data:`ADD_LOWER_PASS`: ``[(phase, pass), ...]`` where ``pass`` is a
    :class:`Pass` (of any scope), one made by :func:`prim_func_pass`, or a plain function
    ``PrimFunc -> PrimFunc``; phase 0 runs before the buffers are flattened, 1 after, 2 after
    the loop optimisations (partition, unroll, vectorize), 3 at the end of lowering.
    ``instruments`` see every pass; ``disabled_pass`` names passes to skip. ``opt_level``
    is kept for TVM's signature.
    """

    _local = threading.local()

    def __init__(self, opt_level: int = 2, required_pass: Iterable[str] = (),
                 disabled_pass: Iterable[str] = (), instruments: Iterable[PassInstrument] = (),
                 config: dict | None = None):
        self.opt_level = opt_level
        self.required_pass = tuple(required_pass)
        self.disabled_pass = frozenset(disabled_pass)
        self.instruments = tuple(instruments)
        self.config = dict(config or {})
        unknown = sorted(set(self.config) - {ADD_LOWER_PASS})
        if unknown:
            raise LoweringError(f"PassContext: unknown config key {unknown[0]!r}; known: {ADD_LOWER_PASS!r}")
        self.user_passes: dict[int, list[Pass]] = {}
        for entry in self.config.get(ADD_LOWER_PASS, ()):
            phase, item = _phase_entry(entry)
            self.user_passes.setdefault(min(phase, 3), []).append(item)

    def __enter__(self) -> PassContext:
        _stack(self._local).append(self)
        return self

    def __exit__(self, *exc) -> None:
        _stack(self._local).pop()

    @classmethod
    def current(cls) -> PassContext:
        """The innermost context of the enclosing ``with`` blocks (an empty one outside them)."""
        stack = _stack(cls._local)
        return stack[-1] if stack else _DEFAULT


def _stack(local) -> list:
    if not hasattr(local, "stack"):
        local.stack = []
    return local.stack


def _phase_entry(entry) -> tuple[int, Pass]:
    try:
        phase, item = entry
    except (TypeError, ValueError):
        raise LoweringError(f"{ADD_LOWER_PASS} takes (phase, pass) pairs, got {entry!r}") from None
    if not isinstance(phase, int) or isinstance(phase, bool) or phase < 0:
        raise LoweringError(f"{ADD_LOWER_PASS}: a phase is an int >= 0, got {phase!r}")
    if isinstance(item, Pass):
        return phase, item
    if callable(item):
        return phase, Pass(getattr(item, "__name__", "user_pass"), item)
    raise LoweringError(f"{ADD_LOWER_PASS}: expected a Pass or a function PrimFunc -> PrimFunc, got {item!r}")


_DEFAULT = PassContext()


@dataclass(frozen=True)
class Pipeline:
    """Passes in order, with the phases where users' passes go; run with :meth:`run`."""

    name: str
    steps: tuple

    def passes(self, simple_mode: bool = False, context: PassContext | None = None) -> list[Pass]:
        """The passes a run performs, in order: user passes in their phases, disabled passes
        replaced by their ``when_disabled`` (or left out), and (in simple mode) ``optimize``
        passes left out."""
        ctx = context or PassContext.current()
        out: list[Pass] = []
        for step in self.steps:
            found = ctx.user_passes.get(step.number, []) if isinstance(step, Phase) else [step]
            for p in found:
                while p is not None and p.name in ctx.disabled_pass:
                    p = p.when_disabled
                if p is not None and not (simple_mode and p.optimize):
                    out.append(p)
        return out

    def run(self, mod: IRModule | PrimFunc, instruments: Iterable[PassInstrument] = (),
            simple_mode: bool = False) -> IRModule | PrimFunc:
        """``mod`` after every pass (a PrimFunc in, a PrimFunc out; an IRModule in, an IRModule out).

        ``instruments`` see each pass, after those of the pass context and of the environment.
        """
        ctx = PassContext.current()
        single = isinstance(mod, PrimFunc)
        module = IRModule({mod.name: mod}) if single else mod
        if not isinstance(module, IRModule):
            raise LoweringError(f"pipeline {self.name!r} runs on a PrimFunc or an IRModule, "
                                f"got {type(mod).__name__}")
        watchers = [*ctx.instruments, *instruments, *_environment_instruments()]
        for index, p in enumerate(self.passes(simple_mode, ctx)):
            info = PassInfo(p.name, self.name, index, p.scope)
            for w in watchers:
                w.run_before_pass(module, info)
            module = _apply(p, module)
            for w in watchers:
                w.run_after_pass(module, info)
        if not single:
            return module
        if len(module) != 1:
            raise LoweringError(f"pipeline {self.name!r} turned one function into {len(module)}; "
                                "run it on an IRModule")
        return next(iter(module.functions.values()))

    def __str__(self) -> str:
        names = [f"<phase {s.number}>" if isinstance(s, Phase) else s.name for s in self.steps]
        return f"{self.name}: " + " -> ".join(names)


def _apply(p: Pass, mod: IRModule) -> IRModule:
    if p.scope == "module":
        out = p.run(mod)
        if not isinstance(out, IRModule):
            raise LoweringError(f"module pass {p.name!r} returned {type(out).__name__}, not an IRModule")
        return out
    want_kernel = p.scope == "kernel"
    funcs = {}
    for name, func in mod.items():
        funcs[name] = _run_function_pass(p, func, mod) if is_kernel(func) == want_kernel else func
    return mod.with_functions(funcs)


def _run_function_pass(p: Pass, func: PrimFunc, mod: IRModule) -> PrimFunc:
    out = p.run(func, mod) if p.with_module else p.run(func)
    if not isinstance(out, PrimFunc):
        raise LoweringError(f"pass {p.name!r} returned {type(out).__name__}, not a PrimFunc")
    return out


# ---------------------------------------------------------------------------- instruments


class VerifyIR(PassInstrument):
    """Checks after each pass that every function is well formed (:func:`verify_ir`); a problem
    is a LoweringError naming the pass that made it."""

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        problems = [f"{name}: {problem}" for name, func in mod.items() for problem in verify_ir(func)]
        if problems:
            raise LoweringError(f"the IR is malformed after pass {info.name!r} of pipeline "
                                f"{info.pipeline!r}:\n  " + "\n  ".join(problems[:20]))


_dump_counter = itertools.count(1)


class DumpIR(PassInstrument):
    """Writes the module into ``directory`` before a pipeline's first pass and after every pass:
    ``0001-lower-00-input.tir``, ``0002-lower-00-inject_prefetch.tir``, ... (numbered in the order
    written, across every pipeline of the process)."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        if info.index == 0:
            self._write(mod, info, "input")

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._write(mod, info, info.name)

    def _write(self, mod: IRModule, info: PassInfo, label: str) -> None:
        dump_text(self.directory, f"{info.pipeline}-{info.index:02d}-{label}", str(mod), "tir")


def dump_text(directory: str | os.PathLike, label: str, text: str, suffix: str) -> Path:
    """Write ``text`` as the next numbered dump file in ``directory`` (made if missing)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)
    path = directory / f"{next(_dump_counter):04d}-{safe}.{suffix}"
    path.write_text(text)
    return path


def dump_directory() -> str | None:
    """The directory ``COMPILER_DUMP_IR`` names, or None when it is unset."""
    return os.environ.get(DUMP_IR_ENV) or None


def _environment_instruments() -> list[PassInstrument]:
    out: list[PassInstrument] = []
    directory = dump_directory()
    if directory:
        out.append(DumpIR(directory))
    if os.environ.get(VERIFY_IR_ENV, "").strip() not in ("", "0"):
        out.append(VerifyIR())
    return out
