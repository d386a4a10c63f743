"""Running and profiling a compiled model (a Module from :func:`~.build.build_graph`, or one
loaded back from its library)."""

from __future__ import annotations

import time

import numpy as np

from ..runtime.module import Module
from ..runtime.timer import FLUSH_MODEL
from .errors import GraphError

__all__ = ["run", "random_inputs", "profile", "profile_runs", "kernel_medians", "model_info",
           "split_by_template", "split_runs_by_template"]


def model_info(module: Module) -> dict:
    """What ``module.attrs["model"]`` says of a compiled model (GraphError for other modules)."""
    info = module.attrs.get("model")
    if not isinstance(info, dict):
        raise GraphError("this module is not a compiled model (it has no model description)")
    return info


def run(module: Module, *inputs) -> list[np.ndarray]:
    """Run a compiled model on ``inputs``: arrays in the model's input order, or one dict of them
    by input name (as ONNX Runtime's ``session.run(None, {name: array})`` takes them); its outputs,
    in the model's output order."""
    info = model_info(module)
    names = [i["name"] for i in info["inputs"]]
    if len(inputs) == 1 and isinstance(inputs[0], dict):
        by_name = inputs[0]
        if sorted(by_name) != sorted(names):
            missing = [n for n in names if n not in by_name]
            unknown = [n for n in by_name if n not in names]
            raise GraphError(f"model {info['name']!r} takes inputs {names}; missing {missing}, not its own "
                             f"{unknown}")
        inputs = tuple(by_name[n] for n in names)
    if len(inputs) != len(names):
        raise GraphError(f"model {info['name']!r} takes {len(names)} inputs {names}, got {len(inputs)}")
    outputs = [np.empty(o["shape"], dtype=o["dtype"]) for o in info["outputs"]]
    module(*inputs, *outputs)
    return outputs


def random_inputs(module: Module, rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """Random inputs of a compiled model, in its input order (``rng``: seed 0 where None): floats
    uniform in [-1, 1), integers zero (an index any table holds), as the kernels are profiled on."""
    rng = np.random.default_rng(0) if rng is None else rng
    return [_random_array(rng, spec["shape"], spec["dtype"]) for spec in model_info(module)["inputs"]]


def _random_array(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    if np.issubdtype(np.dtype(dtype), np.integer):
        return np.zeros(shape, dtype=dtype)
    return rng.uniform(-1, 1, size=shape).astype(dtype)


def profile(module: Module, repeat: int = 5, min_repeat_ms: float = 20.0,
            rng: np.random.Generator | None = None, cache_flush: bool | str = False,
            in_model: bool = False) -> dict[str, tuple[int, float]]:
    """Each kernel's calls per model run and its median seconds per call: ``{kernel: (calls,
    seconds)}``.

    By default each kernel is timed alone, again and again, on random arguments of its shapes:
    it then finds its weights and inputs in the caches, as it does not inside a model that
    streams all of its weights each run; ``cache_flush=True`` evicts its arguments but the first
    (its input, which the kernel before has just written) before every call, as TVM's
    ``enable_cpu_cache_flush`` does, ``cache_flush="weights"`` all but the first and the last
    (its output, a workspace buffer that other kernels have just used): its weights; and
    ``cache_flush="model"`` those but what other kernels of the model wrote (a residual: the
    model description's ``warm`` positions), and the kernel's scratch, then has the thread pool
    write its input, as the kernel before leaves it inside a model; the tuner's model timing.
    ``in_model=True`` times the kernels where they run (:func:`profile_runs`): a kernel's seconds
    are the median over the runs of its calls' time in one run, per call. Against the kernels
    timed alone, they say what the model's cache traffic costs each kernel; what the executor
    itself adds is the model's latency beyond its runs through the profiling entry, whole
    (:func:`split_runs_by_template`), not beyond the sum of each kernel's median, which leaves
    out the slow calls that every run has somewhere."""
    rng = np.random.default_rng(0) if rng is None else rng
    if in_model:
        return kernel_medians(module, profile_runs(module, repeat, min_repeat_ms, rng))
    result = {}
    for kernel in model_info(module)["kernels"]:
        name = kernel["name"]
        warm = kernel.get("warm", ()) if cache_flush == FLUSH_MODEL else ()
        timer = module.time_evaluator(name, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms,
                                      cache_flush=cache_flush, warm=warm)
        result[name] = (kernel["calls"], timer(*_random_args(module, name, rng)).median)
    return result


def _random_args(module: Module, name: str, rng: np.random.Generator) -> list[np.ndarray]:
    args = []
    for spec in module.function_info(name).signature.args:
        if spec.kind != "buffer":
            raise GraphError(f"kernel {name!r} takes a scalar; model kernels take arrays only")
        args.append(_random_array(rng, spec.shape, spec.dtype))
    return args


def profile_runs(module: Module, repeat: int = 5, min_repeat_ms: float = 20.0,
                 rng: np.random.Generator | None = None) -> np.ndarray:
    """The model run on random inputs through its profiling entry, which reads the clock before
    its first kernel and after each: the seconds of each call (a column per entry of
    ``model_info(module)["calls"]``, in order) in each run (a row): at least ``repeat`` runs, for
    at least ``min_repeat_ms`` of wall time (the time between the pairs included, so that a model
    of microseconds is profiled for as long as one of milliseconds, not for thousands of Python
    round trips). A row's sum is the run from its first kernel's start to its last one's end.

    The runs go in pairs, back to back in the native timing loop, the second one's clock counting:
    each kernel finds the caches and the thread pool as a model run in a loop leaves them (a
    Python gap before a run lets the pool's threads fall asleep, and the first kernels would pay
    for it)."""
    rng = np.random.default_rng(0) if rng is None else rng
    info = model_info(module)
    entry = info.get("profile_entry")
    if entry is None or entry not in module.function_names:
        raise GraphError(f"model {info['name']!r} has no profiling entry: it was built by an older version; "
                         "build it again to profile its kernels in the model")
    args = _random_args(module, entry, rng)
    stamps = args[-1]  # int64[calls + 1], written by the entry
    run_twice = module.time_evaluator(entry, number=2, repeat=1)
    per_run = []
    start = time.perf_counter()
    while len(per_run) < repeat or (time.perf_counter() - start) * 1e3 < min_repeat_ms:
        run_twice(*args)
        per_run.append(np.diff(stamps))
    return np.array(per_run, dtype=np.float64) * 1e-9


def kernel_medians(module: Module, runs: np.ndarray) -> dict[str, tuple[int, float]]:
    """``runs`` (what :func:`profile_runs` returns) per kernel, as :func:`profile` gives them:
    ``{kernel: (calls, seconds)}``, the seconds the median over the runs of its calls' time in one
    run, per call."""
    info = _checked_runs(module, runs)
    result = {}
    for k in info["kernels"]:
        mine = [i for i, name in enumerate(info["calls"]) if name == k["name"]]
        result[k["name"]] = (k["calls"], float(np.median(runs[:, mine].sum(axis=1))) / k["calls"])
    return result


def _checked_runs(module: Module, runs: np.ndarray) -> dict:
    """``model_info(module)``, once ``runs`` is seen to have a column per call of the model."""
    info = model_info(module)
    if runs.ndim != 2 or runs.shape[1] != len(info["calls"]):
        raise GraphError(f"runs of model {info['name']!r} have a column per call ({len(info['calls'])}), "
                         f"got an array of shape {runs.shape}")
    return info


def _templated(module: Module) -> dict[str, bool]:
    """Whether each kernel has a tuning template (a ``workload`` in the model description)."""
    return {kernel["name"]: bool(kernel.get("workload")) for kernel in model_info(module)["kernels"]}


def split_by_template(module: Module, times: dict[str, tuple[int, float]]) -> tuple[float, float, list[str]]:
    """``times`` (what :func:`profile` returns) summed per model run over the kernels that have a
    tuning template (a ``workload`` in the model description: the tuning log holds their figures)
    and over the others (the default schedule): ``(templated seconds, untemplated seconds, the
    untemplated kernels' names)``."""
    templated = untemplated = 0.0
    others = []
    for name, has_template in _templated(module).items():
        if name not in times:
            raise GraphError(f"no time for kernel {name!r} of model {model_info(module)['name']!r}")
        calls, seconds = times[name]
        if has_template:
            templated += calls * seconds
        else:
            untemplated += calls * seconds
            others.append(name)
    return templated, untemplated, others


def split_runs_by_template(module: Module, runs: np.ndarray) -> tuple[float, float, list[str]]:
    """As :func:`split_by_template`, for ``runs`` (what :func:`profile_runs` returns): each run's
    calls summed over the kernels that have a tuning template and over the others, each sum's
    median over the runs (seconds), and the others' names. A median of sums, unlike a sum of
    each kernel's median, keeps the slow calls that every run has somewhere."""
    info = _checked_runs(module, runs)
    has_template = _templated(module)
    templated = np.array([has_template[name] for name in info["calls"]], dtype=bool)
    others = [name for name, t in has_template.items() if not t]
    return (float(np.median(runs[:, templated].sum(axis=1))),
            float(np.median(runs[:, ~templated].sum(axis=1))), others)
