"""Templates that fail on purpose, for the measurement tests (``tests/measure``).

They are defined inside :func:`register_faulty`, so they travel to workers by value
(cloudpickle), as templates from a user's ``__main__`` do.
"""

from __future__ import annotations

import numpy as np

from measure import MeasureInput

__all__ = ["FAULTS", "N", "register_faulty", "inputs_for", "costs_ok"]

FAULTS = ("none", "abort", "hang", "wrong", "raise", "slow_build")
N = 1024


def register_faulty(name: str, with_reference: bool = True):
    """Template ``name(n)``: ``C = A + B``, broken as its knob ``fault`` says."""
    from compiler import te
    from search_spaces import create_task, get_config, template

    def reference(n, rng=None):
        a = rng.standard_normal(n).astype("float32")
        b = rng.standard_normal(n).astype("float32")
        return [a, b], [a + b]

    def faulty(n):
        import time

        cfg = get_config()
        cfg.define_knob("fault", list(FAULTS))
        fault = cfg["fault"].val
        if fault == "raise":
            raise ValueError("this config cannot be instantiated")
        if fault == "slow_build":
            time.sleep(60)
        A = te.placeholder((n,), name="A")
        B = te.placeholder((n,), name="B")
        extra = {"abort": lambda: te.call_extern("float32", "abort"),
                 "hang": lambda: te.call_extern("int32", "sleep", 1000).astype("float32"),
                 "wrong": lambda: te.const(1.0, "float32")}.get(fault)
        if extra is None:
            C = te.compute((n,), lambda i: A[i] + B[i], name="C")
        else:
            C = te.compute((n,), lambda i: A[i] + B[i] + extra(), name="C")
        return te.create_schedule(C.op), [A, B, C]

    template(name, reference=reference if with_reference else None)(faulty)
    return create_task(name, (N,), "llvm")


def inputs_for(task, faults) -> list[MeasureInput]:
    space = task.config_space
    by_fault = {}
    for k in range(len(space)):
        cfg = space.get(k)
        by_fault[cfg["fault"].val] = cfg
    return [MeasureInput(task, by_fault[f]) for f in faults]


def costs_ok(result) -> bool:
    return result.ok and len(result.costs) > 0 and all(np.isfinite(c) and c > 0 for c in result.costs)
