"""The lowering pipeline every target shares, and the pass infrastructure it is written in.

:data:`LOWER` is what :func:`compiler.lower` runs, for every target (``optimize`` passes are
skipped with ``simple_mode=True``); the ``Phase`` markers are where the passes a user adds
with ``PassContext(config={"tir.add_lower_pass": [(phase, pass)]})`` go, as in TVM. Each
backend then runs its own pipeline (``compiler.backends.<kind>.PIPELINE``) and its code
generator: ``print(compiler.backends.get("cuda").pipeline)`` shows every pass of a path.
"""

from __future__ import annotations

from .transform import (
    hoist_if,
    inject_prefetch,
    loop_partition,
    remove_no_op,
    simplify,
    unroll_loops,
    vectorize_loops,
)
from .transform.pipeline import (
    ADD_LOWER_PASS,
    DumpIR,
    Pass,
    PassContext,
    PassInfo,
    PassInstrument,
    Phase,
    Pipeline,
    VerifyIR,
    prim_func_pass,
)
from .transform.storage_flatten import storage_flatten

__all__ = ["LOWER", "Pass", "Phase", "Pipeline", "PassContext", "PassInfo", "PassInstrument", "DumpIR",
           "VerifyIR", "prim_func_pass", "ADD_LOWER_PASS"]

LOWER = Pipeline("lower", (
    Phase(0),                   # on the multi-dimensional buffers the schedule wrote
    Pass("inject_prefetch", inject_prefetch),
    Pass("storage_flatten", storage_flatten),
    Pass("simplify", simplify),
    Phase(1),
    Pass("hoist_if", hoist_if, optimize=True),
    Pass("loop_partition", loop_partition, optimize=True),
    # Simplifies too, as it copies: disabled, a plain simplify runs in its place.
    Pass("unroll_loops", unroll_loops, optimize=True,
         when_disabled=Pass("simplify", simplify, optimize=True)),
    # Last of the optimisations: later passes (the simplifier in particular) do not know vector nodes.
    Pass("vectorize_loops", vectorize_loops, optimize=True),
    Phase(2),
    Pass("remove_no_op", remove_no_op),
    Phase(3),
))
