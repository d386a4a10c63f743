"""Running and profiling a compiled model (a Module from :func:`~.build.build_graph`, or one
loaded back from its library)."""

from __future__ import annotations

import numpy as np

from ..runtime.module import Module
from .errors import GraphError

__all__ = ["run", "profile", "model_info"]


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
            rng: np.random.Generator | None = None,
            cache_flush: bool = False) -> dict[str, tuple[int, float]]:
    """Each kernel's calls per model run and its own median seconds per call, timed alone on
    random arguments of its shapes: ``{kernel: (calls, seconds)}``. Their weighted sum against
    the model's latency is what the executor adds. Timed again and again, a kernel finds its
    weights in the caches, as it does not inside a model that streams all of its weights each
    run; ``cache_flush`` evicts its arguments before every call, for the other bound."""
    rng = np.random.default_rng(0) if rng is None else rng
    result = {}
    for kernel in model_info(module)["kernels"]:
        name = kernel["name"]
        args = []
        for spec in module.function_info(name).signature.args:
            if spec.kind != "buffer":
                raise GraphError(f"kernel {name!r} takes a scalar; model kernels take arrays only")
            args.append(rng.uniform(-1, 1, size=spec.shape).astype(spec.dtype))
        timer = module.time_evaluator(name, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms,
                                      cache_flush=cache_flush)
        result[name] = (kernel["calls"], timer(*args).median)
    return result
