"""CUDA benchmark: tuned kernels against cuBLAS/cuDNN, float32 (TF32 off), in one run.

Run with ``python3 scripts/benchmarks/bench_cuda.py [--trials 500] [--db bench_cuda.db]`` on a
machine with an NVIDIA GPU, pycuda and CuPy or PyTorch (the peer library). For each
workload -- a 4096^3 float32 matmul and a ResNet-50 3x3 convolution layer -- it tunes
the CUDA template (``autotune.tune``, up to ``--trials`` candidates, xgb tuner, results
in the tuning log), builds the best config, checks it against the peer on the same
data, times both with CUDA events (median of several runs) and prints a table with
the ratio ours / peer (throughput; the goal for the matmul is >= 0.8).
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

import compiler

WORKLOADS = [
    ("matmul", (4096, 4096, 4096, "float32"), "matmul 4096 fp32"),
    # ResNet-50 stage 3 (conv3_x) 3x3 layer: 1x128x28x28 -> 128, pad 1
    ("conv2d_nchw", (1, 128, 28, 28, 128, 3, 3, 1, 1, 1, "float32"), "resnet50 conv 3x3 128ch 28x28"),
]


def _peer():
    """PyTorch where it sees the GPU (cuBLAS and cuDNN), else CuPy (cuBLAS only)."""
    try:
        import torch

        if torch.cuda.is_available():
            return "torch"
    except ImportError:
        pass
    try:
        import cupy as cp  # noqa: F401

        return "cupy"
    except ImportError:
        pass
    return None


def _peer_time(kind: str, name: str, inputs: list, repeat: int = 7) -> tuple[float, np.ndarray]:
    """Median seconds of the peer library's kernel, and its result."""
    if kind == "torch":
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        xs = [torch.from_numpy(x).cuda() for x in inputs]
        if name == "matmul":
            fn = lambda: torch.matmul(xs[0], xs[1])
        else:
            fn = lambda: torch.nn.functional.conv2d(xs[0], xs[1], padding=1)
        out = fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(repeat):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(10):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / 10)
        return statistics.median(times), out.cpu().numpy()
    import cupy as cp

    xs = [cp.asarray(x) for x in inputs]
    if name != "matmul":
        raise RuntimeError("the cuDNN peer of the convolution needs PyTorch")
    fn = lambda: cp.matmul(xs[0], xs[1])
    out = fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeat):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(10):
            fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3 / 10)
    return statistics.median(times), cp.asnumpy(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--db", default="bench_cuda.db")
    parser.add_argument("--tuner", default="xgb")
    parser.add_argument("--only", choices=[w[0] for w in WORKLOADS], action="append",
                        help="run only this workload (may be repeated)")
    opts = parser.parse_args()

    from compiler.runtime.cuda import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        print(f"bench_cuda: no GPU to run on ({reason})")
        return 1
    peer = _peer()
    if peer is None:
        print("bench_cuda: needs CuPy or PyTorch (with CUDA) for the cuBLAS/cuDNN peer")
        return 1

    import autotune
    import search_spaces

    dev = compiler.cuda(0)
    rows = []
    for name, args, label in WORKLOADS:
        if opts.only and name not in opts.only:
            continue
        task = autotune.create_task(name, args, target="cuda")
        result = autotune.tune(task, trials=opts.trials, tuner=opts.tuner, db=opts.db)
        with autotune.apply_history_best(opts.db):
            s, tensors = getattr(search_spaces, name)(*args, target="cuda")
            f = compiler.build(s, tensors, target="cuda", name=name)
        inputs, _ = task.reference_data(np.random.default_rng(0))
        out_shape = [int(d) for d in tensors[-1].shape]
        arrays = [compiler.nd.array(x, dev) for x in inputs] + [compiler.nd.empty(out_shape, "float32", dev)]
        f(*arrays)
        ours = f.time_evaluator(f.entry_name, dev, number=10, repeat=7, min_repeat_ms=50)(*arrays).median
        try:
            theirs, expected = _peer_time(peer, name, inputs)
        except RuntimeError as e:
            print(f"{label}: no peer ({e})")
            continue
        np.testing.assert_allclose(arrays[-1].numpy(), expected, rtol=1e-3, atol=1e-3)
        flop = task.flop
        rows.append((label, ours, theirs, flop, result.best_config))
    head = f"{'workload':34} {'ours ms':>9} {peer + ' ms':>10} {'ours TFLOPS':>12} {'peer TFLOPS':>12}"
    print(f"{head} {'ratio':>6}")
    for label, ours, theirs, flop, _ in rows:
        print(f"{label:34} {ours * 1e3:9.3f} {theirs * 1e3:10.3f} {flop / ours / 1e12:12.2f} "
              f"{flop / theirs / 1e12:12.2f} {theirs / ours:6.2f}")
    for label, *_, cfg in rows:
        print(f"best config for {label}: {cfg}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
