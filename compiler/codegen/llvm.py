"""Translating loop-IR functions into LLVM IR (text) with llvmlite's IRBuilder.

For every PrimFunc ``f`` the module gets:

* ``f__kernel`` (internal): typed parameters, one pointer per buffer parameter
  (``noalias``, ``captures(none)``; aligned to its element only, see
  :func:`argument_align`) followed by one value per scalar variable of ``f.scalar_vars()``;
* ``f`` (exported): ``void f(void **buffers, int64_t *scalars)``, which unpacks
  its arguments and calls the kernel. Scalar slots hold int64 values, or the bits
  of a double for float variables (see :mod:`compiler.runtime.arguments`).

Parallel loops are outlined and run with libgomp's ``GOMP_parallel`` (see
:mod:`.llvm_parallel`); the thread count lives in the internal global
``__autotune_num_threads`` that the exported ``__autotune_set_num_threads(int)``
sets (the runtime calls it before each call; 0 means libgomp's default).

Vectors (see :mod:`compiler.transform.vectorize`): vector values are LLVM
vectors of the node's width; vector loads and stores, masked or gathered, are
emitted by :mod:`.llvm_vector`, which also tracks which buffer pointers (the
function's own allocations) are 64-byte aligned. Float ``+ - *`` carry the
``contract`` flag (FMA formation); everything else is strict IEEE unless the target
asks for ``-fast-math``.

Indices: a load or store with one index uses it as the flattened element offset
(lowering has folded any ``elem_offset`` into it); with several indices the
code generator flattens them itself (strides or row-major, plus ``elem_offset``).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

from llvmlite import ir

from .. import dtypes
from ..errors import CodegenError
from ..runtime.module import ALLOC_FAILED_SYMBOL
from ..runtime.threads import SETTER_SYMBOL as SET_NUM_THREADS
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import collect, free_vars
from ..tir.buffer import ACCESS_PTR, Buffer
from ..tir.builtin import PREFETCH
from ..tir.function import IRModule, PrimFunc
from ..tir.functor import Functor
from ..tir.op import EXTERN_OPS, INT_OPS
from ..tir.packed import CALL_PACKED
from . import loop_metadata
from .intrinsics import CALL_OPS, LIBM_FUNCTIONS, MathEmitter, emit_call_extern, extern_name
from .llvm_builder import NumberingBuilder
from .llvm_imports import defined_functions, imported_llvm, link_imports
from .llvm_packed import emit_call_packed
from .llvm_parallel import ParallelLoops, pointer_attrs
from .llvm_scratch import HEAP_ALIGN, MAX_STACK_BYTES, scratch_functions, scratch_layout
from .llvm_transpose import TRANSPOSE, emit_transpose
from .llvm_types import (
    I1,
    I8,
    I8PTR,
    I32,
    I64,
    VOID,
    bfloat16_to_float,
    constant,
    double_to_half,
    float_to_bfloat16,
    lanes_of,
    memory_type,
    register_dtype,
    scalar_type,
    shuffle_mask,
    splat_constant,
    split_dtype,
    type_suffix,
)
from .llvm_vector import ALIGNED_BYTES, VectorMemory
from .loop_metadata import LoopMetadata

__all__ = ["CodeGenLLVM", "generate_llvm_ir", "double_to_half", "argument_align", "NUM_THREADS_GLOBAL",
           "MAX_STACK_BYTES"]

NUM_THREADS_GLOBAL = "__autotune_num_threads"
_ALLOC_FAILED_GLOBAL = "__autotune_alloc_failed"
# C symbols that compiled code calls: an exported function of the same name would shadow them.
_RESERVED = frozenset({"free", "aligned_alloc", "malloc", "tanh", "tanhf", *LIBM_FUNCTIONS})
_INT_CMP = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}


def argument_align(buf: Buffer) -> int:
    """The alignment (bytes) that CPU code assumes of a buffer argument's data: its element's.

    numpy puts a large array's data 16 bytes into a cache line, so a kernel that assumed
    more would need every such argument copied into aligned memory on every call (6-19%
    of a call's time in the tuned convolutions and matmuls measured), where unaligned
    vector loads cost nothing on aligned data and little on the rest. The function's own
    allocations stay 64-byte aligned.
    """
    return _elem_align(buf)


def generate_llvm_ir(mod: IRModule, triple: str = "", data_layout: str = "", fast_math: bool = False) -> str:
    """The LLVM IR text (unoptimised) of every function in ``mod``, which the LLVM backend's
    pipeline has prepared (:mod:`compiler.backends.llvm`: intrinsics lowered by the ``llvm`` rules)."""
    cg = CodeGenLLVM(triple, data_layout, fast_math)
    imports = [code for _, func in mod.items() for code in imported_llvm(func.body)]  # Stage.pragma
    cg.imported_symbols = defined_functions(imports)
    for _, func in mod.items():
        cg.add_function(func)
    return link_imports(cg.finish(), imports)


@dataclass
class _FunctionScope:
    """What the code generator tracks while emitting one LLVM function."""

    fn: ir.Function
    builder: ir.IRBuilder
    allocas: ir.IRBuilder  # appends to the entry block, which holds only allocas
    body_start: ir.Block
    vars: dict = field(default_factory=dict)  # Var -> ir.Value
    in_parallel: bool = False
    heap_blocks: list = field(default_factory=list)  # (free function, its arguments) of the blocks live here
    scratch: dict = field(default_factory=dict)  # a scratch allocation's data var -> its offset
    allocates: bool = False  # whether the function allocates on the heap (and so may fail)


class CodeGenLLVM(ParallelLoops, VectorMemory, Functor):
    """Builds one LLVM module from PrimFuncs; :meth:`finish` returns its text."""

    imported_symbols: frozenset = frozenset()  # functions that import_llvm pragmas define

    def __init__(self, triple: str = "", data_layout: str = "", fast_math: bool = False):
        self.module = ir.Module(name="autotune")
        self.module.triple = triple or self.module.triple
        self.module.data_layout = data_layout
        self.fm: tuple = ("fast",) if fast_math else ()
        # Additions and products may fuse into FMAs (as with clang's -ffp-contract=on): one
        # rounding instead of two, never less accurate, and what makes a matmul loop fast.
        self.fm_arith: tuple = self.fm or ("contract",)
        self.math = MathEmitter(self.module)
        self.loop_md = LoopMetadata()
        self._scope: _FunctionScope | None = None
        self._func_name = ""
        self._outlined = 0
        self._aligned: dict = {}
        self._num_threads = self._define_thread_count()

    # ================================================================== module level

    def _define_thread_count(self) -> ir.GlobalVariable:
        gv = ir.GlobalVariable(self.module, I32, NUM_THREADS_GLOBAL)
        gv.linkage = "internal"
        gv.initializer = ir.Constant(I32, 0)
        setter = ir.Function(self.module, ir.FunctionType(VOID, [I32]), SET_NUM_THREADS)
        b = ir.IRBuilder(setter.append_basic_block("entry"))
        b.store(setter.args[0], gv)
        b.ret_void()
        return gv

    def finish(self) -> str:
        return str(self.module) + "\n" + self.loop_md.render()

    def _declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        return self.math.declare(name, ret, args)

    # ================================================================== functions

    def add_function(self, func: PrimFunc) -> None:
        """Emit the kernel and the exported wrapper of ``func``."""
        if func.name in _RESERVED or func.name.startswith(("llvm.", "GOMP_", "omp_", "__autotune")):
            raise CodegenError(f"function name {func.name!r} is reserved (it names a symbol compiled code "
                               "calls); pick another name")
        self._func_name = func.name
        buffers = func.buffer_params()
        scalars = func.scalar_vars()
        self._check_free_vars(func, buffers, scalars)
        arg_types = [memory_type(b.dtype).as_pointer() for b in buffers]
        arg_types += [scalar_type(v.dtype) for v in scalars]
        kernel = ir.Function(self.module, ir.FunctionType(VOID, arg_types), f"{func.name}__kernel")
        kernel.linkage = "internal"
        for buf, arg in zip(buffers, kernel.args[:len(buffers)], strict=True):
            arg.name = buf.name
            pointer_attrs(arg, None)  # element alignment only: see argument_align
        for var, arg in zip(scalars, kernel.args[len(buffers):], strict=True):
            arg.name = var.name
        bindings = [b.data for b in buffers] + scalars
        with self._function(kernel, dict(zip(bindings, kernel.args, strict=True))) as scope:
            scope.scratch = scratch_layout(func).offsets
            self.emit(func.body)
        self._emit_wrapper(func.name, kernel, buffers, scalars)

    def _check_free_vars(self, func: PrimFunc, buffers: list[Buffer], scalars: list[E.Var]) -> None:
        known = {b.data for b in buffers} | set(scalars)
        unknown = [v.name for v in free_vars(func.body) if v not in known]
        if unknown:
            raise CodegenError(f"function {func.name!r} uses variable(s) {', '.join(unknown)} that are "
                               "neither parameters nor bound inside it")

    def _emit_wrapper(self, name: str, kernel: ir.Function, buffers: list[Buffer],
                      scalars: list[E.Var]) -> None:
        fn = ir.Function(self.module, ir.FunctionType(VOID, [I8PTR.as_pointer(), I64.as_pointer()]), name)
        fn.args[0].name, fn.args[1].name = "buffers", "scalars"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        args = []
        for k, buf in enumerate(buffers):
            raw = b.load(b.gep(fn.args[0], [ir.Constant(I64, k)], inbounds=True), align=8)
            args.append(b.bitcast(raw, memory_type(buf.dtype).as_pointer()))
        for k, var in enumerate(scalars):
            slot = b.load(b.gep(fn.args[1], [ir.Constant(I64, k)], inbounds=True), align=8)
            args.append(_from_slot(b, slot, var.dtype))
        b.call(kernel, args)
        b.ret_void()

    @contextmanager
    def _function(self, fn: ir.Function, bindings: dict, in_parallel: bool = False):
        """Make ``fn`` the function being emitted; on exit, close it with ``ret void``."""
        entry = fn.append_basic_block("entry")
        start = fn.append_basic_block("body")
        outer = self._scope
        self._scope = _FunctionScope(fn, NumberingBuilder(start), ir.IRBuilder(entry), start, dict(bindings),
                                     in_parallel)
        try:
            yield self._scope
            self._scope.builder.ret_void()
            self._scope.allocas.branch(start)
        finally:
            self._scope = outer

    @property
    def b(self) -> ir.IRBuilder:
        return self._scope.builder

    # ================================================================== variables

    def _lookup(self, var: E.Var) -> ir.Value:
        try:
            return self._scope.vars[var]
        except KeyError:
            raise CodegenError(f"in {self._func_name!r}: variable {var.name!r} is used outside the scope "
                               "that defines it") from None

    @contextmanager
    def _bind(self, var: E.Var, value: ir.Value):
        vars_ = self._scope.vars
        missing = object()
        old = vars_.get(var, missing)
        vars_[var] = value
        try:
            yield
        finally:
            if old is missing:
                del vars_[var]
            else:
                vars_[var] = old

    def _buffer_ptr(self, buf: Buffer) -> ir.Value:
        ptr = self._lookup(buf.data)
        want = memory_type(buf.dtype).as_pointer()
        return ptr if ptr.type == want else self.b.bitcast(ptr, want)

    # ================================================================== statements

    def emit(self, s: S.Stmt) -> None:
        """Emit the code of statement ``s`` at the builder's position."""
        self.visit(s)

    def generic_visit(self, node):
        kind = "statement" if isinstance(node, S.Stmt) else "expression"
        raise CodegenError(f"the LLVM backend cannot translate {kind} {type(node).__name__}")

    def visit_SeqStmt(self, s: S.SeqStmt) -> None:
        for child in s.seq:
            self.emit(child)

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        self.emit(s.body)

    def visit_Evaluate(self, s: S.Evaluate) -> None:
        if not isinstance(s.value, (E.IntImm, E.FloatImm)):
            self.expr(s.value)

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        value = self.expr(s.value)
        with self._bind(s.var, value):
            self.emit(s.body)

    def visit_BufferStore(self, s: S.BufferStore) -> None:
        buf = s.buffer
        value = self.expr(s.value)
        lanes = lanes_of(value)
        if lanes > 1 and max(E.expr_lanes(i) for i in s.indices) == 1:
            raise CodegenError(f"in {self._func_name!r}: a vector of {lanes} lanes is stored at a scalar "
                               f"index of {buf.name!r}; store it at a vector index (tir.Ramp)")
        if split_dtype(s.value.dtype)[0] != buf.dtype:
            value = self._cast(value, split_dtype(s.value.dtype)[0], buf.dtype)
        if buf.dtype == "bool":
            value = self.b.zext(value, ir.VectorType(I8, lanes) if lanes > 1 else I8)
        elif buf.dtype == "bfloat16":
            value = float_to_bfloat16(self.b, value)
        ptr = self._buffer_ptr(buf)
        index = self._flat_index(buf, s.indices)
        if lanes == 1:
            if s.predicate is not None:
                raise CodegenError(f"in {self._func_name!r}: a scalar store to {buf.name!r} has a predicate; "
                                   "use an if statement")
            self.b.store(value, self.b.gep(ptr, [self.expr(index)], inbounds=True), align=_elem_align(buf))
            return
        self._vector_store(buf, ptr, index, value, self._mask(s.predicate, lanes))

    def visit_IfThenElse(self, s: S.IfThenElse) -> None:
        cond = self._truth(s.condition)
        fn = self._scope.fn
        then_bb = fn.append_basic_block("if.then")
        else_bb = fn.append_basic_block("if.else") if s.else_case is not None else None
        end_bb = fn.append_basic_block("if.end")
        self.b.cbranch(cond, then_bb, else_bb or end_bb)
        self.b.position_at_end(then_bb)
        self.emit(s.then_case)
        self.b.branch(end_bb)
        if else_bb is not None:
            self.b.position_at_end(else_bb)
            self.emit(s.else_case)
            self.b.branch(end_bb)
        self.b.position_at_end(end_bb)

    def visit_Allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        elem = memory_type(buf.dtype)
        count = _product(buf.shape)
        nbytes = _const_int(count)
        if nbytes is not None:
            nbytes *= max(1, dtypes.bits(buf.dtype) // 8)
        if nbytes is not None and nbytes <= MAX_STACK_BYTES:
            # In the entry block, so that loops around the allocation do not grow the stack.
            slot = self._scope.allocas.alloca(ir.ArrayType(elem, _const_int(count)), name=buf.name)
            slot.align = max(ALIGNED_BYTES, buf.align)
            self._note_aligned(buf.data, slot.align)
            ptr = self._scope.allocas.bitcast(slot, elem.as_pointer())
            with self._bind(buf.data, ptr):
                self.emit(s.body)
            return
        raw = self._heap_alloc(buf, count)
        self._note_aligned(buf.data, max(HEAP_ALIGN, buf.align))
        with self._bind(buf.data, self.b.bitcast(raw, elem.as_pointer())):
            self.emit(s.body)
        free, args = self._scope.heap_blocks.pop()
        self.b.call(free, args)

    def _heap_alloc(self, buf: Buffer, count: E.PrimExpr) -> ir.Value:
        """A heap block for ``buf``, pushed on the scope's live blocks with the call that frees
        it: a scratch allocation's (:mod:`.llvm_scratch`) comes from the caller's region where it
        gave one."""
        # aligned_alloc is declared noalias, as malloc is: LLVM then knows the block is new
        # memory, apart from the arguments and other blocks, and keeps values of it in registers
        # across loops that also read other arrays (a heap accumulator block's tiles).
        align = max(HEAP_ALIGN, buf.align)
        size = self._cast(self.expr(count), count.dtype, "int64")
        size = self.b.mul(size, ir.Constant(I64, max(1, dtypes.bits(buf.dtype) // 8)))
        # aligned_alloc takes whole multiples of the alignment
        size = self.b.and_(self.b.add(size, ir.Constant(I64, align - 1)), ir.Constant(I64, -align))
        alloc = self._declare("aligned_alloc", I8PTR, [I64, I64])
        if "noalias" not in alloc.return_value.attributes:
            alloc.return_value.add_attribute("noalias")
        free = self._declare("free", VOID, [I8PTR])
        offset = None if self._scope.in_parallel else self._scope.scratch.get(buf.data)
        if offset is None:
            raw = self.b.call(alloc, [ir.Constant(I64, align), size])
            release = (free, [raw])
        else:
            pointer, alloc, free = scratch_functions(self.module, alloc, free)
            base = self.b.load(pointer, align=8)  # once: the block is freed by what it came from
            raw = self.b.call(alloc, [ir.Constant(I64, align), size, ir.Constant(I64, offset), base])
            release = (free, [raw, base])
        self._scope.allocates = True
        self._fail_if(self.b.icmp_unsigned("==", raw, ir.Constant(I8PTR, None)))
        self._scope.heap_blocks.append(release)
        return raw

    def _fail_if(self, cond: ir.Value) -> None:
        """Where ``cond`` holds: free the heap blocks live here, raise the module's allocation
        failure flag and return, so that the caller gets a MemoryError instead of a crash."""
        fn = self._scope.fn
        failed, ok = fn.append_basic_block("alloc.failed"), fn.append_basic_block("alloc.ok")
        self.b.cbranch(cond, failed, ok).set_weights([1, 1 << 20])
        self.b.position_at_end(failed)
        for free, args in reversed(self._scope.heap_blocks):
            self.b.call(free, args)
        self.b.store_atomic(ir.Constant(I32, 1), self._alloc_failed_flag(), "monotonic", 4)
        self.b.ret_void()
        self.b.position_at_end(ok)

    def _alloc_failed_flag(self) -> ir.GlobalVariable:
        """The module's flag of a failed heap allocation, and the exported function that
        reads and clears it (:data:`~compiler.runtime.module.ALLOC_FAILED_SYMBOL`), made on
        first use: modules that never allocate on the heap have neither."""
        try:
            return self.module.get_global(_ALLOC_FAILED_GLOBAL)
        except KeyError:
            pass
        flag = ir.GlobalVariable(self.module, I32, _ALLOC_FAILED_GLOBAL)
        flag.linkage = "internal"
        flag.initializer = ir.Constant(I32, 0)
        take = ir.Function(self.module, ir.FunctionType(I32, []), ALLOC_FAILED_SYMBOL)
        b = ir.IRBuilder(take.append_basic_block("entry"))
        b.ret(b.atomic_rmw("xchg", flag, ir.Constant(I32, 0), "monotonic"))
        return flag

    def _return_if_allocation_failed(self) -> None:
        """After a parallel region whose body allocates: return as the body did if it failed."""
        raised = self.b.load_atomic(self._alloc_failed_flag(), "monotonic", 4)
        self._fail_if(self.b.icmp_unsigned("!=", raised, ir.Constant(I32, 0)))

    # ------------------------------------------------------------------ loops

    def visit_For(self, s: S.For) -> None:
        if s.kind is S.ForKind.THREAD_BINDING:
            raise CodegenError(f"in {self._func_name!r}: loop {s.loop_var.name!r} is bound to GPU thread "
                               f"axis {s.thread_tag!r}; the LLVM CPU backend cannot run it (build for cuda)")
        if s.kind is S.ForKind.PARALLEL and not self._scope.in_parallel:
            self._parallel_for(s)
            return
        begin = self._cast(self.expr(s.min), s.min.dtype, s.loop_var.dtype)
        extent = self._cast(self.expr(s.extent), s.extent.dtype, s.loop_var.dtype)
        end = self.b.add(begin, extent)
        self._loop(s.loop_var, begin, end, lambda: self.emit(s.body), _loop_properties(s))

    def visit_While(self, s: S.While) -> None:
        fn = self._scope.fn
        header = fn.append_basic_block("while")
        body = fn.append_basic_block("while.body")
        exit_ = fn.append_basic_block("while.end")
        self.b.branch(header)
        self.b.position_at_end(header)
        self.b.cbranch(self._truth(s.condition), body, exit_)
        self.b.position_at_end(body)
        self.emit(s.body)
        self.b.branch(header)
        self.b.position_at_end(exit_)

    def _loop(self, var: E.Var, begin: ir.Value, end: ir.Value, emit_body, properties: tuple = ()) -> None:
        """``for var in [begin, end)``; ``properties`` go into the back edge's ``!llvm.loop``."""
        fn = self._scope.fn
        header = fn.append_basic_block(f"for.{var.name}")
        body = fn.append_basic_block(f"for.{var.name}.body")
        exit_ = fn.append_basic_block(f"for.{var.name}.end")
        pre = self.b.block
        self.b.branch(header)
        self.b.position_at_end(header)
        i = self.b.phi(begin.type, name=var.name)
        i.add_incoming(begin, pre)
        less = self.b.icmp_unsigned if dtypes.is_uint(var.dtype) else self.b.icmp_signed
        self.b.cbranch(less("<", i, end), body, exit_)
        self.b.position_at_end(body)
        with self._bind(var, i):
            emit_body()
        nxt = self.b.add(i, ir.Constant(i.type, 1), flags=() if dtypes.is_uint(var.dtype) else ("nsw",))
        i.add_incoming(nxt, self.b.block)
        back = self.b.branch(header)
        if properties:
            self.loop_md.attach(back, *properties)
        self.b.position_at_end(exit_)

    # ================================================================== expressions

    def expr(self, e: E.PrimExpr) -> ir.Value:
        """The LLVM value of expression ``e``."""
        return self.visit(e)

    def _truth(self, e: E.PrimExpr) -> ir.Value:
        """``e`` as an ``i1`` condition."""
        return self._cast(self.expr(e), split_dtype(e.dtype)[0], "bool")

    def visit_Var(self, e: E.Var) -> ir.Value:
        return self._lookup(e)

    def visit_IntImm(self, e: E.IntImm) -> ir.Value:
        return constant(e.dtype, e.value)

    def visit_FloatImm(self, e: E.FloatImm) -> ir.Value:
        return constant(e.dtype, e.value)

    def visit_StringImm(self, e: E.StringImm) -> ir.Value:
        raise CodegenError(f"string {e.value!r} cannot be used as a value in CPU code")

    def visit_Cast(self, e: E.Cast) -> ir.Value:
        return self._cast(self.expr(e.value), split_dtype(e.value.dtype)[0], split_dtype(e.dtype)[0])

    def visit_Let(self, e: E.Let) -> ir.Value:
        with self._bind(e.var, self.expr(e.value)):
            return self.expr(e.body)

    def _operands(self, e: E.BinaryOp) -> tuple[ir.Value, ir.Value, str]:
        a, b = self.expr(e.a), self.expr(e.b)
        dtype = split_dtype(e.a.dtype)[0]
        if split_dtype(e.b.dtype)[0] != dtype:  # hand-written IR may mix; promote like the frontend
            dtype = dtypes.promote(dtype, split_dtype(e.b.dtype)[0])
            a = self._cast(a, split_dtype(e.a.dtype)[0], dtype)
            b = self._cast(b, split_dtype(e.b.dtype)[0], dtype)
        la, lb = lanes_of(a), lanes_of(b)
        if la != lb:
            a, b = self._vector(a, max(la, lb)), self._vector(b, max(la, lb))
        return a, b, dtype

    def _arith(self, e, float_op: str, int_op: str) -> ir.Value:
        a, b, dtype = self._operands(e)
        if dtypes.is_float(dtype):
            return getattr(self.b, float_op)(a, b, flags=self.fm_arith)
        flags = ("nsw",) if dtype.startswith("int") else ()
        return getattr(self.b, int_op)(a, b, flags=flags)

    def visit_Add(self, e):
        return self._arith(e, "fadd", "add")

    def visit_Sub(self, e):
        return self._arith(e, "fsub", "sub")

    def visit_Mul(self, e):
        return self._arith(e, "fmul", "mul")

    def _division_operands(self, e) -> tuple[ir.Value, ir.Value, str]:
        """The operands of a division; an integer divisor made safe where it could trap.

        x86 traps on an integer division by zero and on ``MIN / -1``, which would take the
        interpreter down. There the divisor becomes 1: ``MIN / -1`` wraps to ``MIN`` (two's
        complement, as the constant folder computes it), and ``x / 0`` gives ``x`` and
        ``x % 0`` gives 0 (undefined in C and TVM). A constant divisor that cannot trap
        costs nothing.
        """
        a, b, dtype = self._operands(e)
        if dtypes.is_float(dtype):
            return a, b, dtype
        c = _const_int(e.b)
        if c is not None and c != 0 and (c != -1 or _unsigned(dtype)):
            return a, b, dtype
        traps = self.b.icmp_unsigned("==", b, splat_constant(b.type, 0))
        if not _unsigned(dtype):
            lowest = splat_constant(a.type, -(1 << (_int_width(a.type) - 1)))
            overflow = self.b.and_(self.b.icmp_signed("==", a, lowest),
                                   self.b.icmp_signed("==", b, splat_constant(b.type, -1)))
            traps = self.b.or_(traps, overflow)
        return a, self.b.select(traps, splat_constant(b.type, 1), b), dtype

    def visit_Div(self, e):
        a, b, dtype = self._division_operands(e)
        if dtypes.is_float(dtype):
            return self.b.fdiv(a, b, flags=self.fm)
        return self.b.udiv(a, b) if _unsigned(dtype) else self.b.sdiv(a, b)

    def visit_Mod(self, e):
        a, b, dtype = self._division_operands(e)
        if dtypes.is_float(dtype):
            return self.b.frem(a, b, flags=self.fm)
        return self.b.urem(a, b) if _unsigned(dtype) else self.b.srem(a, b)

    def visit_FloorDiv(self, e):
        a, b, dtype = self._division_operands(e)
        if dtypes.is_float(dtype):
            return self.math.emit(self.b, "floor", [self.b.fdiv(a, b, flags=self.fm)], self.fm)
        if _unsigned(dtype):
            return self.b.udiv(a, b)
        q = self.b.sdiv(a, b)
        # Truncation rounded up when the remainder is non-zero and its sign differs from b's.
        return self.b.sub(q, self.b.zext(self._floor_adjust(a, b), q.type))

    def visit_FloorMod(self, e):
        a, b, dtype = self._division_operands(e)
        if dtypes.is_float(dtype):
            q = self.math.emit(self.b, "floor", [self.b.fdiv(a, b, flags=self.fm)], self.fm)
            return self.b.fsub(a, self.b.fmul(q, b, flags=self.fm), flags=self.fm)
        if _unsigned(dtype):
            return self.b.urem(a, b)
        r = self.b.srem(a, b)
        return self.b.add(r, self.b.select(self._floor_adjust(a, b, r), b, splat_constant(r.type, 0)))

    def _floor_adjust(self, a: ir.Value, b: ir.Value, r: ir.Value | None = None) -> ir.Value:
        """Whether truncating ``a / b`` differs from flooring it: ``r != 0 and (r < 0) != (b < 0)``."""
        r = self.b.srem(a, b) if r is None else r
        zero = splat_constant(r.type, 0)
        nonzero = self.b.icmp_signed("!=", r, zero)
        signs_differ = self.b.icmp_signed("<", self.b.xor(r, b), zero)
        return self.b.and_(nonzero, signs_differ)

    def _minmax(self, e, op: str) -> ir.Value:
        a, b, dtype = self._operands(e)
        if dtypes.is_float(dtype):
            cond = self.b.fcmp_ordered(op, a, b, flags=self.fm)
        elif _unsigned(dtype):
            cond = self.b.icmp_unsigned(op, a, b)
        else:
            cond = self.b.icmp_signed(op, a, b)
        return self.b.select(cond, a, b)

    def visit_Min(self, e):
        return self._minmax(e, "<")

    def visit_Max(self, e):
        return self._minmax(e, ">")

    def _compare(self, e) -> ir.Value:
        a, b, dtype = self._operands(e)
        op = _INT_CMP[type(e)]
        if dtypes.is_float(dtype):
            # != is true for NaN operands (unordered), every other comparison false (ordered).
            if op == "!=":
                return self.b.fcmp_unordered(op, a, b, flags=self.fm)
            return self.b.fcmp_ordered(op, a, b, flags=self.fm)
        if _unsigned(dtype):
            return self.b.icmp_unsigned(op, a, b)
        return self.b.icmp_signed(op, a, b)

    visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = _compare

    def _logical_operands(self, e) -> tuple[ir.Value, ir.Value]:
        a, b = self._truth(e.a), self._truth(e.b)
        lanes = max(lanes_of(a), lanes_of(b))
        return self._vector(a, lanes), self._vector(b, lanes)

    def visit_And(self, e):
        return self.b.and_(*self._logical_operands(e))

    def visit_Or(self, e):
        return self.b.or_(*self._logical_operands(e))

    def visit_Not(self, e):
        return self.b.not_(self._truth(e.a))

    def visit_Select(self, e: E.Select) -> ir.Value:
        dtype = split_dtype(e.dtype)[0]
        cond = self._truth(e.condition)
        if lanes_of(cond) == 1 and (_may_fault(e.true_value) or _may_fault(e.false_value)):
            return self._lazy_select(cond, e, dtype)
        tv = self._cast(self.expr(e.true_value), split_dtype(e.true_value.dtype)[0], dtype)
        fv = self._cast(self.expr(e.false_value), split_dtype(e.false_value.dtype)[0], dtype)
        lanes = max(lanes_of(tv), lanes_of(fv), lanes_of(cond))
        tv, fv = self._vector(tv, lanes), self._vector(fv, lanes)
        return self.b.select(cond, tv, fv)

    def _lazy_select(self, cond: ir.Value, e: E.Select, dtype: str) -> ir.Value:
        """Branches and a phi: only the chosen side runs (it may guard an out-of-bounds load)."""
        fn = self._scope.fn
        then_bb, else_bb, end_bb = (fn.append_basic_block(n) for n in ("sel.true", "sel.false", "sel.end"))
        self.b.cbranch(cond, then_bb, else_bb)
        sides = []
        for bb, side in ((then_bb, e.true_value), (else_bb, e.false_value)):
            self.b.position_at_end(bb)
            value = self._cast(self.expr(side), split_dtype(side.dtype)[0], dtype)
            sides.append((value, self.b.block))  # the side's last block: it may contain control flow
        lanes = max(lanes_of(v) for v, _ in sides)
        incoming = []
        for value, block in sides:
            self.b.position_at_end(block)
            incoming.append((self._vector(value, lanes), block))
            self.b.branch(end_bb)
        self.b.position_at_end(end_bb)
        phi = self.b.phi(incoming[0][0].type)
        for value, block in incoming:
            phi.add_incoming(value, block)
        return phi

    def visit_Call(self, e: E.Call) -> ir.Value:
        op = e.op
        if op == CALL_PACKED:
            return emit_call_packed(self, e)
        if op in EXTERN_OPS:  # a function of an import_llvm pragma is defined in this module
            name = extern_name(e)
            if name == TRANSPOSE:  # ours, emitted inline
                return emit_transpose(self, e)
            return emit_call_extern(self, e, name if name in self.imported_symbols else None)
        if op == PREFETCH:  # (address,): read, keep in every cache level, a data line
            fn = self.math.declare("llvm.prefetch.p0", VOID, [I8PTR, I32, I32, I32])
            flags = [ir.Constant(I32, v) for v in (0, 3, 1)]
            self.b.call(fn, [self.b.bitcast(self.expr(e.args[0]), I8PTR), *flags])
            return ir.Constant(I32, 0)
        if op == ACCESS_PTR:  # (dtype, data, offset, extent, mask): &data[offset] as a dtype*
            ptr, want = self._lookup(e.args[1]), memory_type(e.args[0].value).as_pointer()
            ptr = ptr if ptr.type == want else self.b.bitcast(ptr, want)
            return self.b.gep(ptr, [self.expr(e.args[2])])
        if op not in CALL_OPS:
            known = ", ".join(sorted(CALL_OPS))
            raise CodegenError(f"unknown intrinsic {op!r}; the LLVM backend knows {known}")
        dtype = split_dtype(e.dtype)[0]
        if op in ("omp_thread_id", "omp_num_threads"):
            name = "omp_get_thread_num" if op == "omp_thread_id" else "omp_get_num_threads"
            return self._cast(self.b.call(self._declare(name, I32, []), []), "int32", dtype)
        args = [self.expr(a) for a in e.args]
        arg_dtypes = [split_dtype(a.dtype)[0] for a in e.args]
        if op == "isnan":
            if not dtypes.is_float(arg_dtypes[0]):
                return self._vector(ir.Constant(I1, 0), lanes_of(args[0]))
            return self.b.fcmp_unordered("uno", args[0], args[0])
        if op in INT_OPS:
            return self._int_call(op, args, arg_dtypes, dtype)
        if op == "abs" and not dtypes.is_float(dtype):
            x = self._cast(args[0], arg_dtypes[0], dtype)
            if _unsigned(dtype):
                return x
            return self.b.call(self.math.declare(f"llvm.abs.{type_suffix(x.type)}", x.type, [x.type, I1]),
                               [x, ir.Constant(I1, 0)])
        if not dtypes.is_float(dtype):
            raise CodegenError(f"intrinsic {op!r} needs a float dtype, got {e.dtype}")
        args = [self._cast(a, d, dtype) for a, d in zip(args, arg_dtypes, strict=True)]
        if len({lanes_of(a) for a in args}) > 1:
            lanes = max(lanes_of(a) for a in args)
            args = [self._vector(a, lanes) for a in args]
        return self.math.emit(self.b, "fabs" if op == "abs" else op, args, self.fm)

    def _int_call(self, op: str, args: list, arg_dtypes: list, dtype: str) -> ir.Value:
        """The integer and bit intrinsics (``popcount``, shifts, ``bitwise_*``, ``reinterpret``)."""
        b = self.b
        if op == "reinterpret":
            x = args[0]
            t = scalar_type(dtype)
            return b.bitcast(x, ir.VectorType(t, lanes_of(x)) if lanes_of(x) > 1 else t)
        src = arg_dtypes[0]
        if not dtypes.is_int(src):
            raise CodegenError(f"intrinsic {op!r} needs integer operands, got {src}")
        if op in ("popcount", "clz"):
            x = args[0]
            if op == "popcount":
                value = b.call(self.math.declare(f"llvm.ctpop.{type_suffix(x.type)}", x.type, [x.type]), [x])
            else:  # clz(0) is the width of the type, not poison
                fn = self.math.declare(f"llvm.ctlz.{type_suffix(x.type)}", x.type, [x.type, I1])
                value = b.call(fn, [x, ir.Constant(I1, 0)])
            return self._cast(value, src, dtype)
        if op == "bitwise_not":
            return b.not_(args[0])
        args = [self._cast(a, d, dtype) for a, d in zip(args, arg_dtypes, strict=True)]
        lanes = max(lanes_of(a) for a in args)
        x, y = (self._vector(a, lanes) for a in args)
        if op == "shift_right":
            return b.lshr(x, y) if _unsigned(dtype) else b.ashr(x, y)
        emit = {"shift_left": b.shl, "bitwise_and": b.and_, "bitwise_or": b.or_, "bitwise_xor": b.xor}[op]
        return emit(x, y)

    def visit_BufferLoad(self, e: E.BufferLoad) -> ir.Value:
        buf = e.buffer
        ptr = self._buffer_ptr(buf)
        index = self._flat_index(buf, e.indices)
        lanes = max(e.lanes, split_dtype(e.dtype)[1])
        if lanes == 1:
            if e.predicate is not None:
                raise CodegenError(f"in {self._func_name!r}: a scalar load of {buf.name!r} has a predicate; "
                                   "use a select")
            value = self.b.load(self.b.gep(ptr, [self.expr(index)], inbounds=True), align=_elem_align(buf))
        else:
            value = self._vector_load(buf, ptr, index, lanes, self._mask(e.predicate, lanes))
        if buf.dtype == "bool":
            value = self.b.icmp_unsigned("!=", value, splat_constant(value.type, 0))
        elif buf.dtype == "bfloat16":
            value = bfloat16_to_float(self.b, value)
        return value

    def _mask(self, predicate: E.PrimExpr | None, lanes: int) -> ir.Value | None:
        """The ``<lanes x i1>`` mask of a predicated access (None: every lane)."""
        return None if predicate is None else self._vector(self._truth(predicate), lanes)

    def visit_Ramp(self, e: E.Ramp) -> ir.Value:
        base, stride = self.expr(e.base), self.expr(e.stride)
        if stride.type != base.type:
            stride = self._cast(stride, e.stride.dtype, split_dtype(e.base.dtype)[0])
        t = ir.VectorType(base.type, e.lanes)
        offsets = ir.Constant(t, [ir.Constant(base.type, k) for k in range(e.lanes)])
        scaled = self.b.mul(self._vector(stride, e.lanes), offsets)
        return self.b.add(self._vector(base, e.lanes), scaled)

    def visit_Broadcast(self, e: E.Broadcast) -> ir.Value:
        return self._vector(self.expr(e.value), e.lanes)

    def visit_ProducerLoad(self, e):
        name = getattr(e.producer, "name", "?")
        raise CodegenError(f"ProducerLoad of {name!r} reached the code generator; "
                           "lower the schedule first (compiler.lower)")

    def visit_Reduce(self, e):
        raise CodegenError("Reduce reached the code generator; lower the schedule first (compiler.lower)")

    # ================================================================== helpers

    def _vector(self, value: ir.Value, lanes: int) -> ir.Value:
        """``value`` broadcast to ``lanes`` lanes (unchanged if it already has them)."""
        if lanes == 1 or isinstance(value.type, ir.VectorType):
            return value
        t = ir.VectorType(value.type, lanes)
        if isinstance(value, ir.Constant):
            return ir.Constant(t, [value] * lanes)
        one = self.b.insert_element(ir.Constant(t, ir.Undefined), value, ir.Constant(I32, 0))
        return self.b.shuffle_vector(one, ir.Constant(t, ir.Undefined), shuffle_mask([0] * lanes))

    def _cast(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        """Convert ``v`` from dtype ``src`` to ``dst`` (C semantics; to bool means ``!= 0``)."""
        src, dst = register_dtype(src), register_dtype(dst)
        if src == dst:
            return v
        lanes = lanes_of(v)
        t = scalar_type(dst)
        t = ir.VectorType(t, lanes) if lanes > 1 else t
        b = self.b
        if dst == "bool":
            zero = splat_constant(v.type, 0.0 if dtypes.is_float(src) else 0)
            if dtypes.is_float(src):
                return b.fcmp_unordered("!=", v, zero)
            return b.icmp_unsigned("!=", v, zero)
        if dtypes.is_float(src) and dtypes.is_float(dst):
            if dtypes.bits(src) < dtypes.bits(dst):
                return b.fpext(v, t)
            if (src, dst) == ("float64", "float16"):
                return double_to_half(b, v, t)
            return b.fptrunc(v, t)
        if dtypes.is_float(src):
            return b.fptoui(v, t) if _unsigned(dst) else b.fptosi(v, t)
        if dtypes.is_float(dst):
            return b.uitofp(v, t) if _unsigned(src) else b.sitofp(v, t)
        src_bits, dst_bits = _int_width(v.type), _int_width(t)
        if src_bits == dst_bits:
            return v
        if src_bits > dst_bits:
            return b.trunc(v, t)
        return b.zext(v, t) if _unsigned(src) else b.sext(v, t)

    def _flat_index(self, buf: Buffer, indices: tuple) -> E.PrimExpr:
        if len(indices) == 1:
            return indices[0]
        if len(indices) != len(buf.shape):
            raise CodegenError(f"buffer {buf.name!r} has {len(buf.shape)} dimensions but is indexed with "
                               f"{len(indices)} indices")
        strides = list(buf.strides) or _row_major_strides(buf.shape)
        flat = None
        for idx, stride in zip(indices, strides, strict=True):
            term = idx if E.is_const_int(stride, 1) else idx * stride
            flat = term if flat is None else flat + term
        if buf.elem_offset is not None:
            flat = flat + buf.elem_offset
        return flat if flat is not None else E.const(0)


# ====================================================================== module-level helpers




def _from_slot(b: ir.IRBuilder, slot: ir.Value, dtype: str) -> ir.Value:
    """A scalar variable's value from its int64 slot (floats travel as the bits of a double)."""
    if dtypes.is_float(dtype):
        d = b.bitcast(slot, ir.DoubleType())
        if dtype == "float16":
            return double_to_half(b, d, scalar_type(dtype))
        return d if dtype == "float64" else b.fptrunc(d, scalar_type(dtype))
    if dtype == "bool":
        return b.icmp_unsigned("!=", slot, ir.Constant(I64, 0))
    t = scalar_type(dtype)
    return slot if t.width == 64 else b.trunc(slot, t)


def _unsigned(dtype: str) -> bool:
    return dtypes.is_uint(dtype) or dtype == "bool"


def _elem_align(buf: Buffer) -> int:
    return max(1, dtypes.bits(buf.dtype) // 8)


def _may_fault(e: E.PrimExpr) -> bool:
    """Whether evaluating ``e`` eagerly could fault: it loads memory or divides integers."""
    def risky(n) -> bool:
        if isinstance(n, E.BufferLoad):
            return True
        int_division = isinstance(n, (E.Div, E.Mod, E.FloorDiv, E.FloorMod)) and not dtypes.is_float(n.dtype)
        return int_division and _const_int(n.b) in (None, 0)
    return bool(collect(e, risky))


def _int_width(t: ir.Type) -> int:
    return (t.element if isinstance(t, ir.VectorType) else t).width


def _product(shape: tuple) -> E.PrimExpr:
    total: E.PrimExpr = E.const(1, "int64")
    for dim in shape:
        dim = E.convert(dim)
        total = total * (dim if dim.dtype == "int64" else E.Cast("int64", dim))
    return _fold(total)


def _fold(e: E.PrimExpr) -> E.PrimExpr:
    """Constant-fold products of integer constants (enough for allocation sizes)."""
    if isinstance(e, E.Mul):
        a, b = _fold(e.a), _fold(e.b)
        if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
            return E.IntImm(a.value * b.value, e.dtype)
        return E.Mul(a, b, e.dtype)
    if isinstance(e, E.Cast) and isinstance(e.value, E.IntImm):
        return E.IntImm(e.value.value, e.dtype)
    return e


def _const_int(e) -> int | None:
    v = E.const_value(e)
    return v if isinstance(v, int) else None


def _row_major_strides(shape: tuple) -> list:
    strides: list = []
    acc: E.PrimExpr = E.const(1)
    for dim in reversed(shape):
        strides.append(acc)
        acc = _fold(acc * dim)
    return list(reversed(strides))


def _loop_properties(s: S.For) -> tuple:
    if s.kind is S.ForKind.VECTORIZED:
        width = _const_int(s.extent)
        ok = width is not None and 1 < width <= 64 and width & (width - 1) == 0
        return loop_metadata.vectorize(width if ok else None)
    if s.kind is S.ForKind.UNROLLED:
        return loop_metadata.unroll_full()
    return ()
