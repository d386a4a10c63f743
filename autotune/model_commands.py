"""The ``autotune tune-model``, ``build-model`` and ``run-model`` commands (see :mod:`autotune.commands`)."""

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

__all__ = ["cmd_tune_model", "cmd_build_model", "cmd_run_model", "parse_shapes"]


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
    from compiler.graph import InputShapeError

    try:
        return from_onnx(ns.model, shape=parse_shapes(ns.shape))
    except InputShapeError as err:
        options = " ".join(f"--shape {name}={','.join(f'D{k}' for k in range(len(dims or (0,))))}"
                           for name, dims in err.unbound.items())
        raise UsageError(f"the model does not fix the shape of input(s) {err.listed()}: give each one with "
                         f"{options} (every dimension a number)") from None


def cmd_tune_model(ns) -> int:
    """``autotune tune-model``: the model's tasks tuned with one budget, then the model built and
    timed beside its estimated latency; the exit status."""
    from autotune.algorithms import layers_to_choose
    from autotune.commands import measure_options  # the one place --cluster and --timeout mean workers
    from autotune.model import DEFAULT_TRIALS_PER_TASK, DEFAULT_WARM_START, model_timing

    graph = _load(ns)
    algorithms = _measured_algorithms(ns, graph) if ns.measure_algorithms else None
    tasks = autotune.extract_tasks(graph, ns.target, algorithms=algorithms)
    _out(f"Model {graph.name} ({os.path.basename(ns.model)}): {tasks.report()}")
    if not tasks:
        _out("nothing to tune: no kernel of this model has a template")
        return EXIT_OK
    per_task = ns.trials if ns.trials is not None else (None if ns.time_budget else DEFAULT_TRIALS_PER_TASK)
    trials = None if per_task is None else per_task * len(tasks)
    budget = [f"{trials} trials in all (the log's earlier ones included)"] if trials is not None else []
    budget += [f"{_duration_text(ns.time_budget)}"] if ns.time_budget else []
    timing = model_timing(ns.target, ns.cache_flush)
    timed = ("weights evicted from the caches and the input written by the threads before each call"
             if timing.get("cache_flush") else "caches warm")
    _out(f"Tuning {len(tasks)} tasks: {' or '.join(budget)}, scheduler {ns.scheduler}; "
         f"log {db.hide_passwords(ns.db)}; candidates timed with {timed}")
    options = measure_options(ns, timing)
    progress = sys.stderr.isatty() if ns.progress is None else ns.progress
    warm = DEFAULT_WARM_START if ns.warm_start is None else ns.warm_start
    try:
        result = autotune.tune_model(tasks, ns.target, trials=trials, time_budget=ns.time_budget, db=ns.db,
                                     tuner=ns.tuner, measure_option=options, scheduler=ns.scheduler,
                                     warm_start=warm, seed=ns.seed, progress=progress)
    except ConnectionError as err:
        if ns.cluster:
            from autotune.commands import cluster_error

            raise cluster_error(ns, err) from err
        raise
    finally:
        options.close()
    _out()
    _out(result.report())
    if ns.deployed and not result.interrupted and not result.missing:
        module = autotune.build_model(graph, ns.target, db=ns.db, algorithms=algorithms)
        _out(autotune.measure_deployed(module).against(result.estimated_latency))
    shapes = "".join(f" --shape {shlex.quote(s)}" for s in ns.shape)
    layers = layers_to_choose(graph, ns.target)
    measure = " --measure-algorithms" if layers else ""
    _out(f"next: autotune build-model {shlex.quote(ns.model)}{shapes} --db {shlex.quote(ns.db)}{measure} "
         "-o model.so" + (f"  ({len(layers)} 3x3 layers can run direct or by Winograd: "
                          "--measure-algorithms times both inside the model and builds each the faster way)"
                          if layers else ""))
    if result.interrupted:
        _out("interrupted: every finished trial is in the log; the same command run again finishes "
             "the budget of trials (a time budget starts again)")
        return EXIT_INTERRUPTED
    failed = any(r.trials and r.best_config is None for r in result.results)
    return EXIT_FAILURE if failed else EXIT_OK


def _no_log_at(where: str) -> bool:
    """Whether ``where`` names a log file that does not exist (a database URL is not checked)."""
    return "://" not in where and not os.path.exists(where)


def _measured_algorithms(ns, graph) -> dict[str, int] | None:
    """The plan of 3x3 layers that ran faster inside the model with the log's configs (None: the
    rule's), reported; a UsageError where there is no log to take configs from."""
    if _no_log_at(ns.db):
        raise UsageError(f"--measure-algorithms compares the layers as the log {ns.db} tunes them, and there "
                         "is no such log: tune the model once without it first")
    _out("timing each 3x3 layer direct and by Winograd inside the model...")
    choices = autotune.choose_algorithms(graph, ns.target, ns.db)
    _out(choices.report())
    return choices.algorithms or None


def _duration_text(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def cmd_build_model(ns) -> int:
    """``autotune build-model``: the model built with the log and exported; the exit status."""
    out_dir = os.path.dirname(os.path.abspath(ns.out))
    if not os.path.isdir(out_dir):
        raise OSError(f"cannot write {ns.out}: no directory {out_dir}")
    if ns.db and _no_log_at(ns.db):
        raise db.TuningLogError(f"no tuning log at {ns.db}")
    graph = _load(ns)
    start = time.perf_counter()
    algorithms = None
    if ns.measure_algorithms:
        _out("timing each 3x3 layer direct and by Winograd inside the model...")
        choices = autotune.choose_algorithms(graph, ns.target, ns.db)
        _out(choices.report())
        algorithms = choices.algorithms
    module = autotune.build_model(graph, ns.target, db=ns.db, name=ns.name, algorithms=algorithms)
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
    _out(f"wrote {ns.out}: entry {module.entry_name}({_signature(info['inputs'])} -> "
         f"{_signature(info['outputs'])}); load it with "
         f"compiler.runtime.load_module({ns.out!r})")
    _out(f"next: autotune run-model {shlex.quote(ns.out)} --profile   (run and time it; --inputs IN.npz for "
         f"your own inputs)")
    return EXIT_OK


def cmd_run_model(ns) -> int:
    """``autotune run-model``: a model library loaded alone, as a deployment loads it, run on the
    inputs given (or random ones), its outputs summarised and written, and timed; the exit status."""
    import numpy as np

    import compiler
    from autotune.commands import _err, _print_json  # (that module imports this one)
    from autotune.model import duration_text
    from compiler.graph import GraphError, model_info, profile, random_inputs

    if not os.path.isfile(ns.library):
        raise FileNotFoundError(f"no model library at {ns.library}")
    # numpy.savez names the file so; checked before anything runs
    outputs_path = ns.outputs and (ns.outputs if ns.outputs.endswith(".npz") else f"{ns.outputs}.npz")
    out_dir = os.path.dirname(os.path.abspath(outputs_path or "."))
    if outputs_path and not os.path.isdir(out_dir):
        raise OSError(f"cannot write {outputs_path}: no directory {out_dir}")
    module = compiler.runtime.load_module(ns.library)
    try:
        info = model_info(module)
    except GraphError:
        raise UsageError(f"{ns.library} holds kernels, not a model (no model description): run-model runs "
                         f"libraries that build-model wrote") from None
    say = _err if ns.json else _out  # with --json, stdout holds the JSON document alone
    say(f"loaded {ns.library}: model {info['name']}, entry {module.entry_name}("
        f"{_signature(info['inputs'])} -> {_signature(info['outputs'])}), {len(info['calls'])} kernel calls")
    if ns.inputs:
        inputs = _inputs_from(ns.inputs, info["inputs"])
        say(f"inputs: from {ns.inputs}")
    else:
        inputs = random_inputs(module)
        say("inputs: random (seed 0; integers zero; give --inputs IN.npz for your own)")
    outputs = compiler.graph.run(module, *inputs)
    say("outputs:")
    stats = [_stats(value) for value in outputs]
    for spec, value, numbers in zip(info["outputs"], outputs, stats, strict=True):
        say(f"  {_signature([spec])}: {_summary(value, numbers)}")
    if outputs_path:
        named = zip((spec["name"] for spec in info["outputs"]), outputs, strict=True)
        np.savez(outputs_path, **dict(named))
        say(f"wrote {outputs_path}")
    number, min_repeat_ms = ns.number or 1, 0 if ns.number else 50
    timer = module.time_evaluator(module.entry_name, number=number, repeat=ns.repeat,
                                  min_repeat_ms=min_repeat_ms)
    result = timer(*inputs, *outputs)
    threads = compiler.runtime.threads.num_threads()
    calls = f"{number} call{'s' if number > 1 else ''}" if ns.number else "calls over 50 ms or more"
    say(f"latency: median {duration_text(result.median)} (mean {duration_text(result.mean)}, min "
        f"{duration_text(result.min)}, max {duration_text(result.max)}; {ns.repeat} timings, each the "
        f"mean of {calls}; {threads} threads)")
    times = profile(module, repeat=ns.repeat, in_model=True) if ns.profile else None
    if times is not None:
        say(_profile_table(info, times))
    if ns.json:
        timing = {"number": ns.number, "min_repeat_ms": min_repeat_ms, "threads": threads}
        _print_json(_run_summary(ns, module, info, stats, outputs_path, result, timing, times))
    return EXIT_OK


def _run_summary(ns, module, info, stats, outputs_path, result, timing: dict, times) -> dict:
    """``run-model --json``'s document: what the text says, in numbers (seconds)."""
    kernels = None
    if times is not None:
        total = sum(calls * seconds for calls, seconds in times.values()) or 1.0
        schedules = {k["name"]: k["schedule"] for k in info["kernels"]}
        kernels = [{"name": name, "calls": calls, "seconds_per_call": seconds,
                    "seconds_per_run": calls * seconds, "share": calls * seconds / total,
                    "schedule": schedules.get(name)}
                   for name, (calls, seconds) in times.items()]
    return {"library": ns.library, "model": info["name"], "entry": module.entry_name,
            "inputs": info["inputs"], "inputs_from": ns.inputs or "random",
            "outputs": [{**spec, **numbers} for spec, numbers in zip(info["outputs"], stats, strict=True)],
            "outputs_written": outputs_path or None,
            "latency": {"median": result.median, "mean": result.mean, "min": result.min, "max": result.max,
                        "std": result.std, "timings": list(result.results), **timing},
            "kernels": kernels}


def _signature(specs) -> str:
    return ", ".join(f"{s['name']} {s['dtype']}{list(s['shape'])}" for s in specs)


def _stats(value) -> dict:
    """What shows at a glance whether an output is sane: the range and mean of its finite
    values, and how many are NaN or infinite (``None`` where it holds no number)."""
    import numpy as np

    if value.size == 0 or not np.issubdtype(value.dtype, np.number):
        return {"min": None, "max": None, "mean": None, "not_finite": 0}
    finite = np.isfinite(value) if np.issubdtype(value.dtype, np.floating) else np.ones(value.shape, bool)
    kept = value[finite]
    return {"min": kept.min().item() if kept.size else None, "max": kept.max().item() if kept.size else None,
            "mean": float(kept.mean()) if kept.size else None, "not_finite": int(value.size - kept.size)}


def _summary(value, stats: dict) -> str:
    """:func:`_stats` as a line."""
    if value.size == 0:
        return "empty"
    if stats["mean"] is None and not stats["not_finite"]:
        return f"{value.size} values"
    text = (f"min {stats['min']:.4g}, max {stats['max']:.4g}, mean {stats['mean']:.4g}"
            if stats["mean"] is not None else "no finite value")
    return text + (f", {stats['not_finite']} NaN or infinite" if stats["not_finite"] else "")


def _inputs_from(path: str, specs) -> list:
    """The model's inputs from the .npz file at ``path``, by name (one array under any name for a
    model of one input), each checked against what the model takes (UsageError naming it)."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise FileNotFoundError(f"--inputs: no file {path}") from None
    except (OSError, ValueError) as err:
        raise UsageError(f"--inputs {path}: not an .npz file of arrays (numpy.savez writes one): "
                         f"{err}") from None
    names = [spec["name"] for spec in specs]
    if len(specs) == 1 and len(arrays) == 1:
        arrays = {names[0]: next(iter(arrays.values()))}
    missing = [n for n in names if n not in arrays]
    unknown = [n for n in arrays if n not in names]
    if missing or unknown:
        raise UsageError(f"--inputs {path} holds {sorted(arrays) or 'no arrays'}; the model takes "
                         f"{_signature(specs)}" + (f" (missing: {', '.join(missing)})" if missing else "")
                         + (f" (not the model's: {', '.join(unknown)})" if unknown else ""))
    inputs = []
    for spec in specs:
        value = arrays[spec["name"]]
        if list(value.shape) != list(spec["shape"]) or value.dtype != np.dtype(spec["dtype"]):
            hint = (f" (numpy's default is float64: save it as .astype({spec['dtype']!r}))"
                    if value.dtype == np.float64 and np.dtype(spec["dtype"]) != np.float64 else "")
            raise UsageError(f"--inputs {path}: {spec['name']} is {value.dtype}{list(value.shape)}; "
                             f"the model takes {spec['dtype']}{list(spec['shape'])}{hint}")
        inputs.append(np.ascontiguousarray(value))
    return inputs


def _profile_table(info, times) -> str:
    """Each kernel's calls per run, time per call and share of the kernels' time, in the model's
    order (``times``: :func:`compiler.graph.profile`'s answer)."""
    from autotune.model import duration_text

    per_run = {name: calls * seconds for name, (calls, seconds) in times.items()}
    total = sum(per_run.values()) or 1.0
    width = max(len(name) for name in times)
    schedules = {k["name"]: k["schedule"] for k in info["kernels"]}
    lines = ["each kernel inside the model (the median over runs):",
             f"  {'kernel':{width}s}  calls  {'per call':>10s}  {'per run':>10s}  share  schedule"]
    for name, (calls, seconds) in times.items():
        lines.append(f"  {name:{width}s}  {calls:5d}  {duration_text(seconds):>10s}  "
                     f"{duration_text(per_run[name]):>10s}  {per_run[name] / total:5.1%}  "
                     f"{schedules.get(name, '')}")
    lines.append(f"  {'the kernels':{width}s}  {'':5s}  {'':10s}  {duration_text(total):>10s}")
    return "\n".join(lines)
