"""Splitting a lowered CUDA function into kernels and the host code that launches them.

The body of a function lowered for a GPU is a sequence of loop nests, one per root
stage, inside the allocations of the intermediate global buffers. Each nest must start
with loops bound to GPU thread axes; it becomes one kernel:

* every loop bound to ``blockIdx.*``/``threadIdx.*`` disappears, its variable replaced
  by the thread index, and the kernel body starts with one ``thread_extent``
  attribute per axis (``// attr [threadIdx.x] thread_extent = 16``); every loop bound
  to one axis in a kernel must have the same extent;
* its parameters are the global buffers it touches and the scalar variables it uses;
* its launch dimensions are the extents: constants for the block, expressions of the
  function's scalar variables for the grid (evaluated at call time);
* its barriers are the next pass's work (:mod:`.thread_sync`, run on each kernel).

The host side is a :class:`GPUFunction`: the workspaces to allocate and the kernels
to launch in order, as plain data (:meth:`GPUFunction.to_json`), plus a readable host
``PrimFunc`` that says the same. As a pass over a module, :func:`split_host_device_module`
replaces each function by its host function, which carries that plan in its
:data:`LAUNCH_PLAN` attribute, followed by its kernels; :func:`gpu_functions` reads the
GPUFunctions back out of such a module.

The time loop of a ``te.scan`` (marked with the ``scan_loop`` attribute) stays on the
host: the plan's ``program`` runs the launches inside it once per iteration, in order,
each kernel receiving the loop variable as a scalar parameter (one launch per step, as
TVM does).
:func:`compiler.runtime.cuda.program_steps` walks a program for given sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import dtypes
from ..arith import Analyzer
from ..errors import LoweringError
from ..runtime.cuda import DeviceLimits
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import collect, free_vars, substitute
from ..tir.buffer import Buffer
from ..tir.builtin import PRAGMA_PREFIX, SCAN_LOOP
from ..tir.function import IRModule, PrimFunc
from ..tir.functor import Functor, IRMutator
from ..tir.printer import expr_to_str
from .pipeline import is_kernel

__all__ = ["split_host_device", "split_host_device_module", "gpu_functions", "GPUFunction", "KernelLaunch",
           "DeviceLimits", "THREAD_TAGS", "SCAN_LOOP", "LAUNCH_PLAN"]

#: The attribute of a host function that holds its launch plan (:meth:`GPUFunction.to_json`).
LAUNCH_PLAN = "launch_plan"

THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")
_MAX_BLOCK_DIM = {"threadIdx.x": 1024, "threadIdx.y": 1024, "threadIdx.z": 64}


@dataclass
class KernelLaunch:
    """One kernel launch of a host function, as plain data.

    ``args`` lists where each kernel parameter comes from: ``["param", i]`` (the host
    function's i-th argument), ``["workspace", j]`` or ``["scalar", name]``. ``grid``
    holds three size expressions (text of :func:`~compiler.tir.printer.expr_to_str`,
    in the function's scalar variables), ``block`` three ints.
    """

    kernel: str
    args: list
    grid: list
    block: list
    shared_bytes: int = 0

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "args": [list(a) for a in self.args], "grid": list(self.grid),
                "block": list(self.block), "shared_bytes": self.shared_bytes}

    @staticmethod
    def from_json(d: dict) -> KernelLaunch:
        return KernelLaunch(d["kernel"], [list(a) for a in d["args"]], list(d["grid"]), list(d["block"]),
                            int(d.get("shared_bytes", 0)))


@dataclass
class GPUFunction:
    """A function lowered for a GPU: the kernels and the host plan that runs them."""

    host: PrimFunc
    kernels: list                                   # device PrimFuncs
    launches: list = field(default_factory=list)    # KernelLaunch, in order
    workspaces: list = field(default_factory=list)  # [{"name", "dtype", "size"}] (size: text)
    # The order of the launches: an index into ``launches``, or a host loop
    # {"loop": name, "dtype", "min": text, "extent": text, "body": [...]} (None: each once, in order).
    program: list | None = None

    def to_json(self) -> dict:
        out = {"name": self.host.name, "launches": [x.to_json() for x in self.launches],
               "workspaces": [dict(w) for w in self.workspaces]}
        if self.program is not None:
            out["program"] = self.program
        return out


def split_host_device(func: PrimFunc, limits: DeviceLimits | None = None) -> GPUFunction:
    """Split ``func`` (lowered, flattened, virtual threads injected) into kernels."""
    return _Splitter(func, limits or DeviceLimits()).run()


def split_host_device_module(mod: IRModule, limits: DeviceLimits | None = None) -> IRModule:
    """``mod`` with each host function split (:func:`split_host_device`): the host function, its
    plan in the :data:`LAUNCH_PLAN` attribute, followed by its kernels (which the module names)."""
    funcs: dict[str, PrimFunc] = {}
    for name, func in mod.items():
        if is_kernel(func):
            funcs[name] = func
            continue
        gf = split_host_device(func if func.name == name else func.with_name(name), limits)
        attrs = {**gf.host.attrs, LAUNCH_PLAN: gf.to_json()}
        funcs[name] = PrimFunc(gf.host.params, gf.host.body, name, attrs)
        for kernel in gf.kernels:
            if kernel.name in funcs or kernel.name in mod:
                raise LoweringError(f"kernel {kernel.name!r} of {name!r} has the name of another function "
                                    "of the module; rename that function")
            funcs[kernel.name] = kernel
    return mod.with_functions(funcs)


def gpu_functions(mod: IRModule) -> list[GPUFunction]:
    """The GPUFunctions of a module :func:`split_host_device_module` split, one per host function."""
    out = []
    for func in mod.functions.values():
        plan = func.attrs.get(LAUNCH_PLAN)
        if plan is None or is_kernel(func):
            continue
        launches = [KernelLaunch.from_json(x) for x in plan["launches"]]
        out.append(GPUFunction(func, [mod[x.kernel] for x in launches], launches,
                               [dict(w) for w in plan["workspaces"]], plan.get("program")))
    return out


class _Splitter(Functor):
    def __init__(self, func: PrimFunc, limits: DeviceLimits):
        self.func = func
        self.limits = limits
        self.kernels: list[PrimFunc] = []
        self.launches: list[KernelLaunch] = []
        self.workspaces: list[Buffer] = []
        self.program: list = []  # where the next launch goes (the body of the innermost host loop)
        self.host_loops = False
        self.param_index = {p.data: i for i, p in enumerate(func.params) if isinstance(p, Buffer)}
        self.scalars = set(func.scalar_vars())  # what the host knows: scalars, and host loop variables

    def run(self) -> GPUFunction:
        host_body = self.walk(self.func.body)
        host = PrimFunc(self.func.params, host_body, self.func.name,
                        {**self.func.attrs, "target": "cuda"})
        ws = [{"name": b.name, "dtype": b.dtype, "size": expr_to_str(b.shape[0])} for b in self.workspaces]
        return GPUFunction(host, self.kernels, self.launches, ws, self.program if self.host_loops else None)

    # ------------------------------------------------------------------ host level

    def walk(self, s: S.Stmt) -> S.Stmt:
        return self.visit(s)

    def visit_SeqStmt(self, s: S.SeqStmt) -> S.Stmt:
        return S.seq(*[self.walk(c) for c in s.seq])

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        if s.buffer.scope != "global":
            raise LoweringError(
                f"buffer {s.buffer.name!r} in {s.buffer.scope!r} memory is allocated outside every "
                "kernel: compute it at a loop inside the thread bindings (compute_at)")
        bad = [v.name for v in free_vars(s.buffer.shape[0]) if v not in self.scalars]
        if bad:
            raise LoweringError(f"the size of buffer {s.buffer.name!r} depends on {', '.join(bad)}, "
                                "which the host cannot know")
        self.workspaces.append(s.buffer)
        return S.Allocate(s.buffer, self.walk(s.body))

    def visit_For(self, s: S.For) -> S.Stmt:
        if s.kind is S.ForKind.THREAD_BINDING:
            return self.kernel(s)
        return self.generic_visit(s)

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        if s.key == SCAN_LOOP:
            return S.AttrStmt(s.node, s.key, s.value, self.host_loop(s.body))
        if s.key.startswith(PRAGMA_PREFIX):
            return self.walk(s.body)  # left by lower(simple_mode=True), which does not unroll
        return self.generic_visit(s)

    def visit_Evaluate(self, s: S.Evaluate) -> S.Stmt:
        if isinstance(s.value, (E.IntImm, E.FloatImm)):
            return s
        return self.generic_visit(s)

    def generic_visit(self, s: S.Stmt) -> S.Stmt:
        """Anything else at host level is work outside every kernel: an error saying why."""
        calls = collect(s, lambda n: isinstance(n, E.Call) and n.op in ("call_packed", "call_extern"))
        if calls and not collect(s, lambda n: isinstance(n, S.For)):
            raise LoweringError(f"CUDA function {self.func.name!r} calls {calls[0].op} on the host (a "
                                "te.extern stage): extern stages run only in CPU functions; build this "
                                "one for 'llvm'")
        stores = collect(s, lambda n: isinstance(n, S.BufferStore))
        names = sorted({st.buffer.name for st in stores})
        what = f"stage {', '.join(map(repr, names))}" if names else "a statement"
        if collect(s, lambda n: isinstance(n, S.For) and n.kind is S.ForKind.THREAD_BINDING):
            loop = s.loop_var.name if isinstance(s, S.For) else type(s).__name__
            raise LoweringError(
                f"{what} of CUDA function {self.func.name!r}: loop {loop!r} runs outside the thread "
                "bindings; put the loops bound to blockIdx/threadIdx outermost (reorder), or bind it too")
        raise LoweringError(
            f"{what} of CUDA function {self.func.name!r} is not bound to GPU threads: every output "
            "stage of a CUDA function must bind its outer loops to thread axes, e.g. "
            "s[C].bind(xo, te.thread_axis('blockIdx.x')); s[C].bind(xi, te.thread_axis('threadIdx.x'))")

    def host_loop(self, s: S.Stmt) -> S.Stmt:
        """The time loop of a scan: the host runs it, launching its kernels at every iteration."""
        if not isinstance(s, S.For):  # the time loop of one step only, removed by the simplifier
            return self.walk(s)
        bad = [v.name for e in (s.min, s.extent) for v in free_vars(e) if v not in self.scalars]
        if bad:
            raise LoweringError(f"CUDA function {self.func.name!r}: the bounds of loop {s.loop_var.name!r} "
                                f"depend on {', '.join(bad)}, which the host cannot know")
        name = s.loop_var.name
        if any(v.name == name for v in self.scalars):
            raise LoweringError(f"CUDA function {self.func.name!r}: loop {name!r} has the name of "
                                "another scalar of the function")
        item = {"loop": name, "dtype": s.loop_var.dtype, "min": expr_to_str(s.min),
                "extent": expr_to_str(s.extent), "body": []}
        outer, self.program = self.program, item["body"]
        self.scalars.add(s.loop_var)
        try:
            body = self.walk(s.body)
        finally:
            self.scalars.discard(s.loop_var)
            self.program = outer
        self.program.append(item)
        self.host_loops = True
        return S.For(s.loop_var, s.min, s.extent, s.kind, body)

    # ------------------------------------------------------------------ one kernel

    def kernel(self, root: S.For) -> S.Stmt:
        name = f"{self.func.name}_kernel{len(self.kernels)}"
        extents: dict[str, E.PrimExpr] = {}
        an = Analyzer()
        for loop in collect(root, lambda n: isinstance(n, S.For) and n.kind is S.ForKind.THREAD_BINDING):
            tag = loop.thread_tag
            if tag not in THREAD_TAGS:
                raise LoweringError(f"kernel {name!r}: loop {loop.loop_var.name!r} is bound to {tag!r}, "
                                    "which is left after virtual thread injection")
            ext = an.simplify(loop.extent)
            if tag in extents:
                old = extents[tag]
                if expr_to_str(old) != expr_to_str(ext) and not an.can_prove(E.EQ(old, ext, "bool")):
                    raise LoweringError(
                        f"kernel {name!r}: {tag} is bound with extents {old} and {ext}; every loop "
                        f"bound to {tag} in one kernel must have the same extent")
            else:
                extents[tag] = ext
        thread_vars = {tag: E.Var(tag, "int32") for tag in extents}
        body = _RemoveThreadLoops(thread_vars).visit(root)
        block = []
        for axis in "xyz":
            tag = f"threadIdx.{axis}"
            ext = extents.get(tag, E.const(1))
            value = E.const_value(ext)
            if not isinstance(value, int):
                raise LoweringError(f"kernel {name!r}: the extent of {tag} must be a constant, got {ext}")
            if value > _MAX_BLOCK_DIM[tag]:
                raise LoweringError(f"kernel {name!r}: {tag} has extent {value}, more than the "
                                    f"{_MAX_BLOCK_DIM[tag]} a block may have")
            block.append(value)
        threads = block[0] * block[1] * block[2]
        if threads > self.limits.max_threads_per_block:
            raise LoweringError(f"kernel {name!r}: a block of {block[0]} x {block[1]} x {block[2]} = "
                                f"{threads} "
                                f"threads exceeds the device limit of {self.limits.max_threads_per_block}")
        grid = []
        for axis in "xyz":
            ext = extents.get(f"blockIdx.{axis}", E.const(1))
            bad = [v.name for v in free_vars(ext) if v not in self.scalars]
            if bad:
                raise LoweringError(f"kernel {name!r}: the extent of blockIdx.{axis} ({ext}) depends on "
                                    f"{', '.join(bad)}, which the host cannot know")
            grid.append(expr_to_str(ext))
        shared = self.check_memory(name, body)
        for tag in reversed(THREAD_TAGS):
            if tag in extents:
                body = S.AttrStmt(thread_vars[tag], "thread_extent", extents[tag], body)
        params, args = self.parameters(name, body, set(thread_vars.values()))
        kernel = PrimFunc(tuple(params), body, name,
                          {"calling_conv": "kernel", "target": "cuda", "grid": grid, "block": block,
                           "shared_bytes": shared})
        self.kernels.append(kernel)
        self.program.append(len(self.launches))
        self.launches.append(KernelLaunch(name, args, grid, block, shared))
        call_args = [E.StringImm(name)] + [_arg_expr(p) for p in params]
        return S.Evaluate(E.Call("int32", "cuda_launch", tuple(call_args)))

    def check_memory(self, name: str, body: S.Stmt) -> int:
        total = 0
        for alloc in collect(body, lambda n: isinstance(n, S.Allocate)):
            buf = alloc.buffer
            size = E.const_value(buf.shape[0])
            if buf.scope == "global":
                raise LoweringError(f"kernel {name!r}: buffer {buf.name!r} is a global buffer allocated "
                                    "inside a kernel; give it 'shared' or 'local' scope, or compute it at "
                                    "the root")
            if not isinstance(size, int):
                raise LoweringError(f"kernel {name!r}: {buf.scope} buffer {buf.name!r} needs a constant "
                                    f"size, got {buf.shape[0]}")
            if buf.scope == "shared":
                total += size * max(1, dtypes.bits(buf.dtype) // 8)
        if total > self.limits.max_shared_memory_per_block:
            raise LoweringError(f"kernel {name!r} uses {total} bytes of shared memory, more than the "
                                f"{self.limits.max_shared_memory_per_block} bytes a block may have")
        return total

    def parameters(self, name: str, body: S.Stmt, thread_vars: set) -> tuple[list, list]:
        buffers: dict[E.Var, Buffer] = {}
        for n in collect(body, lambda n: isinstance(n, (E.BufferLoad, S.BufferStore))):
            buffers.setdefault(n.buffer.data, n.buffer)
        params: list = []
        args: list = []
        for v in free_vars(body):
            if v in thread_vars:
                continue
            if v.dtype == "handle":
                buf = buffers.get(v)
                if v in self.param_index:
                    args.append(["param", self.param_index[v]])
                    buf = self.func.params[self.param_index[v]]
                else:
                    k = next((k for k, w in enumerate(self.workspaces) if w.data is v), None)
                    if k is None or buf is None:
                        raise LoweringError(f"kernel {name!r} uses buffer {v.name!r}, which is neither an "
                                            "argument nor allocated by the host")
                    args.append(["workspace", k])
                    buf = self.workspaces[k]
                params.append(buf)
            elif v in self.scalars:
                params.append(v)
                args.append(["scalar", v.name])
            else:
                raise LoweringError(f"kernel {name!r} uses variable {v.name!r}, which is not known "
                                    "outside it")
        rank = {"param": 0, "workspace": 1, "scalar": 2}
        def key(k):
            kind, ref = args[k]
            return rank[kind], ref if kind != "scalar" else 0

        order = sorted(range(len(params)), key=key)
        return [params[k] for k in order], [args[k] for k in order]


def _arg_expr(p) -> E.PrimExpr:
    return p.data if isinstance(p, Buffer) else p


class _RemoveThreadLoops(IRMutator):
    def __init__(self, thread_vars: dict):
        self.thread_vars = thread_vars

    def visit_For(self, s: S.For):
        body = self.visit(s.body)
        if s.kind is not S.ForKind.THREAD_BINDING:
            if body is s.body:
                return s
            return S.For(s.loop_var, s.min, s.extent, s.kind, body, s.thread_tag)
        tv = self.thread_vars[s.thread_tag]
        value = tv if s.loop_var.dtype == tv.dtype else E.Cast(s.loop_var.dtype, tv)
        if not E.is_const_int(s.min, 0):
            value = value + s.min
        return substitute(body, {s.loop_var: value})
