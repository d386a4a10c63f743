"""``Stage.pragma(axis, "import_llvm", code)``: LLVM IR linked into the module built for the CPU,
as TVM's ``import_llvm``."""

from __future__ import annotations

import os

import llvmlite.binding as llvm

from ..errors import CodegenError
from ..tir.expr import StringImm
from ..tir.functor import IRVisitor
from ..tir.stmt import AttrStmt
from .llvm_machine import initialize, parse

__all__ = ["IMPORT_LLVM", "imported_llvm", "defined_functions", "link_imports"]

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
    initialize()
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
