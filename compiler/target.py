"""Compilation targets: what hardware a module is compiled for.

A target is written as a string, a kind followed by options::

    llvm
    llvm -mcpu=skylake-avx512 -mattr=+avx512f,+fma -fast-math
    cuda -arch=sm_90

``str(target)`` gives the canonical spelling (options in a fixed order), which
parses back to an equal target. ``with Target(...):`` makes a target current for
the calls inside the block (a per-thread stack).
"""

from __future__ import annotations

import functools
import threading

from .errors import TargetError

__all__ = ["Target", "host_cpu_name"]

# Options each kind accepts: name -> whether it takes a value.
_OPTIONS = {
    "llvm": {"mcpu": True, "mattr": True, "mtriple": True, "fast-math": False},
    "cuda": {"arch": True, "fast-math": False},
}
_ORDER = ("mcpu", "mtriple", "mattr", "arch", "fast-math")

_stack = threading.local()


@functools.lru_cache(maxsize=1)
def host_cpu_name() -> str:
    """The LLVM name of this machine's CPU (e.g. ``znver4``)."""
    import llvmlite.binding as llvm  # deferred: importing compiler.target must stay cheap

    return llvm.get_host_cpu_name()


class Target:
    """A parsed target string; compare targets with ``==`` (on their canonical text)."""

    def __init__(self, spec: str):
        if isinstance(spec, Target):
            spec = str(spec)
        if not isinstance(spec, str):
            raise TargetError(f"a target is a string such as 'llvm' or 'cuda', got {spec!r}")
        tokens = spec.split()
        if not tokens:
            raise TargetError("empty target string; use e.g. 'llvm' or 'cuda'")
        self.kind: str = tokens[0]
        if self.kind not in _OPTIONS:
            raise TargetError(f"unknown target kind {self.kind!r} in {spec!r}; known: {', '.join(_OPTIONS)}")
        self.options: dict = _parse_options(self.kind, tokens[1:], spec)

    # ------------------------------------------------------------------ attributes

    @property
    def mcpu(self) -> str | None:
        """The CPU to compile for: the host CPU when not given (``None`` for CUDA)."""
        if self.kind != "llvm":
            return None
        return self.options.get("mcpu") or host_cpu_name()

    @property
    def mattr(self) -> list[str]:
        """Extra CPU features such as ``+avx512f`` (empty when not given)."""
        return list(self.options.get("mattr", []))

    @property
    def mtriple(self) -> str | None:
        return self.options.get("mtriple")

    @property
    def arch(self) -> str | None:
        """The CUDA architecture (``sm_90``), or None."""
        return self.options.get("arch")

    @property
    def fast_math(self) -> bool:
        return bool(self.options.get("fast-math", False))

    @property
    def model(self) -> str:
        """The hardware model this target names, used to key tuning logs."""
        if self.kind == "llvm":
            return self.mcpu or "unknown"
        return self.arch or "unknown"

    # ------------------------------------------------------------------ text, equality

    def __str__(self) -> str:
        parts = [self.kind]
        for key in _ORDER:
            if key not in self.options:
                continue
            value = self.options[key]
            if value is True:
                parts.append(f"-{key}")
            elif isinstance(value, list):
                parts.append(f"-{key}={','.join(value)}")
            else:
                parts.append(f"-{key}={value}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = Target(other)
            except TargetError:
                return False
        return isinstance(other, Target) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    # ------------------------------------------------------------------ current target

    def __enter__(self) -> Target:
        _targets().append(self)
        return self

    def __exit__(self, *exc) -> None:
        _targets().pop()

    @staticmethod
    def current() -> Target | None:
        """The innermost target of the enclosing ``with Target(...):`` blocks, or None."""
        stack = _targets()
        return stack[-1] if stack else None

    @staticmethod
    def from_any(value) -> Target | None:
        """A Target from a Target or a string; None gives :meth:`current` (which may be None)."""
        if value is None:
            return Target.current()
        if isinstance(value, Target):
            return value
        return Target(value)


def _targets() -> list:
    stack = getattr(_stack, "targets", None)
    if stack is None:
        stack = _stack.targets = []
    return stack


def _parse_options(kind: str, tokens: list[str], spec: str) -> dict:
    known = _OPTIONS[kind]
    options: dict = {}
    for tok in tokens:
        if not tok.startswith("-") or tok in ("-", "--"):
            raise TargetError(f"malformed option {tok!r} in target {spec!r}: options look like -key=value")
        key, eq, value = tok.lstrip("-").partition("=")
        if key not in known:
            raise TargetError(f"unknown option -{key} for target kind {kind!r} in {spec!r}; "
                              f"known: {', '.join('-' + k for k in known)}")
        if known[key] and (not eq or not value):
            raise TargetError(f"option -{key} of target {spec!r} needs a value (-{key}=...)")
        if not known[key] and eq:
            raise TargetError(f"option -{key} of target {spec!r} takes no value")
        if key in options:
            raise TargetError(f"option -{key} given twice in target {spec!r}")
        if key == "mattr":
            feats = [f for f in value.split(",") if f]
            bad = [f for f in feats if f[0] not in "+-"]
            if not feats or bad:
                raise TargetError(f"-mattr features must start with + or -, got {value!r} in {spec!r}")
            options[key] = feats
        else:
            options[key] = value if known[key] else True
    return options
