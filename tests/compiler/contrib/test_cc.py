"""Module.save writes an object file; contrib.cc.create_shared links it into a library that
load_module reads back; contrib.utils.tempdir holds the files (TVM's save/link/load path)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import poisoned, random_array

import compiler
from compiler import te
from compiler.contrib import cc, utils
from compiler.errors import CompilerError


def _scaled_sum():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] * 2.0 + B[i], name="C")
    s = te.create_schedule(C.op)
    return compiler.build(s, [A, B, C], "llvm", name="scaled_sum")


def test_saved_object_linked_and_loaded_computes_the_sum(tmp_path, rng):
    obj, lib = tmp_path / "k.o", tmp_path / "k.so"
    _scaled_sum().save(str(obj))
    with open(obj, "rb") as f:
        assert f.read(4) == b"\x7fELF"
    cc.create_shared(str(lib), [str(obj)])
    g = compiler.runtime.load_module(str(lib))
    assert g.entry_name == "scaled_sum"
    a, b = random_array(rng, (37,), "float32"), random_array(rng, (37,), "float32")
    c = poisoned(37, "float32")
    g(a, b, c)
    assert np.isfinite(c).all()
    np.testing.assert_allclose(c, a * 2.0 + b, rtol=1e-6)
    with pytest.raises(CompilerError):
        g(a, b[:5], c)  # the loaded module still checks its arguments


def test_save_refuses_other_formats_and_loaded_modules(tmp_path):
    f = _scaled_sum()
    with pytest.raises(CompilerError, match="object files"):
        f.save(str(tmp_path / "k.ll"))
    f.export_library(str(tmp_path / "k.so"))
    loaded = compiler.runtime.load_module(str(tmp_path / "k.so"))
    with pytest.raises(CompilerError, match="no object code"):
        loaded.save(str(tmp_path / "again.o"))


def test_create_shared_reports_missing_and_bad_objects(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.o"):
        cc.create_shared(str(tmp_path / "x.so"), [str(tmp_path / "nope.o")])
    with pytest.raises(ValueError, match="at least one"):
        cc.create_shared(str(tmp_path / "x.so"), [])
    junk = tmp_path / "junk.o"
    junk.write_bytes(b"not an object file")
    with pytest.raises(CompilerError, match="linking"):
        cc.create_shared(str(tmp_path / "x.so"), str(junk))
    assert not (tmp_path / "x.so").exists()


def test_tempdir_relpath_and_removal():
    temp = utils.tempdir()
    path = temp.relpath("a.txt")
    assert os.path.dirname(path) == temp.temp_dir
    with open(path, "w") as f:
        f.write("x")
    assert temp.listdir() == ["a.txt"]
    temp.remove()
    assert not os.path.exists(temp.temp_dir)
    with utils.tempdir() as scoped:
        kept = scoped.temp_dir
        assert os.path.isdir(kept)
    assert not os.path.exists(kept)
