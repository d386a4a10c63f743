"""A backend is one module and one registration: this file defines a toy backend that prints C
source and compiles it with the system C compiler, registers it, and builds, runs, saves and
reloads an elementwise kernel through compiler.build, as the built-in backends do. Nothing
else in the project names the kind "ctoy"."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_written, poisoned, random_array

import compiler
from compiler import backends, te
from compiler.backends import Artifact, Backend
from compiler.codegen import function_info
from compiler.driver import build_artifact, load_artifact
from compiler.errors import CompilerError
from compiler.passes import Pass, Pipeline
from compiler.runtime import Module
from compiler.target import Target
from compiler.tir import expr as E
from compiler.tir import stmt as S
from compiler.tir.buffer import Buffer
from compiler.tir.function import IRModule, PrimFunc
from compiler.tir.functor import Functor
from compiler.transform import simplify

CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler")

_CTYPES = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t", "bool": "int8_t",
           "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t"}
_BINARY = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=",
           E.GT: ">", E.GE: ">=", E.And: "&&", E.Or: "||"}


class CSource(Functor):
    """Loop IR to C: each function becomes ``void name(void **buffers, int64_t *scalars)``, the
    runtime's calling convention."""

    def __init__(self):
        self.lines: list[str] = ["#include <stdint.h>", "#include <string.h>"]
        self.depth = 0
        self.names: dict = {}

    def name(self, var: E.Var) -> str:
        if var not in self.names:
            self.names[var] = f"v{len(self.names)}_{''.join(c if c.isalnum() else '_' for c in var.name)}"
        return self.names[var]

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def function(self, func: PrimFunc) -> None:
        self.line(f"void {func.name}(void **buffers, int64_t *scalars) {{")
        self.depth += 1
        buffers = [p for p in func.params if isinstance(p, Buffer)]
        for k, buf in enumerate(buffers):
            self.line(f"{_CTYPES[buf.dtype]} *{self.name(buf.data)} = ({_CTYPES[buf.dtype]} *)buffers[{k}];")
        for k, var in enumerate(func.scalar_vars()):
            if var.dtype.startswith("float"):  # the slot holds a double's bits
                self.line(f"double {self.name(var)}; memcpy(&{self.name(var)}, &scalars[{k}], 8);")
            else:
                self.line(f"{_CTYPES[var.dtype]} {self.name(var)} = ({_CTYPES[var.dtype]})scalars[{k}];")
        self.visit(func.body)
        self.depth -= 1
        self.line("}")

    # statements
    def visit_For(self, s: S.For):  # noqa: N802
        v, t = self.name(s.loop_var), _CTYPES[s.loop_var.dtype]
        self.line(f"for ({t} {v} = {self.visit(s.min)}; {v} < {self.visit(s.min)} + {self.visit(s.extent)}; "
                  f"++{v}) {{")
        self.depth += 1
        self.visit(s.body)
        self.depth -= 1
        self.line("}")

    def visit_BufferStore(self, s: S.BufferStore):  # noqa: N802
        (index,) = s.indices
        self.line(f"{self.name(s.buffer.data)}[{self.visit(index)}] = {self.visit(s.value)};")

    def visit_SeqStmt(self, s: S.SeqStmt):  # noqa: N802
        for c in s.seq:
            self.visit(c)

    def visit_IfThenElse(self, s: S.IfThenElse):  # noqa: N802
        self.line(f"if ({self.visit(s.condition)}) {{")
        self.depth += 1
        self.visit(s.then_case)
        self.depth -= 1
        if s.else_case is not None:
            self.line("} else {")
            self.depth += 1
            self.visit(s.else_case)
            self.depth -= 1
        self.line("}")

    def visit_LetStmt(self, s: S.LetStmt):  # noqa: N802
        self.line(f"{_CTYPES[s.var.dtype]} {self.name(s.var)} = {self.visit(s.value)};")
        self.visit(s.body)

    def visit_AttrStmt(self, s: S.AttrStmt):  # noqa: N802
        self.visit(s.body)

    def visit_Evaluate(self, s: S.Evaluate):  # noqa: N802
        if not isinstance(s.value, (E.IntImm, E.FloatImm)):
            raise CompilerError(f"the C backend cannot evaluate {s.value}")

    # expressions
    def visit_Var(self, e: E.Var):  # noqa: N802
        return self.name(e)

    def visit_IntImm(self, e: E.IntImm):  # noqa: N802
        return f"(({_CTYPES[e.dtype]}){e.value}LL)"

    def visit_FloatImm(self, e: E.FloatImm):  # noqa: N802
        return f"(({_CTYPES[e.dtype]}){float(e.value)!r})"

    def visit_Cast(self, e: E.Cast):  # noqa: N802
        return f"(({_CTYPES[e.dtype]}){self.visit(e.value)})"

    def visit_BinaryOp(self, e):  # noqa: N802
        return f"({self.visit(e.a)} {_BINARY[type(e)]} {self.visit(e.b)})"

    visit_Add = visit_Sub = visit_Mul = visit_Div = visit_BinaryOp  # noqa: N815
    visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = visit_And = visit_Or = visit_BinaryOp  # noqa: N815

    def visit_Min(self, e: E.Min):  # noqa: N802
        a, b = self.visit(e.a), self.visit(e.b)
        return f"(({a}) < ({b}) ? ({a}) : ({b}))"

    def visit_Max(self, e: E.Max):  # noqa: N802
        a, b = self.visit(e.a), self.visit(e.b)
        return f"(({a}) > ({b}) ? ({a}) : ({b}))"

    def visit_Select(self, e: E.Select):  # noqa: N802
        return f"({self.visit(e.condition)} ? {self.visit(e.true_value)} : {self.visit(e.false_value)})"

    def visit_BufferLoad(self, e: E.BufferLoad):  # noqa: N802
        (index,) = e.indices
        return f"{self.name(e.buffer.data)}[{self.visit(index)}]"

    def generic_visit(self, node):
        raise CompilerError(f"the C backend does not support {type(node).__name__} nodes")


class SharedLibrary:
    """The code object of a Module (see compiler.runtime.module) over a library cc built."""

    type_key = "ctoy"

    def __init__(self, path: Path, source: str):
        self.path, self._source = path, source
        self._lib = ctypes.CDLL(str(path))

    def address(self, name: str) -> int:
        try:
            return ctypes.cast(getattr(self._lib, name), ctypes.c_void_p).value or 0
        except AttributeError:
            return 0  # the runtime's optional symbols (thread count, native timer, ...)

    def source(self, fmt: str) -> str:
        if fmt != "c":
            raise ValueError(f"a C module has source 'c', not {fmt!r}")
        return self._source

    def export(self, path: str, metadata_json: str) -> None:
        raise CompilerError("the C backend does not export libraries")


class CToy:
    """The backend's code generator and artifacts; ``workdir`` holds the compiled libraries."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.count = 0

    def compile(self, source: str) -> Path:
        self.count += 1
        c, so = self.workdir / f"k{self.count}.c", self.workdir / f"k{self.count}.so"
        c.write_text(source)
        subprocess.run([CC, "-O2", "-shared", "-fPIC", "-o", str(so), str(c)], check=True,
                       capture_output=True)
        return so

    @staticmethod
    def source(mod: IRModule) -> str:
        gen = CSource()
        for _, func in mod.items():
            gen.function(func)
        return "\n".join(gen.lines) + "\n"

    @staticmethod
    def infos(mod: IRModule) -> dict:
        return {name: function_info(f) for name, f in mod.items()}

    def codegen(self, mod: IRModule, target: Target) -> Module:
        source = self.source(mod)
        return Module(SharedLibrary(self.compile(source), source), self.infos(mod), next(iter(mod.functions)))

    def save_artifact(self, mod: IRModule, target: Target) -> Artifact:
        return Artifact.of_functions("c-source", self.source(mod).encode(), target, self.infos(mod))

    def load_artifact(self, artifact: Artifact) -> Module:
        source = artifact.data.decode()
        return Module(SharedLibrary(self.compile(source), source), artifact.function_infos(),
                      artifact.metadata["entry"])


@pytest.fixture
def ctoy(tmp_path):
    toy = CToy(tmp_path)
    backends.register(Backend(
        kind="ctoy", device_type="cpu", template_kind="cpu",
        pipeline=Pipeline("ctoy", (Pass("simplify", simplify),)),
        codegen=toy.codegen, save_artifact=toy.save_artifact, load_artifact=toy.load_artifact,
        target_options={"opt": True},
    ))
    yield toy
    backends.unregister("ctoy")


def _axpy(n=1000):
    """``C = A * 2 + B`` split, with a tail: an elementwise kernel with a guard."""
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] * 2.0 + B[i], name="C")
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=16)
    return s, [A, B, C]


def test_a_registered_backend_builds_and_runs_an_elementwise_kernel(ctoy, rng):
    assert compiler.Target("ctoy -opt=1").kind == "ctoy"
    f = compiler.build(*_axpy(), target="ctoy", name="axpy")
    assert "void axpy(void **buffers, int64_t *scalars)" in f.get_source("c")
    a, b = random_array(rng, 1000, "float32"), random_array(rng, 1000, "float32")
    c = poisoned(1000, "float32")
    f(a, b, c)
    assert_written(c, a * 2 + b)
    # The runtime checks the arguments before entering the C code, as for any backend.
    with pytest.raises(compiler.RuntimeArgumentError):
        f(a, b, np.zeros(999, "float32"))
    # Arrays of the backend's device are the host's.
    dev = compiler.device("ctoy")
    c2 = compiler.nd.empty((1000,), "float32", dev)
    f(compiler.nd.array(a, dev), compiler.nd.array(b, dev), c2)
    assert_written(c2.numpy(), a * 2 + b)


def test_its_artifact_round_trips_through_json(ctoy, rng):
    art = build_artifact(*_axpy(), target="ctoy", name="axpy")
    again = Artifact.from_json(art.to_json())
    f = load_artifact(again)
    a, b = random_array(rng, 1000, "float32"), random_array(rng, 1000, "float32")
    c = poisoned(1000, "float32")
    f(a, b, c)
    assert_written(c, a * 2 + b)


def test_unregistering_forgets_the_kind(ctoy):
    backends.unregister("ctoy")
    with pytest.raises(compiler.errors.TargetError, match="unknown target kind 'ctoy'"):
        compiler.Target("ctoy")
    with pytest.raises(ValueError, match="unknown device name 'ctoy'"):
        compiler.device("ctoy")
    with pytest.raises(CompilerError, match="no backend builds target kind 'ctoy'"):
        backends.get("ctoy")
