"""Running and profiling a compiled model (a Module from :func:`~.build.build_graph`, or one
loaded back from its library)."""

from __future__ import annotations

import numpy as np

from ..runtime.module import Module
from .errors import GraphError

__all__ = ["run", "profile", "model_info", "split_by_template"]


def model_info(module: Module) -> dict:
    """What ``module.attrs["model"]`` says of a compiled model (GraphError for other modules)."""
    info = module.attrs.get("model")
    if not isinstance(info, dict):
        raise GraphError("this module is not a compiled model (it has no model description)")
    return info


def run(module: Module, *inputs) -> list[np.ndarray]:
    """Run a compiled model on ``inputs`` (arrays, in the model's input order); its outputs."""
    info = model_info(module)
    if len(inputs) != len(info["inputs"]):
        names = [i["name"] for i in info["inputs"]]
        raise GraphError(f"model {info['name']!r} takes {len(names)} inputs {names}, got {len(inputs)}")
    outputs = [np.empty(o["shape"], dtype=o["dtype"]) for o in info["outputs"]]
    module(*inputs, *outputs)
    return outputs


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
    ``cache_flush="model"`` those, then has the thread pool write its input, as the kernel
    before leaves it inside a model.
    ``in_model=True`` times the kernels where they run: the model runs on random inputs through
    its profiling entry, which reads the clock between kernels, in pairs
    of back-to-back runs (the second one's clock counts), at least ``repeat`` times and
    ``min_repeat_ms`` in all; a kernel's seconds are the median over the
    runs of its calls' time in one run, per call. Their weighted sum against the model's latency
    is then what the executor itself adds; against the kernels timed alone, what the model's
    cache traffic costs them."""
    rng = np.random.default_rng(0) if rng is None else rng
    if in_model:
        return _profile_in_model(module, repeat, min_repeat_ms, rng)
    result = {}
    for kernel in model_info(module)["kernels"]:
        name = kernel["name"]
        timer = module.time_evaluator(name, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms,
                                      cache_flush=cache_flush)
        result[name] = (kernel["calls"], timer(*_random_args(module, name, rng)).median)
    return result


def _random_args(module: Module, name: str, rng: np.random.Generator) -> list[np.ndarray]:
    args = []
    for spec in module.function_info(name).signature.args:
        if spec.kind != "buffer":
            raise GraphError(f"kernel {name!r} takes a scalar; model kernels take arrays only")
        if np.issubdtype(np.dtype(spec.dtype), np.integer):
            args.append(np.zeros(spec.shape, dtype=spec.dtype))
        else:
            args.append(rng.uniform(-1, 1, size=spec.shape).astype(spec.dtype))
    return args


def _profile_in_model(module: Module, repeat: int, min_repeat_ms: float,
                      rng: np.random.Generator) -> dict[str, tuple[int, float]]:
    info = model_info(module)
    entry = info.get("profile_entry")
    if entry is None or entry not in module.function_names:
        raise GraphError(f"model {info['name']!r} has no profiling entry: it was built by an older version; "
                         "build it again to profile its kernels in the model")
    args = _random_args(module, entry, rng)
    stamps = args[-1]  # int64[calls + 1], written by the entry
    # Two runs back to back in the native timing loop, the stamps being the second's: each kernel
    # finds the caches and the thread pool as a model run in a loop leaves them (a Python gap
    # before a run lets the pool's threads fall asleep, and the first kernels would pay for it).
    run_twice = module.time_evaluator(entry, number=2, repeat=1)
    per_run = []
    spent = 0
    while len(per_run) < repeat or spent < min_repeat_ms * 1e6:
        run_twice(*args)
        per_run.append(np.diff(stamps))
        spent += int(stamps[-1] - stamps[0])
    sites = np.array(per_run, dtype=np.float64) * 1e-9  # runs x call sites, seconds
    result = {}
    for k in info["kernels"]:
        mine = [i for i, name in enumerate(info["calls"]) if name == k["name"]]
        result[k["name"]] = (k["calls"], float(np.median(sites[:, mine].sum(axis=1))) / k["calls"])
    return result


def split_by_template(module: Module, times: dict[str, tuple[int, float]]) -> tuple[float, float, list[str]]:
    """``times`` (what :func:`profile` returns) summed per model run over the kernels that have a
    tuning template (a ``workload`` in the model description: the tuning log holds their figures)
    and over the others (the default schedule): ``(templated seconds, untemplated seconds, the
    untemplated kernels' names)``."""
    templated = untemplated = 0.0
    others = []
    for kernel in model_info(module)["kernels"]:
        name = kernel["name"]
        if name not in times:
            raise GraphError(f"no time for kernel {name!r} of model {model_info(module)['name']!r}")
        calls, seconds = times[name]
        if kernel.get("workload"):
            templated += calls * seconds
        else:
            untemplated += calls * seconds
            others.append(name)
    return templated, untemplated, others
