"""The work done inside worker processes: building a candidate, and checking and timing one.

These functions run in spawn workers (:mod:`measure.pool`), in Ray tasks and in the
sandbox processes of Ray actors; they take plain data and a task (which pickles by
reference, or by value for templates defined in ``__main__``) and return plain data.

CUDA candidates (``"ptx"`` artifacts) run on the worker's GPU, ``options["device_id"]``
(default 0: the first of ``CUDA_VISIBLE_DEVICES``, which is how a Ray actor with
``num_gpus=1`` sees its GPU), in the primary context of that GPU in this process:
inputs are copied to the device once per task, outputs start poisoned, the result is
checked on the host and the time comes from CUDA events (the module's
``time_evaluator``). Without pycuda or a GPU the candidate gets a runtime-error result
that says so. After a CUDA error the context of the process may be unusable, so the
reply asks the runner to replace the worker.

A run worker keeps the data of the last few tasks: inputs drawn once per task with a
fixed seed, and the expected outputs, from the template's numpy reference or, for a
template without one, from running its default config. :func:`run_candidate` answers
``("unprepared",)`` for a task it has no data for; the runner then calls
:func:`prepare_task` (under a longer timeout) and asks again.
"""

from __future__ import annotations

import collections
import os
import socket
import time

import numpy as np

import compiler  # noqa: F401  (workers import everything up front)
import search_spaces  # noqa: F401  (registers the built-in templates)
from measure.artifact import build_artifact, load_artifact
from measure.records import BuildResult, ErrorKind

__all__ = ["build_candidate", "prepare_task", "run_candidate", "compare_outputs", "worker_name",
           "cuda_device_count", "SEED"]

SEED = 20240601          # the inputs of every task are drawn from this seed
_KEEP_TASKS = 4          # task data kept per run worker
_tasks: collections.OrderedDict = collections.OrderedDict()


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# ---------------------------------------------------------------------------- building


def build_candidate(task, config_json: dict) -> BuildResult:
    """Instantiate and compile one config; Python errors become error results."""
    from search_spaces.errors import InstantiationError, SearchSpaceError

    start = time.perf_counter()
    kind, error, artifact = None, None, None
    try:
        config = task.config_space.from_json(config_json)
        artifact = build_artifact(task, config)
    except (InstantiationError, SearchSpaceError) as exc:
        kind, error = ErrorKind.INSTANTIATION_ERROR, f"{type(exc).__name__}: {exc}"
    except Exception as exc:
        kind, error = ErrorKind.COMPILE_ERROR, f"{type(exc).__name__}: {exc}"
    return BuildResult(artifact, error, time.perf_counter() - start, kind, worker_name())


# ---------------------------------------------------------------------------- task data


class _TaskData:
    def __init__(self, inputs: list, expected: list | None):
        self.inputs = inputs
        self.expected = expected
        self.on_device: dict = {}  # device id -> the inputs as CUDA arrays


def task_key(task, check: bool) -> tuple:
    return (task.template, task.args, task.target, bool(check))


def _random_array(rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.uniform(-1, 1, size=shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dt)
    return rng.integers(0, 8, size=shape).astype(dt)  # small: safe as indices and in products


def _concrete_buffers(info) -> list:
    """``[(position, shape, dtype)]`` of the buffer arguments; measuring needs fixed shapes."""
    out = []
    for pos, spec in enumerate(info.signature.args):
        if spec.kind != "buffer" or any(not isinstance(d, int) for d in spec.shape):
            raise ValueError(f"{info.name}: argument {spec.name!r} has no fixed shape; measured tasks need "
                             "concrete shapes")
        out.append((pos, tuple(spec.shape), spec.dtype))
    return out


def prepare_task(task, check: bool, device_id: int = 0) -> None:
    """Draw the inputs of ``task`` (and its expected outputs when ``check``) and keep them.

    Without a reference, the default config computes the expected outputs (on GPU
    ``device_id`` for CUDA tasks)."""
    key = task_key(task, check)
    if key in _tasks:
        return
    if task.reference is not None:
        inputs, expected = task.reference_data(np.random.default_rng(SEED))
        data = _TaskData([np.ascontiguousarray(a) for a in inputs], list(expected) if check else None)
    else:
        # No reference: the default config computes the expected outputs.
        s, args = task.instantiate(None)
        module = compiler.build(s, args, target=task.target)
        info = module.function_info(module.entry_name)
        rng = np.random.default_rng(SEED)
        buffers = _concrete_buffers(info)
        written = set(info.written)
        inputs = [_random_array(rng, shape, dt) for pos, shape, dt in buffers if pos not in written]
        expected = None
        if check:
            outputs = [_poisoned(shape, dt) for pos, shape, dt in buffers if pos in written]
            if module.type_key == "cuda_host":
                dev = compiler.cuda(device_id)
                on_device = [compiler.nd.array(x, dev) for x in outputs]
                module(*_arguments(info, [compiler.nd.array(x, dev) for x in inputs], on_device))
                outputs = [x.numpy() for x in on_device]
            else:
                module(*_arguments(info, inputs, outputs))
            expected = outputs
        data = _TaskData(inputs, expected)
    _tasks[key] = data
    while len(_tasks) > _KEEP_TASKS:
        _tasks.popitem(last=False)


def _poisoned(shape, dtype) -> np.ndarray:
    """An array of values no kernel should write (NaN, or the dtype's extreme for integers)."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.full(shape, np.nan, dtype=dt)
    if dt.kind == "b":
        return np.ones(shape, dtype=dt)
    return np.full(shape, np.iinfo(dt).max, dtype=dt)


def _arguments(info, inputs: list, outputs: list) -> list:
    """Inputs at the positions the function reads, outputs where it writes, in order."""
    written = set(info.written)
    n_out = len(written)
    if len(inputs) + n_out != len(info.signature.args) or len(outputs) != n_out:
        raise ValueError(f"{info.name} takes {len(info.signature.args) - n_out} inputs and {n_out} outputs; "
                         f"the reference gives {len(inputs)} inputs and {len(outputs)} outputs")
    ins, outs = iter(inputs), iter(outputs)
    return [next(outs) if pos in written else next(ins) for pos in range(len(info.signature.args))]


# ---------------------------------------------------------------------------- checking


def _tolerance(dtype: np.dtype) -> float:
    return {2: 1e-2, 4: 1e-4}.get(dtype.itemsize, 1e-7)


def compare_outputs(got: list, expected: list, names: list) -> str | None:
    """None when every output matches its expected array, else what differs.

    Floats match within a relative tolerance for their width (1e-2 for 16-bit, 1e-4 for
    32-bit, 1e-7 for 64-bit), plus that tolerance times the largest expected magnitude
    as an absolute one (sums that cancel); NaN matches NaN. Other dtypes match exactly.
    """
    for k, (g, e) in enumerate(zip(got, expected)):
        name = names[k] if k < len(names) else f"output {k}"
        e = np.asarray(e)
        if g.shape != e.shape:
            return f"{name}: shape {g.shape} differs from the expected {e.shape}"
        if e.dtype.kind == "f":
            rtol = _tolerance(e.dtype)
            finite = np.abs(e[np.isfinite(e)], dtype=np.float64)
            atol = rtol * (float(finite.max()) if finite.size else 1.0)
            bad = ~np.isclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol,
                              equal_nan=True)
        else:
            bad = g != e
        count = int(np.count_nonzero(bad))
        if count:
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            return (f"{name}: {count} of {e.size} elements differ from the reference; first at {first}: "
                    f"got {g[first]!r}, expected {e[first]!r}")
    return None


# ---------------------------------------------------------------------------- running


def run_candidate(task, artifact, options: dict) -> tuple:
    """Load, check and time one artifact.

    Returns ``("ok", costs)``, ``("error", ErrorKind value, message)`` (with a fourth
    item, True, when the worker should be replaced) or ``("unprepared",)``. ``options``:
    number, repeat, min_repeat_ms, cooldown_ms, cache_flush, check_correctness, and
    device_id for CUDA candidates.
    """
    if artifact.kind == "ptx":
        return _run_cuda(task, artifact, options)
    check = options["check_correctness"]
    data = _tasks.get(task_key(task, check))
    if data is None:
        return ("unprepared",)
    try:
        module = load_artifact(artifact)
        info = module.function_info(module.entry_name)
        buffers = _concrete_buffers(info)
        written = set(info.written)
        outputs = [_poisoned(shape, dt) for pos, shape, dt in buffers if pos in written]
        args = _arguments(info, data.inputs, outputs)
    except Exception as exc:
        why = f"cannot load the candidate: {type(exc).__name__}: {exc}"
        return ("error", ErrorKind.RUNTIME_ERROR.value, why)
    try:
        if check:
            module(*args)
            names = [info.signature.args[pos].name for pos, _, _ in buffers if pos in written]
            wrong = compare_outputs(outputs, data.expected, names)
            if wrong is not None:
                return ("error", ErrorKind.WRONG_ANSWER.value, wrong)
        costs = _time(module, args, options)
    except Exception as exc:
        return ("error", ErrorKind.RUNTIME_ERROR.value, f"{type(exc).__name__}: {exc}")
    return ("ok", costs)


def cuda_device_count() -> int:
    """How many GPUs this process sees (0 without pycuda, a driver or a GPU)."""
    from compiler.runtime.cuda import driver, unavailable_reason

    if unavailable_reason() is not None:
        return 0
    return int(driver().Device.count())


def _run_cuda(task, artifact, options: dict) -> tuple:
    """:func:`run_candidate` for a ``"ptx"`` artifact, on GPU ``options["device_id"]``."""
    from compiler.runtime.cuda import unavailable_reason

    why = unavailable_reason()
    if why is not None:
        return ("error", ErrorKind.RUNTIME_ERROR.value,
                f"cannot run a CUDA candidate on {worker_name()}: no usable GPU ({why})")
    check = options["check_correctness"]
    data = _tasks.get(task_key(task, check))
    if data is None:
        return ("unprepared",)
    device_id = int(options.get("device_id", 0))
    dev = compiler.cuda(device_id)
    try:
        module = load_artifact(artifact)
        info = module.function_info(module.entry_name)
        buffers = _concrete_buffers(info)
        written = set(info.written)
        if device_id not in data.on_device:
            data.on_device[device_id] = [compiler.nd.array(x, dev) for x in data.inputs]
        outputs = [compiler.nd.array(_poisoned(shape, dt), dev)
                   for pos, shape, dt in buffers if pos in written]
        args = _arguments(info, data.on_device[device_id], outputs)
    except Exception as exc:
        why = f"cannot load the candidate: {type(exc).__name__}: {exc}"
        return ("error", ErrorKind.RUNTIME_ERROR.value, why, True)
    try:
        if check:
            module(*args)
            got = [x.numpy() for x in outputs]  # synchronises: a failed launch raises here
            names = [info.signature.args[pos].name for pos, _, _ in buffers if pos in written]
            wrong = compare_outputs(got, data.expected, names)
            if wrong is not None:
                return ("error", ErrorKind.WRONG_ANSWER.value, wrong)
        costs = _time(module, args, options, dev)
    except Exception as exc:
        # A launch that failed (an illegal address, a trap) leaves the context unusable: ask
        # for a fresh worker.
        return ("error", ErrorKind.RUNTIME_ERROR.value, f"{type(exc).__name__}: {exc}", True)
    return ("ok", costs)


def _time(module, args: list, options: dict, dev=None) -> tuple:
    cooldown = options.get("cooldown_ms", 0) / 1e3
    repeat = options["repeat"]
    timer = module.time_evaluator(module.entry_name, dev, number=options["number"],
                                  repeat=1 if cooldown else repeat, min_repeat_ms=options["min_repeat_ms"],
                                  cache_flush=options["cache_flush"])
    if not cooldown:
        return tuple(timer(*args).results)
    costs = []
    for k in range(repeat):
        if k:
            time.sleep(cooldown)
        costs.extend(timer(*args).results)
    return tuple(costs)
