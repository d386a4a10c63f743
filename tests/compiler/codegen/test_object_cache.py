"""The compile cache: CPU object files kept on disk under the LLVM IR and target machine."""

from __future__ import annotations

import logging
import os
import time

import numpy as np
import pytest
from helpers import assert_written, poisoned

import compiler
import compiler.codegen.llvm_build as llvm_build
from compiler import te
from compiler.codegen import object_cache
from compiler.codegen.llvm_machine import object_key
from compiler.driver import build_artifact
from compiler.runtime import load_module
from compiler.target import Target

TARGET = "llvm -mcpu=haswell"


@pytest.fixture
def optimizations(monkeypatch) -> list[int]:
    """Counts the runs of LLVM's O3 in builds (one per compiled object)."""
    runs: list[int] = []
    optimized_module = llvm_build.optimized_module

    def counted(*args, **kwargs):
        runs.append(1)
        return optimized_module(*args, **kwargs)

    monkeypatch.setattr(llvm_build, "optimized_module", counted)
    return runs


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv(object_cache.DIRECTORY_ENV, str(directory))
    return directory


def _scaled_add(n: int = 200):
    a = te.placeholder((n,), name="a")
    b = te.placeholder((n,), name="b")
    c = te.compute((n,), lambda i: a[i] * 3.0 + b[i], name="c")
    s = te.create_schedule(c.op)
    outer, inner = s[c].split(c.op.axis[0], factor=8)
    s[c].vectorize(inner)
    return s, [a, b, c]


def _check(module, rng) -> None:
    a, b = (rng.standard_normal(200).astype("float32") for _ in range(2))
    c = poisoned(200, "float32")
    module(a, b, c)
    assert_written(c, a * np.float32(3.0) + b, rtol=1e-5, atol=1e-6)  # fused multiply-adds round once


def _entries(directory) -> list:
    return sorted(p for p in directory.glob("??/*") if not p.name.startswith("."))


def test_the_same_code_built_again_is_loaded_from_the_cache_and_computes_the_same(
        cache_dir, optimizations, rng, tmp_path):
    first = compiler.build(*_scaled_add(), target=TARGET)
    assert len(optimizations) == 1 and len(_entries(cache_dir)) == 1
    again = compiler.build(*_scaled_add(), target=TARGET)
    assert len(optimizations) == 1  # LLVM did not run
    _check(first, rng)
    _check(again, rng)
    # the source is still there (optimised again for the module from the cache, once), and the
    # cached object exports
    assert again.get_source("ll") == first.get_source("ll") == again.get_source("ll")
    assert len(optimizations) == 2
    assert "vfmadd" in again.get_source("asm") or "vmulps" in again.get_source("asm")
    again.export_library(str(tmp_path / "add.so"))
    _check(load_module(str(tmp_path / "add.so")), rng)
    # a worker's artifact of the same code is the cached object
    artifact = build_artifact(*_scaled_add(), target=TARGET)
    assert len(optimizations) == 2
    assert artifact.data == _entries(cache_dir)[0].read_bytes()[32:]


def test_other_code_or_another_cpu_is_another_entry(cache_dir, optimizations):
    compiler.build(*_scaled_add(), target=TARGET)
    compiler.build(*_scaled_add(100), target=TARGET)
    build_artifact(*_scaled_add(), target="llvm -mcpu=skylake-avx512")
    assert len(optimizations) == 3 and len(_entries(cache_dir)) == 3
    texts = ("define void @f() {\n  ret void\n}\n",)
    keys = {object_key(Target(t), texts) for t in
            (TARGET, "llvm -mcpu=skylake-avx512", f"{TARGET} -mattr=-fma", "llvm -mcpu=znver3")}
    assert len(keys) == 4
    assert object_key(Target(TARGET), texts) == object_key(Target(TARGET), texts)
    assert object_key(Target(TARGET), texts) != object_key(Target(TARGET), (texts[0] + "\n",))


@pytest.mark.parametrize("damage", ["cut", "flipped"])
def test_a_damaged_entry_is_compiled_again_never_loaded(cache_dir, optimizations, rng, damage):
    compiler.build(*_scaled_add(), target=TARGET)
    (entry,) = _entries(cache_dir)
    raw = bytearray(entry.read_bytes())
    if damage == "cut":
        raw = raw[: len(raw) // 2]
    else:
        raw[len(raw) // 2] ^= 0xFF
    entry.write_bytes(bytes(raw))
    _check(compiler.build(*_scaled_add(), target=TARGET), rng)
    assert len(optimizations) == 2
    data = entry.read_bytes()
    assert len(data) > len(raw) if damage == "cut" else data != bytes(raw)  # written again whole
    compiler.build(*_scaled_add(), target=TARGET)
    assert len(optimizations) == 2


@pytest.mark.parametrize("value", ["off", ""])
def test_off_compiles_every_time_and_writes_nothing(tmp_path, monkeypatch, optimizations, rng, value):
    monkeypatch.setenv(object_cache.DIRECTORY_ENV, value)
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        _check(compiler.build(*_scaled_add(), target=TARGET), rng)
    assert len(optimizations) == 2
    assert not any(tmp_path.iterdir())


def test_a_directory_that_cannot_be_written_warns_once_and_the_builds_go_on(
        tmp_path, monkeypatch, optimizations, rng, caplog):
    blocked = tmp_path / "a_file"
    blocked.write_text("not a directory")
    monkeypatch.setenv(object_cache.DIRECTORY_ENV, str(blocked / "cache"))
    with caplog.at_level(logging.WARNING, logger=object_cache.__name__):
        for _ in range(2):
            _check(compiler.build(*_scaled_add(), target=TARGET), rng)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert str(blocked / "cache") in warnings[0] and "COMPILER_CACHE_DIR" in warnings[0]
    assert len(optimizations) == 2


def test_trim_removes_the_entries_used_longest_ago_down_to_the_limit(cache_dir):
    keys = [object_cache.cache_key([str(i)]) for i in range(4)]
    for i, key in enumerate(keys):
        assert object_cache.cached(key, lambda i=i: bytes([i]) * 1000) == bytes([i]) * 1000
    now = time.time()
    paths = _entries(cache_dir)
    by_key = {p.name: p for p in paths}
    for age, key in zip((400, 100, 300, 200), keys, strict=True):
        os.utime(by_key[key], (now - age, now - age))
    # an entry another process is writing stays
    writing = by_key[keys[0]].parent / ".tmp-writing"
    writing.write_bytes(b"x" * 5000)
    object_cache.trim(cache_dir, limit=2100)
    assert sorted(p.name for p in _entries(cache_dir)) == sorted([keys[1], keys[3]])
    assert writing.exists()
    # reading an entry makes it the most recently used
    assert object_cache.cached(keys[3], lambda: b"never") == bytes([3]) * 1000
    os.utime(by_key[keys[1]], (now - 50, now - 50))
    object_cache.trim(cache_dir, limit=1100)
    assert [p.name for p in _entries(cache_dir)] == [keys[3]]
