"""The work done inside workers: building a candidate, and checking and timing one.

:func:`build` and :func:`run` take a request of :mod:`measure.protocol` and return
its reply. They run in local workers (:mod:`measure.worker_main`), in Ray tasks and
in the sandbox processes of Ray actors; tasks arrive as JSON and are rebuilt here
(templates only the tuner can import arrive by value).

Candidates of a backend whose code runs on a device other than the host (CUDA: ``"ptx"``
artifacts) run on the worker's device ``device_id`` (default 0: for CUDA the first of
``CUDA_VISIBLE_DEVICES``, which is how a Ray actor with ``num_gpus=1`` sees its GPU): inputs
are copied to the device once per task, outputs start poisoned, the result is checked on
the host and the time comes from the device's own clock (the module's ``time_evaluator``:
CUDA events). Without a usable device (no pycuda, driver or GPU) the candidate gets a
runtime-error reply that says so. After a device error the process may be unusable (a
spoilt CUDA context), so the reply asks for a fresh worker (``replace_worker``).

A run worker keeps the data of the last few tasks: inputs drawn once per task with a
fixed seed, and the expected outputs, from the template's numpy reference or, for a
template without one, from its compute definition run on the CPU, the template's own
schedule dropped. :func:`run` makes them when a request names a task it has no data for,
then calls ``on_prepared(timeout)``, which starts the candidate's own clock, and goes on to
check and time it in the same call.
"""

from __future__ import annotations

import collections
import os
import socket
import time

import numpy as np

import compiler  # noqa: F401  (workers import everything up front)
import search_spaces  # noqa: F401  (registers the built-in templates)
from compiler import backends, te
from compiler.runtime.device import device_memory
from compiler.runtime.threads import num_threads
from compiler.runtime.timer import FLUSH_MODEL
from compiler.target import default_target
from measure.artifact import build_artifact, device_type_of, load_artifact
from measure.contention import BUSY_SHARE, CpuSample
from measure.errors import SimulatedDeviceError
from measure.protocol import BuildReply, BuildRequest, RunReply, RunRequest, task_key
from measure.records import ErrorKind
from search_spaces import is_residual_argument
from search_spaces.errors import InstantiationError, SearchSpaceError
from search_spaces.task import Task

__all__ = ["build", "run", "prepare_task", "compare_outputs", "worker_name", "SEED", "CALLS"]

SEED = 20240601          # the inputs of every task are drawn from this seed
_KEEP_TASKS = 4          # task data kept per run worker
_tasks: collections.OrderedDict = collections.OrderedDict()
_broken: dict = {}       # task key -> why its data cannot be made here

# A timing beside other work (more than BUSY_SHARE of a core) is taken again: on a machine whose
# cores the kernel uses, another process collapses the timing, and busy moments often pass.
TIMINGS = 3              # timings of a candidate at most while they are busy
RETRY_AFTER_S = 0.05     # the pause before timing again
BUSY_STREAK = 2          # candidates in a row busy throughout: the load lasts, retrying stops
_busy = {"streak": 0}    # candidates in a row that stayed busy in this worker


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# ---------------------------------------------------------------------------- building


def build(request: BuildRequest) -> BuildReply:
    """Rebuild the task and config of ``request`` and compile them; Python errors become
    error replies."""
    start = time.perf_counter()
    kind, error, artifact = None, None, None
    try:
        task = Task.from_json(request.task, allow_code=True)
        artifact = build_artifact(task, task.config_space.from_json(request.config))
    except (InstantiationError, SearchSpaceError) as exc:
        kind, error = ErrorKind.INSTANTIATION_ERROR, f"{type(exc).__name__}: {exc}"
    except Exception as exc:
        kind, error = ErrorKind.COMPILE_ERROR, f"{type(exc).__name__}: {exc}"
    return BuildReply(artifact, error, time.perf_counter() - start, kind, worker_name())


# ---------------------------------------------------------------------------- task data


class _TaskData:
    def __init__(self, inputs: list, expected: list | None):
        self.inputs = inputs
        self.expected = expected
        self.on_device: dict = {}  # device id -> the inputs as CUDA arrays


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


def prepare_task(task: Task, check: bool) -> _TaskData:
    """The inputs of ``task`` (and its expected outputs when ``check``), made once and kept.

    Without a numpy reference, the expected outputs come from the template's compute
    definition built for the CPU with a schedule of its own (:func:`_compute_reference`), so
    they do not depend on any config of the space being valid on the target."""
    key = task_key(task.to_json(by_value=True), check)
    data = _tasks.get(key)
    if data is not None:
        _tasks.move_to_end(key)
        return data
    if task.reference is not None:
        inputs, expected = task.reference_data(np.random.default_rng(SEED))
        data = _TaskData([np.ascontiguousarray(a) for a in inputs], list(expected) if check else None)
    else:
        data = _compute_reference(task, check)
    _tasks[key] = data
    while len(_tasks) > _KEEP_TASKS:
        _tasks.popitem(last=False)
    return data


def _compute_reference(task: Task, check: bool) -> _TaskData:
    """Random inputs for ``task`` and, when ``check``, the outputs of its compute definition.

    The tensors come from the default config, but its schedule is dropped: a fresh schedule
    of the output operations (spatial loops of each computed output fused and run in
    parallel) is built for the CPU. A GPU template's default config may well not fit a
    block (too much shared memory, too many threads); the computation it describes always
    runs on the CPU."""
    _, args = task.instantiate(None)
    outputs = [t.op for t in args if not isinstance(t.op, te.PlaceholderOp)]
    s = te.create_schedule(outputs)
    for op in outputs:
        if isinstance(op, te.ComputeOp) and op.axis:
            s[op].parallel(s[op].fuse(*op.axis) if len(op.axis) > 1 else op.axis[0])
    module = compiler.build(s, args, target=default_target(), name="reference")
    info = module.function_info(module.entry_name)
    rng = np.random.default_rng(SEED)
    buffers = _concrete_buffers(info)
    written = set(info.written)
    inputs = [_random_array(rng, shape, dt) for pos, shape, dt in buffers if pos not in written]
    expected = None
    if check:
        expected = [_poisoned(shape, dt) for pos, shape, dt in buffers if pos in written]
        module(*_arguments(info, inputs, expected))
    return _TaskData(inputs, expected)


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


def run(request: RunRequest, on_prepared=None) -> RunReply:
    """Check and time the artifact of ``request``, first making the task's data if this
    worker has none; ``on_prepared(timeout)`` is called once the data is there."""
    try:
        device_type = device_type_of(request.artifact)
    except compiler.CompilerError as exc:
        why = f"cannot load the candidate: {exc}"
        return RunReply.failure(ErrorKind.RUNTIME_ERROR, why, worker=worker_name())
    if device_type != "cpu":
        why = device_memory(device_type).unavailable_reason()
        if why is not None:
            kind = backends.for_artifact(request.artifact).kind
            why = f"cannot run a {kind!r} candidate on {worker_name()}: no usable GPU ({why})"
            return RunReply.failure(ErrorKind.RUNTIME_ERROR, why, worker=worker_name())
    data = _data_for(request)
    if isinstance(data, RunReply):
        return data
    if on_prepared is not None:
        on_prepared(request.timeout)
    start = time.perf_counter()
    reply = _run_candidate(data, request, device_type)
    reply.run_time, reply.worker = time.perf_counter() - start, worker_name()
    return reply


def _data_for(request: RunRequest) -> _TaskData | RunReply:
    """The task data of ``request``, or the error reply of a task whose data cannot be made."""
    key = request.task_key
    data = _tasks.get(key)
    if data is not None:
        _tasks.move_to_end(key)
        return data
    if key not in _broken:
        name = request.task.get("template")
        try:
            task = Task.from_json(request.task, allow_code=True)
            name = task.workload_name
            return prepare_task(task, request.check_correctness)
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
            _broken[key] = f"cannot make the inputs and expected outputs of {name}: {why}"
    return RunReply.failure(ErrorKind.RUNTIME_ERROR, _broken[key], worker=worker_name())


def _run_candidate(data: _TaskData, request: RunRequest, device_type: str) -> RunReply:
    """:func:`run` once the task's data is there: on the host, or on device ``request.device_id``
    of ``device_type`` (a GPU), where the inputs are copied once per task and device."""
    # A launch that failed (an illegal address, a trap) leaves a CUDA context unusable: a device
    # candidate's error asks for a fresh worker.
    on_device = device_type != "cpu"
    dev = compiler.device(device_type, int(request.device_id or 0)) if on_device else None
    try:
        module = load_artifact(request.artifact)
        info = module.function_info(module.entry_name)
        buffers = _concrete_buffers(info)
        written = set(info.written)
        outputs = [_poisoned(shape, dt) for pos, shape, dt in buffers if pos in written]
        inputs = data.inputs
        if on_device:
            if dev.device_id not in data.on_device:
                data.on_device[dev.device_id] = [compiler.nd.array(x, dev) for x in data.inputs]
            inputs = data.on_device[dev.device_id]
            outputs = [compiler.nd.array(x, dev) for x in outputs]
        args = _arguments(info, inputs, outputs)
    except Exception as exc:
        why = f"cannot load the candidate: {type(exc).__name__}: {exc}"
        return RunReply.failure(ErrorKind.RUNTIME_ERROR, why, replace_worker=on_device)
    try:
        if request.check_correctness:
            module(*args)
            # Copying a device's outputs back synchronises: a failed launch raises here.
            got = [x.numpy() for x in outputs] if on_device else outputs
            names = [info.signature.args[pos].name for pos, _, _ in buffers if pos in written]
            wrong = compare_outputs(got, data.expected, names)
            if wrong is not None:
                return RunReply.failure(ErrorKind.WRONG_ANSWER, wrong)
        if on_device:  # the device's own clock, which work on the host does not slow
            costs, busy = _time(module, args, request, dev), 0.0
        else:
            costs, busy = _time_quietly(module, args, request)
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        return RunReply.failure(ErrorKind.RUNTIME_ERROR, why, replace_worker=on_device)
    return RunReply(costs, busy=busy)


def _time_quietly(module, args: list, request: RunRequest) -> tuple[tuple, float]:
    """Time on the host, again (up to :data:`TIMINGS` times in all, :data:`RETRY_AFTER_S` apart)
    while other work took more than :data:`BUSY_SHARE` of a core from the timing; the costs of
    the quietest timing, and the share of a core taken from it. Once :data:`BUSY_STREAK`
    candidates in a row stayed busy however often they were timed, the load is lasting, and
    candidates are timed once each until a timing is quiet again."""
    threads = num_threads()
    kept = None
    for attempt in range(1 if _busy["streak"] >= BUSY_STREAK else TIMINGS):
        if attempt:
            time.sleep(RETRY_AFTER_S)
        before = CpuSample.now()
        costs = _time(module, args, request)
        busy = before.others_busy(CpuSample.now(), threads)
        if kept is None or busy < kept[1]:
            kept = (costs, busy)
        if busy <= BUSY_SHARE:
            break
    _busy["streak"] = _busy["streak"] + 1 if kept[1] > BUSY_SHARE else 0
    return kept


def _residuals(info) -> tuple[int, ...]:
    """Positions among the buffer arguments of the function ``info`` describes of its epilogue's
    residuals (:func:`search_spaces.is_residual_argument`)."""
    buffers = [spec for spec in info.signature.args if spec.kind == "buffer"]
    return tuple(k for k, spec in enumerate(buffers) if is_residual_argument(spec.name))


def _time(module, args: list, request: RunRequest, dev=None) -> tuple:
    cooldown = request.cooldown_ms / 1e3
    repeat = request.repeat
    # Timed as inside a model, a residual stays in the caches: the kernels before it just wrote it.
    info = module.function_info(module.entry_name)
    warm = {"warm": _residuals(info)} if request.cache_flush == FLUSH_MODEL and dev is None else {}
    timer = module.time_evaluator(module.entry_name, dev, number=request.number,
                                  repeat=1 if cooldown else repeat, min_repeat_ms=request.min_repeat_ms,
                                  cache_flush=request.cache_flush, **warm)
    costs = []
    for k in range(1 if not cooldown else repeat):
        if k:
            time.sleep(cooldown)
        result = timer(*args)
        if result.simulated:  # never a cost: raised, the candidate gets an error instead
            raise SimulatedDeviceError("timed on a simulated device (COMPILER_CUDA_SIMULATOR=1 in the run "
                                       "worker); simulated timings are refused")
        costs.extend(result.results)
    return tuple(costs)


# ---------------------------------------------------------------------------- in a measurement worker


def _build_call(request: dict, phase) -> dict:
    return build(BuildRequest.from_json(request)).to_json()


def _run_call(request: dict, phase) -> dict:
    return run(RunRequest.from_json(request), on_prepared=lambda timeout: phase("run", timeout)).to_json()


#: The calls a measurement worker (:mod:`measure.worker_main`) answers: a request's JSON in, the
#: reply's JSON out.
CALLS = {"build": _build_call, "run": _run_call}
