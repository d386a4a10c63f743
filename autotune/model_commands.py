"""The ``autotune tune-model`` and ``autotune build-model`` commands (see :mod:`autotune.commands`)."""

from __future__ import annotations

import os
import shlex
import sys
import time

import autotune
import db
from autotune.cli import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, UsageError
from compiler.errors import CompilerError
from compiler.target import Target

__all__ = ["cmd_tune_model", "cmd_build_model", "parse_shapes"]


def _out(text: str = "") -> None:
    print(text, flush=True)


def parse_shapes(items: list[str]) -> dict[str, tuple[int, ...]] | None:
    """``--shape NAME=D0,D1,...`` options as a dict (UsageError on a malformed one)."""
    shapes = {}
    for item in items:
        name, sep, dims = item.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(",")) if sep and name else None
        except ValueError:
            shape = None
        if shape is None or any(d < 1 for d in shape):
            raise UsageError(f"--shape {item!r}: expected INPUT=D0,D1,... with positive sizes, "
                             "e.g. --shape input=1,3,224,224")
        shapes[name] = shape
    return shapes or None


def _load(ns):
    try:
        Target(ns.target)
    except CompilerError as err:
        raise UsageError(f"--target: {err}") from None
    from compiler.frontend import from_onnx  # needs the [onnx] extra; its error says so

    return from_onnx(ns.model, shape=parse_shapes(ns.shape))


def cmd_tune_model(ns) -> int:
    """``autotune tune-model``: the model's tasks tuned with one budget; the exit status."""
    from autotune.commands import measure_options  # the one place --cluster and --timeout mean workers

    graph = _load(ns)
    tasks = autotune.extract_tasks(graph, ns.target)
    _out(f"Model {graph.name} ({os.path.basename(ns.model)}): {tasks.report()}")
    if not tasks:
        _out("nothing to tune: no kernel of this model has a template")
        return EXIT_OK
    budget = ns.trials * len(tasks)
    _out(f"Tuning {len(tasks)} tasks: {budget} trials in all; log {db.hide_passwords(ns.db)}")
    options = measure_options(ns)
    progress = sys.stderr.isatty() if ns.progress is None else ns.progress
    start = time.perf_counter()
    try:
        # Batches no larger than a task's share, so that every task gets its first batch.
        batch = min(ns.trials, 16 if ns.tuner in ("xgb", "ga") else 8)
        results = autotune.tune_tasks(tasks.tasks, trials=budget, tuner=ns.tuner, db=ns.db,
                                      measure_option=options, seed=ns.seed, progress=progress,
                                      weights=tasks.weights, batch_size=batch)
    finally:
        options.close()
    wall = time.perf_counter() - start
    _out()
    estimate, failed, missing = 0.0, 0, 0
    rows = []
    for t, r in zip(tasks, results):
        ok = r.best_cost is not None and r.best_cost != float("inf")
        failed += not ok and r.trials > 0
        missing += not ok
        estimate += t.weight * r.best_cost if ok else 0.0
        best = f"{r.best_cost * 1e3:.3f} ms" if ok else ("no working config" if r.trials else "not reached")
        rows.append(f"  x{t.weight:<3d} {best:>17}  {r.trials:4d} trials  {t.task.workload_name}")
    _out("\n".join(rows))
    note = f" (without {missing} task(s) that have no result)" if missing else ""
    _out(f"estimated latency of the tuned kernels {estimate * 1e3:.3f} ms{note}; tuning took {wall:.0f} s")
    interrupted = any(r.stopped == "interrupted" for r in results)
    shapes = "".join(f" --shape {shlex.quote(s)}" for s in ns.shape)
    _out(f"next: autotune build-model {shlex.quote(ns.model)}{shapes} --db {shlex.quote(ns.db)} -o model.so")
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILURE if failed else EXIT_OK


def cmd_build_model(ns) -> int:
    """``autotune build-model``: the model built with the log and exported; the exit status."""
    out_dir = os.path.dirname(os.path.abspath(ns.out))
    if not os.path.isdir(out_dir):
        raise OSError(f"cannot write {ns.out}: no directory {out_dir}")
    if ns.db and "://" not in ns.db and not os.path.exists(ns.db):
        raise db.TuningLogError(f"no tuning log at {ns.db}")
    graph = _load(ns)
    start = time.perf_counter()
    module = autotune.build_model(graph, ns.target, db=ns.db, name=ns.name)
    module.export_library(ns.out)
    info = module.attrs["model"]
    kernels = info["kernels"]
    tuned = sum(1 for k in kernels if k["schedule"].endswith(": tuned"))
    templated = sum(1 for k in kernels if ":" in k["schedule"])
    mib = 1 << 20
    _out(f"built {graph.name}: {sum(k['calls'] for k in kernels)} kernel calls, {len(kernels)} distinct "
         f"kernels ({tuned} of {templated} templated ones tuned), in {time.perf_counter() - start:.1f} s")
    _out(f"memory: workspace {info['workspace_bytes'] / mib:.2f} MiB (without reuse "
         f"{info['unshared_bytes'] / mib:.2f} MiB), weights {info['constant_bytes'] / mib:.2f} MiB")
    ins = ", ".join(f"{i['name']} {i['dtype']}{i['shape']}" for i in info["inputs"])
    outs = ", ".join(f"{o['name']} {o['dtype']}{o['shape']}" for o in info["outputs"])
    _out(f"wrote {ns.out}: entry {module.entry_name}({ins} -> {outs}); load it with "
         f"compiler.runtime.load_module({ns.out!r})")
    return EXIT_OK
