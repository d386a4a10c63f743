"""A built kernel exported as a shared object gives the same results in a new process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
from helpers import random_array

import compiler
from compiler import te


def test_export_library_then_load_in_new_process(tmp_path, rng):
    N = 40
    A = te.placeholder((N, N), name="A")
    B = te.placeholder((N, N), name="B")
    k = te.reduce_axis((0, N), name="k")
    C = te.compute((N, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    s[C].parallel(io)
    s[C].vectorize(ji)
    f = compiler.build(s, [A, B, C], name="mm")
    a, b = random_array(rng, (N, N), "float32"), random_array(rng, (N, N), "float32")
    c = np.full((N, N), np.nan, "float32")
    f(a, b, c)
    lib = tmp_path / "mm.so"
    f.export_library(str(lib))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import compiler.runtime
        g = compiler.runtime.load_module({str(lib)!r})
        a = np.load({str(tmp_path / 'a.npy')!r}); b = np.load({str(tmp_path / 'b.npy')!r})
        c = np.full(({N}, {N}), np.nan, 'float32')
        g(a, b, c)
        np.save({str(tmp_path / 'c.npy')!r}, c)
        assert 'llvmlite' not in sys.modules, 'loading a library must not need the JIT'
    """)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=str(tmp_path))
    np.testing.assert_array_equal(np.load(tmp_path / "c.npy"), c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
