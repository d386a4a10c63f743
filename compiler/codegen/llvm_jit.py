"""From LLVM IR text to running machine code: target machines, O3, MCJIT, object files.

:class:`LLVMBackend` is the backend a :class:`compiler.runtime.Module` uses for
code compiled in this process (see :mod:`compiler.runtime.module`).
"""

from __future__ import annotations

import functools
import logging
import os

import llvmlite.binding as llvm

from ..errors import CodegenError
from ..runtime.threads import load_libgomp
from ..runtime.timer import TIMER_SYMBOL
from ..target import Target, host_cpu_name
from ..tir.expr import StringImm
from ..tir.functor import IRVisitor
from ..tir.stmt import AttrStmt

__all__ = ["LLVMBackend", "create_target_machine", "optimize", "parse", "IMPORT_LLVM", "imported_llvm",
           "defined_functions", "link_imports"]

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def _initialize() -> None:
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
# AVX512-FP16). The JIT resolves calls only to symbols of the process, which has none of
# them, and an unresolved call jumps to address 0. So they are compiled here, for this
# machine, whose F16C instructions they use.
_HALF_BUILTINS = ("__extendhfsf2", "__truncsfhf2", "__truncdfhf2")


@functools.lru_cache(maxsize=1)
def _half_builtins():
    from llvmlite import ir

    from .llvm import double_to_half

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
    # llvm.parse_assembly, not parse(): this runs inside _initialize
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)), tm)
    engine.finalize_object()
    return engine


def _register_half_builtins() -> None:
    if not llvm.get_host_cpu_features().get("f16c", False):
        logger.debug("this CPU has no F16C: float16 code for CPUs without it cannot run in the JIT")
        return
    engine = _half_builtins()
    for name in _HALF_BUILTINS:
        llvm.add_symbol(name, engine.get_function_address(name))


def _features(target: Target) -> str:
    extra = target.mattr
    if target.options.get("mcpu") in (None, host_cpu_name()) and not target.mtriple:
        # Compiling for this machine: everything it has, plus what the target adds.
        return ",".join([*llvm.get_host_cpu_features().flatten().split(","), *extra]).strip(",")
    return ",".join(extra)


def create_target_machine(target: Target, reloc: str = "default", codemodel: str = "jitdefault"):
    """An LLVM target machine for ``target`` at optimisation level 3."""
    _initialize()
    triple = target.mtriple or llvm.get_process_triple()
    try:
        llvm_target = llvm.Target.from_triple(triple)
    except RuntimeError as e:
        raise CodegenError(f"LLVM does not support triple {triple!r}: {e}") from None
    return llvm_target.create_target_machine(cpu=target.mcpu, features=_features(target), opt=3,
                                             reloc=reloc, codemodel=codemodel)


def parse(ir_text: str):
    """Parse and verify LLVM IR text, raising CodegenError (with the IR) when it is invalid."""
    _initialize()
    try:
        module = llvm.parse_assembly(ir_text)
        module.verify()
    except RuntimeError as e:
        raise CodegenError(f"invalid LLVM IR generated: {e}\n{ir_text}") from None
    return module


def optimize(module, tm) -> None:
    """Run LLVM's O3 pipeline (with loop and SLP vectorisation) on ``module`` in place."""
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)


class LLVMBackend:
    """Machine code JIT-compiled in this process, plus what is needed to show and export it."""

    type_key = "llvm"

    def __init__(self, ir_text: str, target: Target, tm=None):
        self.target = target
        self._tm = tm or create_target_machine(target)
        module = parse(ir_text)
        module.triple = self._tm.triple
        module.data_layout = str(self._tm.target_data)
        optimize(module, self._tm)
        self._optimized = str(module)
        # The engine owns the module from here on; keep both alive with this object.
        self._engine = llvm.create_mcjit_compiler(module, self._tm)
        self._engine.finalize_object()

    def address(self, name: str) -> int:
        if name == TIMER_SYMBOL:  # one copy per process, shared by every module
            from . import llvm_timer

            return llvm_timer.address()
        return self._engine.get_function_address(name) or 0

    def source(self, fmt: str) -> str:
        if fmt in ("ll", "llvm"):
            return self._optimized
        if fmt in ("asm", "s"):
            # A fresh module: code generation may change the one the JIT already compiled.
            return self._tm.emit_assembly(parse(self._optimized))
        raise ValueError(f"unknown source format {fmt!r}; use 'll' or 'asm'")

    def emit_object(self) -> bytes:
        """Position-independent object code, for linking into a shared library."""
        tm = create_target_machine(self.target, reloc="pic", codemodel="default")
        return tm.emit_object(parse(self._optimized))

    def export(self, path: str, metadata_json: str) -> None:
        from ..runtime.library import link_shared
        from . import llvm_timer

        link_shared(path, [self.emit_object(), llvm_timer.object_code(self.target)], metadata_json)


# ---------------------------------------------------------------------------- import_llvm

#: The attribute of ``Stage.pragma(axis, "import_llvm", code)``: LLVM IR text (or the path of a
#: ``.ll``/``.bc`` file) linked into the module built for the CPU, as TVM's ``import_llvm``.
IMPORT_LLVM = "pragma_import_llvm"


class _Imports(IRVisitor):
    def __init__(self):
        self.found: list[str] = []

    def visit_AttrStmt(self, s: AttrStmt):  # noqa: N802
        if s.key == IMPORT_LLVM:
            if not isinstance(s.value, StringImm):
                raise CodegenError(f"pragma import_llvm needs LLVM IR text, got {s.value!r}")
            self.found.append(s.value.value)
        self.generic_visit(s)


def imported_llvm(stmt) -> list[str]:
    """The code of every ``import_llvm`` pragma in ``stmt``, outermost first."""
    v = _Imports()
    v.visit(stmt)
    return v.found


def _load_import(code: str):
    """The module of an ``import_llvm`` pragma: IR text, or a ``.ll``/``.bc`` file."""
    _initialize()
    try:
        if code.endswith(".bc") and os.path.isfile(code):
            with open(code, "rb") as f:
                return llvm.parse_bitcode(f.read())
        if code.endswith(".ll") and os.path.isfile(code):
            with open(code, encoding="utf-8") as f:
                code = f.read()
        module = llvm.parse_assembly(code)
        module.verify()
        return module
    except (RuntimeError, OSError) as e:
        raise CodegenError(f"pragma import_llvm: cannot read the LLVM code: {e}") from None


def defined_functions(imports: list[str]) -> frozenset[str]:
    """The names of the functions the imported modules define."""
    return frozenset(fn.name for code in imports for fn in _load_import(code).functions
                     if not fn.is_declaration)


def link_imports(ir_text: str, imports: list[str]) -> str:
    """``ir_text`` with the modules of ``imports`` linked in (LLVM IR text).

    A function defined by several imports takes the definition of the last one, as TVM's
    ``import_llvm`` (which links with ``OverrideFromSrc``); one that the generated code
    defines itself cannot be imported.
    """
    if not imports:
        return ir_text
    main = parse(ir_text)
    generated = {fn.name for fn in main.functions if not fn.is_declaration}
    imported: set[str] = set()
    for code in imports:
        lib = _load_import(code)
        lib.triple, lib.data_layout = main.triple, main.data_layout
        for fn in lib.functions:
            if fn.is_declaration:
                continue
            if fn.name in generated:
                raise CodegenError(f"pragma import_llvm: the imported code defines {fn.name!r}, which the "
                                   "generated code defines too; rename one of them")
            if fn.name in imported:  # weak, so that this later definition replaces it
                main.get_function(fn.name).linkage = "weak_any"
            imported.add(fn.name)
        try:
            main.link_in(lib)
        except RuntimeError as e:
            raise CodegenError(f"pragma import_llvm: cannot link the imported code: {e}") from None
    return str(main)
