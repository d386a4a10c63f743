"""PTX for NVIDIA GPUs through LLVM's NVPTX backend (llvmlite), no nvcc involved.

:class:`CodeGenNVPTX` reuses the CPU code generator's expressions and statements
(:class:`~compiler.codegen.llvm.CodeGenLLVM`) and changes what differs on a GPU:

* every device PrimFunc (see :mod:`compiler.transform.split_host_device`) is a
  ``ptx_kernel`` function taking its buffers as pointers (``noalias``; ``readonly``
  for the ones it only reads, whose loads are ``!invariant.load``: ``ld.global.nc``) and its
  scalars by value; ``nvvm.maxntid`` states the block size so that ptxas budgets
  registers for it;
* ``thread_extent`` attributes read ``%tid``/``%ctaid`` through the
  ``llvm.nvvm.read.ptx.sreg.*`` intrinsics; barriers are ``llvm.nvvm.barrier0``;
* a ``shared`` allocation is a module global in address space 3 (static shared
  memory), reached through a generic pointer that LLVM's address-space inference turns
  back into ``ld.shared``/``st.shared``; a ``local`` allocation is an ``alloca`` (registers
  once promoted);
* float math: ``exp``/``log``/``tanh``/``sigmoid`` are the same polynomials as on the CPU
  (:mod:`.vector_math`), unless the target says ``-fast-math``, where ``exp``/``exp2``/
  ``log``/``log2`` of float32 use the hardware's ``ex2.approx``/``lg2.approx``;
  ``sqrt``, ``fabs``, ``floor``, ``ceil``, ``round``, ``trunc`` are LLVM intrinsics the
  backend lowers to single instructions. Math without a GPU lowering (``erf``,
  ``sin``, ...) is a :class:`~compiler.errors.CodegenError`, never a crash of LLVM;
* ``call_extern``/``call_pure_extern`` name CUDA math functions: the fast-math forms
  (``__expf``...) are approximate PTX instructions, the others come from libdevice,
  linked into the module when a kernel calls one (:mod:`.libdevice`).
"""

from __future__ import annotations

import functools
import logging
import math

import llvmlite.binding as llvm
from llvmlite import ir

from .. import dtypes
from ..errors import CodegenError
from ..runtime.cuda import attached_arch
from ..target import Target
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import collect, stored_buffers
from ..tir.builtin import SYNC_OP
from ..tir.function import PrimFunc
from ..tir.op import EXTERN_OPS, Op
from .intrinsics import emit_call_extern, extern_name, per_lane
from .libdevice import FAST_MATH, libdevice_name, link_libdevice
from .llvm import CodeGenLLVM
from .llvm_parallel import pointer_attrs
from .llvm_types import I32, VOID, memory_type, scalar_type, splat_constant, split_dtype
from .llvm_vector import ALIGNED_BYTES

__all__ = ["CodeGenNVPTX", "generate_ptx", "nvptx_target_machine", "DEFAULT_ARCH", "TRIPLE"]

logger = logging.getLogger(__name__)

TRIPLE = "nvptx64-nvidia-cuda"
DEFAULT_ARCH = "sm_80"
_SREG = {"threadIdx": "tid", "blockIdx": "ctaid"}
_GPU_FLOAT_OPS = frozenset({"exp", "log", "tanh", "sigmoid", "sqrt", "rsqrt", "fabs", "floor", "ceil",
                            "round", "trunc", "exp2", "log2", "nearbyint", "fmod"})
_MAX_LOCAL_BYTES = 16 * 1024
_LOG2E, _LN2, _LOG2_10, _LOG10_2 = 1 / math.log(2), math.log(2), math.log2(10), math.log10(2)


def _ptx_version(arch: str) -> int:
    """The PTX ISA version to emit for ``sm_XX`` (what ptxas of CUDA 12 and later accept)."""
    sm = int("".join(ch for ch in arch if ch.isdigit()) or 80)
    if sm >= 100:
        return 86
    if sm >= 90:
        return 80
    return 70 if sm < 80 else 71


@functools.lru_cache(maxsize=8)
def nvptx_target_machine(arch: str):
    """An LLVM target machine for ``nvptx64`` and ``arch`` (``sm_80``)."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=arch, features=f"+ptx{_ptx_version(arch)}", opt=3)


def resolve_arch(target: Target) -> str:
    """The ``sm_XX`` to compile for: the target's ``-arch``, else the attached GPU's, else sm_80."""
    if target.arch:
        return target.arch
    arch = attached_arch()
    if arch is None:
        logger.info("no GPU found to take the architecture from; compiling for %s (give -arch=sm_XX)",
                    DEFAULT_ARCH)
        return DEFAULT_ARCH
    return arch


class CodeGenNVPTX(CodeGenLLVM):
    """LLVM IR for the NVPTX backend from device PrimFuncs (one module, several kernels)."""

    def __init__(self, data_layout: str = "", fast_math: bool = False):
        super().__init__(TRIPLE, data_layout, fast_math)
        self._shared_count = 0
        self._readonly: set = set()  # data Vars of the buffers a kernel only reads

    def _define_thread_count(self):
        return None  # no OpenMP on the device

    # ------------------------------------------------------------------ kernels

    def add_function(self, func: PrimFunc) -> None:
        self._func_name = func.name
        buffers = func.buffer_params()
        scalars = [p for p in func.params if isinstance(p, E.Var)]
        self._check_free_vars(func, buffers, scalars)
        written = stored_buffers(func.body)
        arg_types = [memory_type(b.dtype).as_pointer() for b in buffers]
        arg_types += [scalar_type(v.dtype) for v in scalars]
        fn = ir.Function(self.module, ir.FunctionType(VOID, arg_types), func.name)
        fn.calling_convention = "ptx_kernel"
        for buf, arg in zip(buffers, fn.args[:len(buffers)], strict=True):
            arg.name = buf.name
            pointer_attrs(arg, ALIGNED_BYTES)
            if buf.data not in written:
                self._readonly.add(buf.data)
            self._note_aligned(buf.data, ALIGNED_BYTES)
        for var, arg in zip(scalars, fn.args[len(buffers):], strict=True):
            arg.name = var.name
        block = func.attrs.get("block")
        if block:
            self._max_threads(fn, block)
        bindings = [b.data for b in buffers] + scalars
        with self._function(fn, dict(zip(bindings, fn.args, strict=True))):
            self.emit(func.body)

    def _check_free_vars(self, func: PrimFunc, buffers: list, scalars: list) -> None:
        threads = [a.node for a in collect(func.body, lambda n: isinstance(n, S.AttrStmt)
                                           and n.key == "thread_extent")]
        super()._check_free_vars(func, buffers, [*scalars, *threads])

    def _max_threads(self, fn: ir.Function, block: list) -> None:
        md = self.module.add_named_metadata("nvvm.annotations")
        for axis, n in zip("xyz", block, strict=True):
            md.add(self.module.add_metadata([fn, ir.MetaDataString(self.module, f"maxntid{axis}"),
                                             ir.Constant(I32, int(n))]))

    # ------------------------------------------------------------------ statements

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.key != "thread_extent":
            self.emit(s.body)
            return
        var = getattr(s.node, "var", s.node)
        kind, _, axis = var.name.partition(".")
        if kind not in _SREG or axis not in ("x", "y", "z"):
            raise CodegenError(f"in {self._func_name!r}: unknown thread axis {var.name!r}")
        reader = self._declare(f"llvm.nvvm.read.ptx.sreg.{_SREG[kind]}.{axis}", I32, [])
        value = self._scope.allocas.call(reader, [])  # once, at the kernel's entry
        value = self._cast(value, "int32", var.dtype) if var.dtype != "int32" else value
        with self._bind(var, value):
            self.emit(s.body)

    def visit_Allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        count = E.const_value(buf.shape[0]) if len(buf.shape) == 1 else None
        if not isinstance(count, int):
            raise CodegenError(f"in {self._func_name!r}: {buf.scope} buffer {buf.name!r} needs a constant "
                               f"size on the GPU, got {list(buf.shape)}")
        elem = memory_type(buf.dtype)
        if buf.scope == "shared":
            name = f"{self._func_name}.{buf.name}.shared{self._shared_count}"
            self._shared_count += 1
            gv = ir.GlobalVariable(self.module, ir.ArrayType(elem, count), name, addrspace=3)
            gv.linkage = "internal"
            gv.initializer = ir.Constant(gv.value_type, ir.Undefined)
            gv.align = 16
            zero = ir.Constant(I32, 0)
            first = self._scope.allocas.gep(gv, [zero, zero], inbounds=True)
            ptr = self._scope.allocas.addrspacecast(first, elem.as_pointer())
            self._note_aligned(buf.data, 16)
            with self._bind(buf.data, ptr):
                self.emit(s.body)
            return
        nbytes = count * max(1, dtypes.bits(buf.dtype) // 8)
        if nbytes > _MAX_LOCAL_BYTES:
            raise CodegenError(f"in {self._func_name!r}: {buf.scope} buffer {buf.name!r} of {nbytes} bytes "
                               f"is too large for a thread (at most {_MAX_LOCAL_BYTES})")
        super().visit_Allocate(s)

    def visit_For(self, s: S.For) -> None:
        if s.kind is S.ForKind.PARALLEL:
            raise CodegenError(f"in {self._func_name!r}: loop {s.loop_var.name!r} is marked parallel; "
                               "on a GPU "
                               "bind it to a thread axis instead")
        if s.kind is S.ForKind.THREAD_BINDING:
            raise CodegenError(f"in {self._func_name!r}: loop {s.loop_var.name!r} bound to {s.thread_tag!r} "
                               "reached the code generator; build for cuda lowers these first")
        super().visit_For(s)

    # ------------------------------------------------------------------ expressions

    def visit_BufferLoad(self, e: E.BufferLoad) -> ir.Value:
        value = super().visit_BufferLoad(e)
        if e.buffer.data in self._readonly and isinstance(value, ir.LoadInstr):
            # Nothing writes the buffer during the kernel: loads go through the read-only cache.
            value.set_metadata("invariant.load", self.module.add_metadata([]))
        return value

    def visit_Call(self, e: E.Call) -> ir.Value:
        op = e.op
        if op == SYNC_OP:
            self.b.call(self._declare("llvm.nvvm.barrier0", VOID, []), [])
            return ir.Constant(I32, 0)
        if op in EXTERN_OPS:
            name = extern_name(e)
            if name in FAST_MATH:
                return self._fast_math(name, e)
            return emit_call_extern(self, e, libdevice_name(name))
        if op in ("omp_thread_id", "omp_num_threads"):
            raise CodegenError(f"intrinsic {op!r} is not available in CUDA kernels")
        dtype = split_dtype(e.dtype)[0]
        if dtypes.is_float(dtype) and op not in ("abs", "isnan"):
            if op not in _GPU_FLOAT_OPS:
                raise CodegenError(f"float intrinsic {op!r} has no GPU lowering yet; the CUDA backend knows "
                                   f"{', '.join(sorted(_GPU_FLOAT_OPS))}")
            if self.fm and dtype == "float32" and op in ("exp", "exp2", "log", "log2") \
                    and split_dtype(e.args[0].dtype) == ("float32", 1):
                return self._approx(op, self.expr(e.args[0]))
            if op in ("exp2", "log2") and dtype != "float32":
                raise CodegenError(f"{op} of {dtype} has no GPU lowering yet (float32 only)")
            if op == "log2":  # NVPTX has no exact log2 (LLVM aborts on llvm.log2.f32): log(x) / ln 2
                value = super().visit_Call(E.Call(e.dtype, Op("log"), e.args))
                return self.b.fmul(value, splat_constant(value.type, _LOG2E), flags=self.fm)
        return super().visit_Call(e)

    def _fast_math(self, name: str, e: E.Call) -> ir.Value:
        """CUDA's fast-math intrinsic ``name`` (``__expf``) as the approximate PTX instructions
        CUDA compiles it to."""
        args = e.args[1:]
        if e.dtype != "float32" or len(args) != FAST_MATH[name]:
            raise CodegenError(f"{name} takes {FAST_MATH[name]} float32 argument(s) and returns float32; "
                               f"the call gives {len(args)} and asks for {e.dtype}")
        values = [self._cast(self.expr(a), split_dtype(a.dtype)[0], "float32") for a in args]
        return per_lane(self.b, values, ir.FloatType(), lambda xs: self._fast_scalar(name, xs))

    def _fast_scalar(self, name: str, xs: list) -> ir.Value:
        f32 = ir.FloatType()

        def nv(op: str, *a):
            return self.b.call(self._declare(f"llvm.nvvm.{op}.approx.f", f32, [f32] * len(a)), list(a))

        def scaled(v, c):
            return self.b.fmul(v, ir.Constant(f32, c))

        x = xs[0]
        if name in ("__expf", "__exp10f"):
            return nv("ex2", scaled(x, _LOG2E if name == "__expf" else _LOG2_10))
        if name in ("__logf", "__log10f"):
            return scaled(nv("lg2", x), _LN2 if name == "__logf" else _LOG10_2)
        if name == "__log2f":
            return nv("lg2", x)
        if name in ("__sinf", "__cosf"):
            return nv(name[2:5], x)
        if name == "__tanf":
            return nv("div", nv("sin", x), nv("cos", x))
        if name == "__powf":
            return nv("ex2", self.b.fmul(xs[1], nv("lg2", x)))
        return nv("div", x, xs[1])  # __fdividef

    def _approx(self, op: str, x: ir.Value) -> ir.Value:
        """Fast-math float32 ``exp``/``log`` through the special function unit."""
        f32 = ir.FloatType()
        if op in ("exp", "exp2"):
            fn = self._declare("llvm.nvvm.ex2.approx.ftz.f", f32, [f32])
            arg = self.b.fmul(x, ir.Constant(f32, 1.4426950408889634), flags=self.fm) if op == "exp" else x
            return self.b.call(fn, [arg])
        fn = self._declare("llvm.nvvm.lg2.approx.ftz.f", f32, [f32])
        y = self.b.call(fn, [x])
        return self.b.fmul(y, ir.Constant(f32, 0.6931471805599453), flags=self.fm) if op == "log" else y


def generate_ptx(funcs: list[PrimFunc], arch: str, fast_math: bool = False) -> tuple[str, str]:
    """``(llvm_ir, ptx)`` of the device functions ``funcs`` for ``arch``."""
    tm = nvptx_target_machine(arch)
    cg = CodeGenNVPTX(str(tm.target_data), fast_math)
    for f in funcs:
        cg.add_function(f)
    text = cg.finish()
    try:
        module = llvm.parse_assembly(text)
        module.verify()
    except RuntimeError as err:
        raise CodegenError(f"invalid LLVM IR generated for the GPU: {err}\n{text}") from None
    module.triple = TRIPLE
    module.data_layout = str(tm.target_data)
    link_libdevice(module, [f.name for f in funcs])
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)
    optimized = str(module)
    return optimized, tm.emit_assembly(module)
