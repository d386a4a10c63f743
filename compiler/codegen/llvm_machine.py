"""LLVM itself: its native target set up once, target machines, parsing and the O3 pipeline.

Every LLVM-based module of the code generators reaches LLVM's binding through here.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import re

import llvmlite
import llvmlite.binding as llvm
from llvmlite import ir

from ..errors import CodegenError
from ..runtime.cpu import VECTOR_EXTENSIONS
from ..runtime.threads import load_libgomp
from ..target import Target, host_cpu_name
from .llvm_types import double_to_half
from .object_cache import cache_key

__all__ = ["HALF_BUILTIN_ADDRESSES", "create_target_machine", "object_machine", "object_key", "optimize",
           "optimized_module", "parse", "initialize", "vector_features", "is_x86", "process_has_symbol"]

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def initialize() -> None:
    """Set up LLVM's native target once, and make libgomp's symbols visible to the JIT."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()
    gomp = load_libgomp()  # first, so that libgomp starts with the runtime's wait policy
    try:
        llvm.load_library_permanently(gomp)
    except RuntimeError as e:
        raise CodegenError(f"cannot load libgomp ({gomp}), needed for parallel loops: {e}") from None
    _register_half_builtins()


# LLVM converts float16 with calls to these on CPUs without F16C (and from double without
# AVX512-FP16). The JIT links calls against the symbols of the process, which has none of
# them. So they are compiled here, for this machine, whose F16C instructions they use, and
# the JIT links code against their addresses.
_HALF_BUILTINS = ("__extendhfsf2", "__truncsfhf2", "__truncdfhf2")
HALF_BUILTIN_ADDRESSES: dict[str, int] = {}  # their addresses, for the JIT to link code against


@functools.lru_cache(maxsize=1)
def _process_scope() -> ctypes.CDLL:
    """The program and the libraries in its global scope, opened once (each lookup is cached on it)."""
    return ctypes.CDLL(None)


def process_has_symbol(name: str) -> bool:
    """Whether this process defines ``name`` where the JIT links code against it: in the program,
    a library loaded into its global scope, or one LLVM loaded (libgomp)."""
    return hasattr(_process_scope(), name) or bool(llvm.address_of_symbol(name))


@functools.lru_cache(maxsize=1)
def _half_builtins():
    module = ir.Module("half_builtins")
    module.triple = llvm.get_process_triple()
    half, f32, f64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
    for name, (ret, arg), convert in [
        ("__extendhfsf2", (f32, half), lambda b, x: b.fpext(x, f32)),
        ("__truncsfhf2", (half, f32), lambda b, x: b.fptrunc(x, half)),
        ("__truncdfhf2", (half, f64), lambda b, x: double_to_half(b, x, half)),
    ]:
        fn = ir.Function(module, ir.FunctionType(ret, [arg]), name)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        b.ret(convert(b, fn.args[0]))
    tm = llvm.Target.from_triple(module.triple).create_target_machine(
        cpu=host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=2)
    # llvm.parse_assembly, not parse(): this runs inside initialize
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)), tm)
    engine.finalize_object()
    return engine


def _register_half_builtins() -> None:
    if not llvm.get_host_cpu_features().get("f16c", False):
        logger.debug("this CPU has no F16C: float16 code for CPUs without it cannot run in the JIT")
        return
    engine = _half_builtins()
    for name in _HALF_BUILTINS:
        HALF_BUILTIN_ADDRESSES[name] = engine.get_function_address(name)


# LLVM's loop vectorizer, costing AVX-512's gathers and scatters as cheap, vectorizes loops
# the schedule left scalar across their outer loop, one gather per unrolled inner iteration:
# axpy split by 16 ran 4x slower than split by 4 or 64 on Zen 4. Gathers are slow on AMD's
# cores and on Intel's under the GDS microcode (LLVM already prefers none there), and
# scatters are slow everywhere, so on x86 LLVM emits neither: the vectorizer keeps such loops
# scalar or uses plain vector accesses, and a schedule's own non-contiguous vector accesses
# become lane-by-lane loads and stores, as fast as the hardware's here. A target's -mattr
# comes after and may turn them back on (``-mattr=-prefer-no-gather``).
_X86_TUNING = ("+prefer-no-gather", "+prefer-no-scatter")


def is_x86(triple: str) -> bool:
    """Whether the LLVM target triple ``triple`` names an x86 CPU."""
    return triple.split("-")[0] in ("x86_64", "i386", "i686")


def _features(target: Target | None, triple: str) -> str:
    extra = target.mattr if target is not None else []
    tuning = list(_X86_TUNING) if is_x86(triple) else []
    if target is None or (target.options.get("mcpu") in (None, host_cpu_name()) and not target.mtriple):
        # Compiling for this machine: everything it has, plus what the target adds.
        return ",".join([*llvm.get_host_cpu_features().flatten().split(","), *tuning, *extra]).strip(",")
    return ",".join([*tuning, *extra])


def vector_features(target: Target | None) -> list[str]:
    """The x86 vector extensions (LLVM's names: ``avx2``, ``avx512f``...) that code compiled for
    ``target`` may use: those of the CPU it compiles for (this machine's, or the one ``-mcpu``
    names) with what ``-mattr`` adds or takes away, as LLVM itself sees them (see
    :func:`_usable_extensions`). Empty on other architectures. An exported library records them,
    and :func:`compiler.runtime.load_module` checks them against the CPU that loads it."""
    triple, cpu, features = _machine_of(target)
    return list(_usable_extensions(triple, cpu, features)) if is_x86(triple) else []


@functools.cache
def _usable_extensions(triple: str, cpu: str, features: str) -> tuple[str, ...]:
    """The checked extensions (:data:`~compiler.runtime.cpu.VECTOR_EXTENSIONS`) code compiled for
    ``cpu`` with ``features`` may use.

    LLVM's binding lists no named CPU's extensions, but its inliner knows them: it inlines a
    function into another only where the callee's features are a subset of the caller's. So
    one probe per extension, compiled for ``cpu`` with ``features`` and that extension, is
    called from a function compiled for ``cpu`` with ``features`` alone; after LLVM's O3 the
    probes still called are those whose extension the CPU lacks."""
    extensions = sorted(VECTOR_EXTENSIONS)
    with_one = [",".join(filter(None, (features, f"+{name}"))) for name in extensions]
    lines = [f'target triple = "{triple}"', "@probed = global i32 0"]
    for i, probe_features in enumerate(with_one):
        lines += [f"define void @probe{i}() #{i + 1} {{", f"  store volatile i32 {i}, ptr @probed",
                  "  ret void", "}",
                  f'attributes #{i + 1} = {{ "target-cpu"="{cpu}" "target-features"="{probe_features}" }}']
    lines += ["define void @caller() #0 {", *(f"  call void @probe{i}()" for i in range(len(extensions))),
              "  ret void", "}", f'attributes #0 = {{ "target-cpu"="{cpu}" "target-features"="{features}" }}']
    module = parse("\n".join(lines))
    optimize(module, _target_machine(triple, cpu, features))
    caller = str(module.get_function("caller"))
    still_called = {int(i) for i in re.findall(r"call void @probe(\d+)\(\)", caller)}
    return tuple(name for i, name in enumerate(extensions) if i not in still_called)


def _machine_of(target: Target | None) -> tuple[str, str, str]:
    """The LLVM triple, CPU and features code for ``target`` (None: this machine) is compiled for."""
    triple = (target.mtriple if target is not None else None) or llvm.get_process_triple()
    cpu = (target.mcpu if target is not None else None) or host_cpu_name()
    return triple, cpu, _features(target, triple)


def create_target_machine(target: Target | None, reloc: str = "default", codemodel: str = "jitdefault"):
    """An LLVM target machine for ``target`` (None: this machine) at optimisation level 3."""
    return _target_machine(*_machine_of(target), reloc=reloc, codemodel=codemodel)


def object_machine(target: Target | None):
    """The target machine of object files for ``target``: position-independent code, which
    the JIT links into this process and the system linker into a shared library alike."""
    return create_target_machine(target, reloc="pic", codemodel="default")


def object_key(target: Target | None, ir_texts: tuple[str, ...]) -> str:
    """The compile cache's key (:mod:`.object_cache`) of the object file that
    :func:`object_machine` emits for ``ir_texts`` after :func:`optimized_module`: everything
    that decides its bytes."""
    triple, cpu, features = _machine_of(target)
    llvm_version = ".".join(map(str, llvm.llvm_version_info))
    return cache_key(["llvm object", str(_PIPELINE_VERSION), llvmlite.__version__, llvm_version,
                      repr(sorted(_O3.items())), triple, cpu, features, *ir_texts])


def _target_machine(triple: str, cpu: str, features: str, reloc: str = "default",
                    codemodel: str = "jitdefault"):
    initialize()
    try:
        llvm_target = llvm.Target.from_triple(triple)
    except RuntimeError as e:
        raise CodegenError(f"LLVM does not support triple {triple!r}: {e}") from None
    return llvm_target.create_target_machine(cpu=cpu, features=features, opt=3, reloc=reloc,
                                             codemodel=codemodel)


def parse(ir_text: str):
    """Parse and verify LLVM IR text, raising CodegenError (with the IR) when it is invalid."""
    initialize()
    try:
        module = llvm.parse_assembly(ir_text)
        module.verify()
    except RuntimeError as e:
        raise CodegenError(f"invalid LLVM IR generated: {e}\n{ir_text}") from None
    return module


# LLVM's O3 pipeline, with loop and SLP vectorisation and loop unrolling.
_O3 = {"speed_level": 3, "loop_vectorization": True, "slp_vectorization": True, "loop_unrolling": True}
# Part of the compile cache's key: raise it when optimized_module's steps change otherwise than by _O3.
_PIPELINE_VERSION = 1


def optimize(module, tm, slp: bool = True) -> None:
    """Run LLVM's O3 pipeline (with loop and, unless ``slp`` is false, SLP vectorisation) on
    ``module`` in place."""
    pto = llvm.create_pipeline_tuning_options(speed_level=_O3["speed_level"])
    pto.loop_vectorization = _O3["loop_vectorization"]
    pto.slp_vectorization = slp and _O3["slp_vectorization"]
    pto.loop_unrolling = _O3["loop_unrolling"]
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)


def optimized_module(ir_text: str, tm, linked: tuple[str, ...] = ()):
    """The LLVM module of ``ir_text`` for the target machine ``tm``, with the modules of the
    ``linked`` texts linked in (their functions may call each other's), after LLVM's O3.

    The result is verified: LLVM 22's SLP vectorizer can leave a function whose instructions
    do not dominate their uses (seen on fully unrolled float index arithmetic), which the code
    generator would then abort the whole process on. Such a module is optimised again without
    the SLP vectorizer."""
    module = _linked(ir_text, tm, linked)
    optimize(module, tm)
    try:
        module.verify()
    except RuntimeError:
        module = _linked(ir_text, tm, linked)
        optimize(module, tm, slp=False)
        module.verify()
    return module


def _linked(ir_text: str, tm, linked: tuple[str, ...]):
    module = parse(ir_text)
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    for text in linked:
        other = parse(text)
        other.triple, other.data_layout = module.triple, module.data_layout
        module.link_in(other)
    return module
