"""Small graphs the graph-layer tests share, built with GraphBuilder on random weights (imported by
the tests of this directory)."""

from __future__ import annotations

import numpy as np
from helpers import poisoned

from compiler.graph import GraphBuilder, evaluate


def assert_computes_graph(module, graph, seed: int) -> None:
    """``module`` (``graph`` built) on random input writes what the graph's reference evaluates to,
    into a poisoned output: one input, one output."""
    (x_value,), (y_value,) = graph.inputs, graph.outputs
    x = np.random.default_rng(seed).uniform(-1, 1, x_value.shape).astype(x_value.dtype)
    out = poisoned(y_value.shape, y_value.dtype)
    module(x, out)
    np.testing.assert_allclose(out, evaluate(graph, [x])[0], rtol=1e-4, atol=1e-6)


def weights(rng, *shape):
    """Random non-zero float32 data in +-[0.5, 1.5) / sqrt(fan-in), so values stay O(1) deep in a net."""
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    sign = rng.choice([-1.0, 1.0], size=shape)
    return (sign * rng.uniform(0.5, 1.5, size=shape) / np.sqrt(fan_in)).astype("float32")


def conv(b, rng, x, filters, k=3, stride=1, pad=1, name=None, dilation=1):
    w = b.const(f"{name or 'w'}_{len(b.nodes)}", weights(rng, filters, x.shape[1], k, k))
    return b.op("nn.conv2d", x, w, name=name, strides=(stride, stride), padding=(pad,) * 4,
                dilation=(dilation, dilation), groups=1)


def batch_norm(b, rng, x):
    c = x.shape[1]
    params = [weights(rng, c) + 1, weights(rng, c), weights(rng, c),
              rng.uniform(0.5, 1.5, c).astype("float32")]
    return b.op("nn.batch_norm", x, *(b.const(f"bn{k}_{len(b.nodes)}", p) for k, p in enumerate(params)),
                epsilon=1e-5, axis=1)


def residual_cnn(rng, channels=8, size=12, classes=10):
    """conv-bn-relu, a residual block (twice: the same kernels), max pool, global pool, dense, softmax."""
    b = GraphBuilder("residual_cnn")
    x = b.input("x", (1, 3, size, size))
    h = b.op("nn.relu", batch_norm(b, rng, conv(b, rng, x, channels)))
    for _ in range(2):
        y = b.op("nn.relu", batch_norm(b, rng, conv(b, rng, h, channels)))
        y = batch_norm(b, rng, conv(b, rng, y, channels))
        h = b.op("nn.relu", b.op("add", y, h))
    h = b.op("nn.max_pool2d", h, pool_size=(2, 2), strides=(2, 2), padding=(0, 0, 0, 0), dilation=(1, 1),
             ceil_mode=False)
    h = b.op("nn.global_avg_pool2d", h)
    h = b.op("reshape", h, newshape=(1, channels))
    h = b.op("nn.dense", h, b.const("fc", weights(rng, classes, channels)))
    h = b.op("add", h, b.const("fc_bias", weights(rng, classes)))
    return b.finish(b.op("nn.softmax", h, axis=1))
