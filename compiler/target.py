"""Compilation targets: what hardware a module is compiled for.

A target is written as a string, a kind followed by options::

    llvm
    llvm -mcpu=skylake-avx512 -mattr=+avx512f,+fma -fast-math
    cuda -arch=sm_90

``str(target)`` gives the canonical spelling (options in a fixed order), which
parses back to an equal target. ``with Target(...):`` makes a target current for
the calls inside the block (a per-thread stack).

The kinds a target may have are registered here by the backends
(:mod:`compiler.backends`): each :class:`TargetKindInfo` says which options the kind takes,
how they are checked and what hardware model its targets name.

An LLVM-compiled (CPU) target that names a CPU, features or a triple is checked against
LLVM when it is constructed (once per process and spelling; :func:`check_llvm_options`): an
unknown CPU or feature raises :class:`~compiler.errors.TargetError` naming the close
matches, instead of LLVM printing a warning and later aborting the process.
:func:`llvm_cpus` and :func:`llvm_features` list what LLVM knows.
"""

from __future__ import annotations

import difflib
import functools
import logging
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .errors import TargetError

__all__ = ["Target", "TargetKind", "TargetKindInfo", "register_target_kind", "unregister_target_kind",
           "target_kinds", "default_target", "host_cpu_name", "llvm_cpus", "llvm_features",
           "check_llvm_options"]

logger = logging.getLogger(__name__)

_stack = threading.local()


@dataclass(frozen=True)
class TargetKindInfo:
    """What a target kind is: registered by its backend (:func:`compiler.backends.register`).

    ``options`` maps each option the kind accepts to whether it takes a value, in the order
    ``str(target)`` writes them; ``check_options(options, spec)`` raises TargetError for
    options the kind cannot compile for; ``model(target)`` names the hardware a target of
    the kind stands for in tuning logs (the CPU, the GPU architecture), and ``model_option`` the
    option that names it (``mcpu``, ``arch``; see :meth:`Target.pinned`); ``default_host`` is
    the kind of the host target of a device kind; ``device_type`` is where its code runs.
    """

    name: str
    device_type: str
    options: Mapping[str, bool] = field(default_factory=dict)
    check_options: Callable[[dict, str], None] | None = None
    model: Callable[[Target], str | None] | None = None
    default_host: str | None = None
    model_option: str | None = None


_KINDS: dict[str, TargetKindInfo] = {}


def register_target_kind(info: TargetKindInfo) -> None:
    """Make ``info.name`` a target kind (replacing an earlier registration of that name)."""
    _KINDS[info.name] = info


def unregister_target_kind(name: str) -> None:
    """Forget the target kind ``name`` (nothing happens if it is not registered)."""
    _KINDS.pop(name, None)


def target_kinds() -> dict[str, TargetKindInfo]:
    """The registered target kinds by name, in registration order."""
    return dict(_KINDS)


def default_target() -> Target:
    """The target of a build that names none and runs in no ``with Target(...)`` block: this
    machine's CPU, as the first registered kind whose code runs on the CPU (``llvm``)."""
    kind = next((k for k, info in _KINDS.items() if info.device_type == "cpu"), None)
    if kind is None:
        raise TargetError("no target kind for the CPU is registered")
    return Target(kind)


@functools.lru_cache(maxsize=1)
def host_cpu_name() -> str:
    """The LLVM name of this machine's CPU (e.g. ``znver4``)."""
    import llvmlite.binding as llvm  # where needed only: loading a built library needs no LLVM

    return llvm.get_host_cpu_name()


class TargetKind(str):
    """A target's kind: a string (``"llvm"``, ``"cuda"``) that also has TVM's ``.name``."""

    __slots__ = ()

    @property
    def name(self) -> str:
        """The kind's name, as TVM's ``target.kind.name``."""
        return str(self)


class Target:
    """A parsed target string; compare targets with ``==`` (on their canonical text).

    ``Target(target="cuda", host="llvm")`` is TVM's keyword form: ``host`` is the target the
    host side of a module is compiled for (a Target or None). It defaults to ``llvm`` for a
    ``cuda`` target, as in TVM, and to None otherwise; it takes no part in ``str`` or ``==``.
    """

    def __init__(self, spec: str | Target | None = None, host: str | Target | None = None, *,
                 target: str | Target | None = None):
        if target is not None:
            if spec is not None:
                raise TargetError("give the target once: Target('llvm') or Target(target='llvm')")
            spec = target
        if spec is None:
            raise TargetError("a target is a string such as 'llvm' or 'cuda', got None")
        if host is None and isinstance(spec, Target):
            host = spec.host
        if isinstance(spec, Target):
            spec = str(spec)
        if not isinstance(spec, str):
            raise TargetError(f"a target is a string such as 'llvm' or 'cuda', got {spec!r}")
        tokens = spec.split()
        if not tokens:
            raise TargetError("empty target string; use e.g. 'llvm' or 'cuda'")
        self.kind: TargetKind = TargetKind(tokens[0])
        info = _KINDS.get(self.kind)
        if info is None:
            raise TargetError(f"unknown target kind {self.kind!r} in {spec!r}; known: {', '.join(_KINDS)}")
        self.options: dict = _parse_options(info, tokens[1:], spec)
        if info.check_options is not None:
            info.check_options(self.options, spec)
        host = info.default_host if host is None else host
        self.host: Target | None = None if host is None else Target(host)
        if self.host is not None and self.host.device_type != "cpu":
            raise TargetError(f"a host target must be an llvm target (one whose code runs on the CPU), "
                              f"got {str(self.host)!r}")

    @property
    def kind_info(self) -> TargetKindInfo:
        """What the registered kind of this target is (its options, its device type, ...)."""
        return _KINDS[self.kind]

    @property
    def device_type(self) -> str:
        """Where code built for this target runs: ``"cpu"``, ``"cuda"``, ..."""
        return self.kind_info.device_type

    # ------------------------------------------------------------------ attributes

    @property
    def mcpu(self) -> str | None:
        """The CPU to compile for: the host CPU when not given (``None`` for a kind without ``-mcpu``,
        such as CUDA)."""
        if "mcpu" not in self.kind_info.options:
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
    def keys(self) -> tuple[str, ...]:
        """TVM's target keys, most specific first: ``("cpu",)`` for a target whose code runs on
        the CPU (``llvm``), ``("cuda", "gpu")`` for ``cuda``, else the device type. Dispatch
        contexts written as in AutoTVM look configs up under each of them."""
        device = self.device_type
        if device == "cpu":
            return ("cpu",)
        if device == "cuda":
            return ("cuda", "gpu")
        return (device,)

    @property
    def libs(self) -> list[str]:
        """External libraries the target may call (TVM's ``-libs``): always empty here, where no
        kind takes ``-libs`` (``compiler.contrib`` functions are called directly)."""
        return list(self.options.get("libs", []))

    @property
    def attrs(self) -> dict:
        """The target's attributes, as TVM's ``target.attrs``: ``keys``, then each option given
        (``mcpu``, ``mattr``, ``arch``, ``fast-math``...) with its value."""
        return {"keys": list(self.keys), **{k: (list(v) if isinstance(v, list) else v)
                                            for k, v in self.options.items()}}

    @property
    def model(self) -> str:
        """The hardware model this target names, used to key tuning logs: the CPU, or the CUDA
        architecture (that of the attached GPU when ``-arch`` is not given, as in a build);
        the registered kind says which."""
        model = self.kind_info.model
        return (model(self) if model is not None else None) or "unknown"

    def pinned(self) -> Target:
        """This target naming the hardware it stands for, where it leaves it to the machine
        (``llvm`` -> ``llvm -mcpu=znver4`` on a Zen 4 host; ``cuda`` -> ``cuda -arch=sm_90`` with
        an H100 attached): a target that compiles for the same hardware on any machine, as a
        build sent to another one must. Itself where it names the hardware already, or where
        this machine does not know it (``cuda`` without a GPU)."""
        option = self.kind_info.model_option
        if option is None or option in self.options or self.model == "unknown":
            return self
        return Target(f"{self} -{option}={self.model}", host=self.host)

    # ------------------------------------------------------------------ text, equality

    def __str__(self) -> str:
        parts = [self.kind]
        for key in self.kind_info.options:  # in the order the kind declares them
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
    def current(allow_none: bool = True) -> Target | None:
        """The innermost target of the enclosing ``with Target(...):`` blocks, or None (with
        ``allow_none=False``, TargetError when there is none, as TVM)."""
        stack = _targets()
        if not stack and not allow_none:
            raise TargetError("no target is current: use `with Target(...):`")
        return stack[-1] if stack else None

    @staticmethod
    def from_any(value) -> Target | None:
        """A Target from a Target or a string; None gives :meth:`current` (which may be None;
        :func:`default_target` is the target of builds that name none)."""
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


def _parse_options(info: TargetKindInfo, tokens: list[str], spec: str) -> dict:
    known, kind = info.options, info.name
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


# ---------------------------------------------------------------------- checking against LLVM
#
# LLVM only warns about a CPU or feature it does not know ("'zen4' is not a recognized
# processor for this target"), then compiles for a generic CPU, which on x86-64 aborts
# the process ("64-bit code requested on a subtarget that doesn't support it"); some CPUs
# it knows (i686) and features (-sse2) abort it too. So the target is tried in a child
# interpreter: it creates the target machine, lists the CPUs and features LLVM knows
# (LLVM prints them for the CPU "help") and compiles a small function.

_PROBE = r'''
import sys
import llvmlite.binding as llvm
triple, cpu, features = sys.argv[1:4]
llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
triple = triple or llvm.get_process_triple()
try:
    target = llvm.Target.from_triple(triple)
except RuntimeError as e:
    print("unknown-triple", e, flush=True)
    sys.exit(0)
print("triple", triple, flush=True)
def mark(name):
    sys.stderr.write(f"@@{name}\n")
    sys.stderr.flush()
mark("warnings")
tm = target.create_target_machine(cpu=cpu, features=features, opt=2)
mark("help")
target.create_target_machine(cpu="help", features="")
mark("compile")
module = llvm.parse_assembly("""
define double @f(double %x, i64 %n) {
  %y = fmul double %x, %x
  %m = sitofp i64 %n to double
  %z = fadd double %y, %m
  ret double %z
}
define <8 x float> @g(<8 x float> %a, <8 x float> %b) {
  %c = fadd <8 x float> %a, %b
  ret <8 x float> %c
}
""")
module.triple = tm.triple
tm.emit_object(module)
print("compiled", flush=True)
'''

_HELP_ENTRY = re.compile(r"^\s+(\S+)\s+- ", re.M)


@dataclass(frozen=True)
class _Probe:
    """What LLVM said about one (triple, cpu, features)."""

    triple: str
    error: str  # empty when the target compiles, else what went wrong
    bad_cpu: bool
    bad_features: tuple
    cpus: tuple
    features: tuple


def _section(text: str, start: str, end: str) -> str:
    return text.partition(start)[2].partition(end)[0]


@functools.cache
def _probe(triple: str, cpu: str, features: str) -> _Probe | None:
    """Try the target in a child interpreter (LLVM may abort); None if the child could not run."""
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE, triple, cpu, features],
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        logger.warning("could not check cpu=%r features=%r against LLVM: %s", cpu, features, e)
        return None
    out, err = proc.stdout, proc.stderr
    if out.startswith("unknown-triple"):
        said = out.split(maxsplit=1)[1].strip()
        return _Probe(triple, f"LLVM does not know the triple {triple!r} ({said})", False, (), (), ())
    if not out.startswith("triple") or "@@warnings" not in err:
        logger.warning("could not check cpu=%r features=%r against LLVM: %s", cpu, features,
                       err.strip()[-500:])
        return None
    warnings = _section(err, "@@warnings\n", "@@help\n")
    listing = _section(err, "@@help\n", "@@compile\n")
    error = ""
    if proc.returncode != 0 or "compiled" not in out:
        tail = err.partition("@@compile\n")[2].strip() or err.strip()
        error = tail.splitlines()[-1] if tail else f"the compiling process exited with {proc.returncode}"
    return _Probe(
        triple=out.split()[1],
        error=error,
        bad_cpu="is not a recognized processor" in warnings,
        bad_features=tuple(re.findall(r"'([^']*)' is not a recognized feature", warnings)),
        cpus=tuple(_HELP_ENTRY.findall(_section(listing, "Available CPUs", "Available features"))),
        features=tuple(_HELP_ENTRY.findall(_section(listing, "Available features", "Use +feature"))),
    )


def _known(triple: str | None) -> _Probe:
    probe = _probe(triple or "", "", "")
    if probe is None or probe.error:
        reason = probe.error if probe else "the check could not run (see the log)"
        raise TargetError(f"cannot list what LLVM knows for triple {triple or 'of this machine'}: {reason}")
    return probe


def llvm_cpus(triple: str | None = None) -> list[str]:
    """The CPU names LLVM accepts in ``-mcpu`` for ``triple`` (default: this machine's)."""
    return list(_known(triple).cpus)


def llvm_features(triple: str | None = None) -> list[str]:
    """The feature names LLVM accepts in ``-mattr`` (write each with ``+`` or ``-`` in front)."""
    return list(_known(triple).features)


def _suggest(name: str, choices: tuple, what: str, listing: str) -> str:
    close = difflib.get_close_matches(name, choices, n=5, cutoff=0.5)
    hint = f"close matches: {', '.join(close)}" if close else \
        f"no close match among the {len(choices)} {what}"
    return f"{hint}; the full list: {listing}"


def check_llvm_options(options: dict, spec: str) -> None:
    """Raise TargetError if LLVM does not know the CPU (``mcpu``) or a feature (``mattr``) of
    ``options``, or cannot compile for them (the check of LLVM-compiled target kinds)."""
    cpu, feats, triple = options.get("mcpu"), options.get("mattr", []), options.get("mtriple")
    if cpu is None and not feats and triple is None:
        return  # this machine as it is: nothing for LLVM to refuse
    if cpu == "help" or any(f[1:] in ("help", "cpuhelp") for f in feats):
        raise TargetError(f"target {spec!r}: the CPUs and features LLVM knows are listed by "
                          "compiler.target.llvm_cpus() and compiler.target.llvm_features()")
    if cpu == host_cpu_name() and not feats and triple is None:
        return
    probe = _probe(triple or "", cpu or "", ",".join(feats))
    if probe is None:
        return  # the check could not run; building reports what LLVM says
    where = f"in target {spec!r} (triple {probe.triple})"
    arg = f"{triple!r}" if triple else ""
    if probe.bad_cpu:
        raise TargetError(f"unknown CPU {cpu!r} {where}; "
                          + _suggest(cpu, probe.cpus, "CPUs", f"compiler.target.llvm_cpus({arg})"))
    if probe.bad_features:
        bad = probe.bad_features[0]
        listing = f"compiler.target.llvm_features({arg})"
        raise TargetError(f"unknown feature {bad!r} {where}; "
                          + _suggest(bad[1:], probe.features, "features", listing))
    if probe.error:
        raise TargetError(f"LLVM cannot compile for target {spec!r}: {probe.error}")
