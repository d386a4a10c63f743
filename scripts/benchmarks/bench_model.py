"""Whole models, compiled by us, against ONNX Runtime, PyTorch eager and torch.compile.

Run with ``python3 scripts/benchmarks/bench_model.py`` (every model of ``model_zoo.MODELS``:
ResNet-18, MobileNetV2 and ResNet-50 on a 1x3x224x224 image, the transformer encoder layer
on 1x128x768, with ReLU and with GELU; ``--models efficientnet_b0,vit_s16,resnext50`` runs
``model_zoo.EXTRA_MODELS``; ``--models tiny`` is a small CNN of this file, for smoke tests, with
``--peers ort,eager --rounds 1 --repeat 1 --min-ms 1``). All float32, batch 1, random weights
(seed 0), :data:`THREADS` threads for every contender.

Each model is exported to ONNX once (``model_zoo.export_onnx``) and compiled once into a shared
library: both are cached in ``--workdir`` under a name that holds the model, the opset and a
hash of the code they came from. The PyTorch contenders build the model afresh, from the same
seed: the same weights. The contenders:

* **ours untuned**: ``autotune.build_model(compiler.frontend.from_onnx(path), "llvm",
  db=None)``, every kernel at its default config, exported with ``export_library``, loaded in
  the child with ``compiler.runtime.load_module`` and called as ``module(x, out)``;
* **ours tuned** (``--tune``): the model's tasks tuned with ``autotune.tune_model`` into
  ``--db`` (``--trials`` per task, the log's earlier trials of these tasks counted: a second
  run resumes, or only re-measures; and/or ``--time-budget`` minutes), then built with the
  log, each 3x3 layer direct or by Winograd as it ran faster inside the model
  (``algorithms="measure"``, :func:`autotune.choose_algorithms`; ``--algorithms rule`` builds
  by the planner's rule), and each kernel whose threads split by height so or split otherwise
  as it ran faster there (:func:`autotune.choose_thread_splits`, with ``measure`` only); the
  line after the table gives the tuning's estimate (each task's
  best times its weight, summed) beside the tuned build's measured latency;
* **onnxruntime**: its CPU provider, ``ORT_ENABLE_ALL``, ``intra_op_num_threads`` =
  :data:`THREADS`, ``inter_op_num_threads`` = 1, input and output bound once (io binding);
* **torch eager**: ``torch.set_num_threads``, ``torch.inference_mode``;
* **torch.compile**: inductor, default mode, compiled by a first call before it is timed; a
  failure to compile drops it with its reason.

Before timing, each of our builds is checked against ONNX Runtime on one random input:
``|ours - ort| <= ATOL * max|ort| + RTOL * |ort|`` everywhere (tolerances relative to the
output's scale); the line gives the largest absolute error and the largest error relative to
that scale. A build that fails is marked MISMATCH and its model gets no verdict.

The figures (each contender timed in :func:`bench_common.time_interleaved`'s fresh processes,
``--rounds`` of them interleaved; in each, the median of ``--repeat`` timings of at least
``--min-ms`` each):

* **rounds**: between the children, ``bench_common.placement_check`` measures what reading
  another core's data costs; a round whose check before or after it came out more than
  ``bench_common.PLACEMENT_CHANGE`` times off the median of the model's checks, either way, ran
  with the vCPUs moved (the host moves them between core complexes every few seconds on some
  guests, and our Winograd layers then run up to twice as slow). It is marked ``*`` and left out
  of every median below, for every contender alike, while at least
  ``bench_common.MIN_KEPT_ROUNDS`` rounds are left. While a contender has fewer, every
  contender runs another round, up to ``--rounds`` more; if it still has fewer, its figures
  get no verdict.
* **latency**: the median over the rounds, in ms. Ours is timed by the module's native
  ``time_evaluator`` loop; the peers by ``compiler.runtime.timer.time_calls`` around their call.
* **speedups**: peer time / our time, against ONNX Runtime, eager and torch.compile, for the
  tuned build where there is one, else the untuned one (the ``ours`` of the other columns).
* **executor overhead** ("overhead"): our latency over the sum of our kernels' own times
  (``compiler.graph.profile``: calls x seconds per call of each kernel, each timed alone and
  hot), profiled in the same child process after the timing, the median of the rounds'
  ratios. **"executor"**: our latency over the model's runs through its profiling entry, right
  after the timing (``compiler.graph.profile_runs``, the clock read before the first kernel and
  after each; the median over the runs of the first kernel's start to the last one's end): what
  the executor itself adds. The difference between the two is what the model's memory traffic
  costs its kernels (a kernel timed alone finds its weights and inputs in the caches).
* **tuned kernels against the log**: each tuned kernel of the tuned build, timed inside the
  model in the timing children (the median over the rounds), against its best config's median
  in the log (the figure the build chose it by; ``tune_model`` times candidates with their
  weights evicted from the caches, as they run in the model); the line gives the range of the
  ratios and the furthest kernel, which must be within 10% of its log figure; a second line names
  the three kernels that lose the most time in the model against their log figures, over all
  their calls: where the model's latency goes beyond the log's estimate. A line between them
  gives the same kernels' deployed times over their times alone as the tuner times them
  (``profile(..., cache_flush="model")``, in the same children right after): a kernel far from
  its log figure but not from this one met a machine that changed since it was tuned; one far
  from both is slowed (or sped up) by the model itself. Where other code than today's measured
  some of the log's figures (records name their code version), the verdict is withheld: those
  figures timed other kernels (``--tune`` on the same log times the best configs again).
* **peak memory** (MiB): the child's peak RSS (Linux's ``VmHWM``, the ``ru_maxrss`` of this
  process alone) after loading the model, its first run and its timings, less its RSS before
  loading it (the libraries imported, input and output allocated); the peak is restarted there
  (``/proc/self/clear_refs``), so that the imports' own peak does not hide the model's. The
  children read nothing of the model before that (they are given its output shapes): the heap
  keeps freed pages, and a peer would reuse those of a model file read earlier. The median over
  the rounds. For torch.compile it includes what the compiler itself needed.
* **% peak**: the model's FLOPs (2 x the multiply-adds of its Conv, MatMul and Gemm nodes, from
  the ONNX graph after ONNX shape inference; elementwise, normalisation, pooling and softmax
  work is left out) over our latency, as a share of the FP32 FMA peak on :data:`THREADS`
  threads (``bench_common``'s peak kernel, the higher of the two quietness checks).

Every model is exported, built (and tuned) first; then, before the first timing and after the
last, the machine is checked for quietness (``bench_common.measure_quietness``; with
``--wait-quiet MIN``, while the first check finds it busy, again every
``bench_common.QUIET_WAIT_INTERVAL_S`` seconds for up to MIN minutes:
``bench_common.wait_until_quiet``), in a fresh process of its own (this one has loaded PyTorch,
whose libgomp, loaded before ours, keeps its idle threads spinning and slows our kernels down
up to ten times; for the same reason our children never import PyTorch); the goals are judged
only if both found it quiet (and a judged figure's rounds agree within
``bench_common.MAX_SPREAD``): tuned ResNet-18 and ResNet-50 at least 1.05x ONNX Runtime,
MobileNetV2 1.2x, the encoder 1.0x; every tuned model at least 1.5x eager and 1.0x
torch.compile; executor overhead at most 5%; peak memory at most ONNX Runtime's.

Run as ``bench_model.py --child '<spec JSON>'`` it is the child process of one timing.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import bench_common as B
import numpy as np

THREADS = 2
TARGET = "llvm"
TRIALS = 64  # per task
RTOL, ATOL = 1e-3, 1e-4  # ATOL times the reference output's largest magnitude
GOALS_VS_ORT = {"resnet18": 1.05, "resnet50": 1.05, "mobilenet_v2": 1.2, "encoder_layer": 1.0}
GOAL_VS_EAGER = 1.5
GOAL_VS_COMPILE = 1.0
MAX_OVERHEAD = 1.05  # our latency over the sum of our kernels' times
KERNEL_VS_LOG = 0.10  # a deployed tuned kernel timed alone within this of its log figure
UNTUNED, TUNED = "ours untuned", "ours tuned"
PEERS = {"ort": "onnxruntime", "eager": "torch eager", "compile": "torch.compile"}
TINY_SHAPE = (1, 3, 32, 32)

_HERE = Path(__file__).resolve()
_REPO = _HERE.parents[2]


# ----------------------------------------------------------------------------- models


def tiny_net():
    """A small CNN (conv, batch norm, relu, strided conv, global pool, linear) on 1x3x32x32."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def models() -> dict:
    """``{name: (factory, input shape)}``: ``model_zoo.MODELS``, ``model_zoo.EXTRA_MODELS`` and
    ``tiny``."""
    found = {"tiny": (tiny_net, TINY_SHAPE)}
    try:
        import model_zoo
    except ImportError:
        return found
    return {**model_zoo.MODELS, **model_zoo.EXTRA_MODELS, **found}


def _default_models() -> list[str]:
    try:
        import model_zoo
    except ImportError:
        return ["tiny"]
    return list(model_zoo.MODELS)


def goal_vs_ort(name: str) -> float | None:
    """The speedup over ONNX Runtime the tuned ``name`` must reach (``None``: no goal)."""
    if name in GOALS_VS_ORT:
        return GOALS_VS_ORT[name]
    return GOALS_VS_ORT["encoder_layer"] if "encoder" in name else None


def _digest(*parts) -> str:
    h = hashlib.sha1()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
    return h.hexdigest()[:12]


def _code_hash() -> str:
    """A hash of the compiler's, the templates' and the tuner's sources (what a build comes from)."""
    packages = ("compiler", "search_spaces", "autotune")
    files = sorted(f for pkg in packages for f in (_REPO / pkg).rglob("*.py"))
    return _digest(*(p for f in files for p in (str(f.relative_to(_REPO)), f.read_bytes())))


def torch_model(name: str):
    """The model in eval mode, its weights drawn from seed 0: the same weights every time."""
    import torch

    torch.manual_seed(0)
    return models()[name][0]().eval()


def export(name: str, workdir: Path, opset: int) -> Path:
    """The model's ONNX file, exported once and cached (its name holds the opset and a hash of the
    source of the model's code)."""
    source = _HERE if name == "tiny" else _HERE.with_name("model_zoo.py")
    path = workdir / f"{name}-opset{opset}-{_digest(source.read_bytes())}.onnx"
    if not path.exists():
        import model_zoo

        staged = path.with_suffix(f".tmp{os.getpid()}.onnx")
        model_zoo.export_onnx(torch_model(name), str(staged), input_shape=models()[name][1], opset=opset)
        os.replace(staged, path)
    return path


def model_macs(onnx_path: str | os.PathLike) -> int:
    """The multiply-adds of the model's Conv, MatMul and Gemm nodes (ONNX shape inference gives
    the shapes, propagating the values of shape computations: a reshape to ``x.shape``'s
    dimensions, as a ViT's attention writes them); nothing else is counted."""
    import onnx

    model = onnx.shape_inference.infer_shapes(onnx.load(str(onnx_path)), data_prop=True)
    g = model.graph
    shapes = {t.name: list(t.dims) for t in g.initializer}
    for v in [*g.input, *g.value_info, *g.output]:
        dims = v.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[v.name] = [d.dim_value for d in dims]
    macs = 0
    for node in g.node:
        ins = [shapes.get(i) for i in node.input]
        out = shapes.get(node.output[0])
        if out is None or any(s is None for s in ins[:2]):
            continue
        if node.op_type == "Conv":  # each output: C/group x kernel multiply-adds
            macs += int(np.prod(out)) * int(np.prod(ins[1][1:]))
        elif node.op_type == "MatMul":
            macs += int(np.prod(out)) * ins[0][-1]
        elif node.op_type == "Gemm":
            trans_a = next((a.i for a in node.attribute if a.name == "transA"), 0)
            macs += int(np.prod(out)) * ins[0][0 if trans_a else 1]
    return macs


def output_shapes(onnx_path: str | os.PathLike) -> list[list[int]]:
    """The static shapes of the model's outputs, in order."""
    import onnx

    g = onnx.load(str(onnx_path), load_external_data=False).graph
    return [[d.dim_value for d in o.type.tensor_type.shape.dim] for o in g.output]


def model_input(shape) -> np.ndarray:
    """The input every contender and every check runs on."""
    return np.random.default_rng(0).standard_normal(shape, dtype=np.float32)


# ----------------------------------------------------------------------------- our builds


@dataclass
class Model:
    """A model ready to time: its files, FLOPs, our builds (or why there is none) and checks."""

    name: str
    input_shape: tuple
    onnx_path: Path
    flop: float
    builds: dict = field(default_factory=dict)  # label -> .so path
    notes: list = field(default_factory=list)
    mismatch: bool = False
    tune_s: float | None = None
    estimate_s: float | None = None  # the tuning's estimated latency of the tuned kernels


def _ort_session(path, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def compare(ours: np.ndarray, ref: np.ndarray) -> tuple[bool, float, float]:
    """``(within tolerance, max abs error, max abs error / max |ref|)``: within means
    ``|ours - ref| <= ATOL * max|ref| + RTOL * |ref|`` everywhere."""
    scale = float(np.abs(ref).max()) or 1.0
    err = np.abs(ours.astype(np.float64) - ref)
    ok = bool(np.isfinite(ours).all() and (err <= ATOL * scale + RTOL * np.abs(ref)).all())
    return ok, float(err.max()), float(err.max()) / scale


def _build(name: str, graph_path: Path, so_path: Path, log, algorithms: str | None = None) -> Path:
    if so_path.exists():
        return so_path
    import autotune
    from compiler.frontend import from_onnx

    graph = from_onnx(str(graph_path))
    start = time.perf_counter()
    quiet = logging.getLogger("autotune.model")
    level = quiet.level
    if log is None:  # its warning that no kernel has a tuned config is the point of this build
        quiet.setLevel(logging.ERROR)
    try:
        configs = {}
        if algorithms == "measure":
            choices = autotune.choose_algorithms(graph, TARGET, log)
            print("\n".join("  " + line for line in choices.report().splitlines()), flush=True)
            algorithms = choices.algorithms
            splits = autotune.choose_thread_splits(graph, TARGET, log, algorithms=algorithms)
            print("\n".join("  " + line for line in splits.report().splitlines()), flush=True)
            configs = splits.configs
        module = autotune.build_model(graph, TARGET, db=log, algorithms=algorithms or None, configs=configs)
    finally:
        quiet.setLevel(level)
    staged = so_path.with_suffix(f".tmp{os.getpid()}.so")
    module.export_library(str(staged))
    os.replace(staged, so_path)
    print(f"  built {so_path.name} in {time.perf_counter() - start:.1f} s", flush=True)
    return so_path


def tune(m: Model, opts) -> float:
    """Tune ``m``'s tasks into ``opts.db`` up to ``opts.trials`` per task (the log's count) and/or
    ``opts.time_budget`` minutes; the seconds it took (the estimate goes into ``m``)."""
    import autotune
    from compiler.frontend import from_onnx

    graph = from_onnx(str(m.onnx_path))
    tasks = autotune.extract_tasks(graph, TARGET)
    trials = opts.trials * len(tasks) if opts.trials else None
    budget = " and ".join(([f"up to {trials} trials in {opts.db} (the log's count)"] if trials else [])
                          + ([f"{opts.time_budget:g} min"] if opts.time_budget else []))
    print(f"  tuning {len(tasks)} tasks, {budget}", flush=True)
    budget_s = opts.time_budget * 60 if opts.time_budget else None
    result = autotune.tune_model(tasks, TARGET, trials=trials, time_budget=budget_s, db=opts.db,
                                 progress=sys.stderr.isatty())
    print("\n".join("  " + line for line in result.report().splitlines()), flush=True)
    m.estimate_s = None if result.missing else result.estimated_latency
    return result.seconds


def _log_key(db: str) -> str:
    path = Path(db)
    if path.exists():
        st = path.stat()
        return _digest(path.resolve(), st.st_size, st.st_mtime_ns)
    return _digest(db)


def prepare(name: str, opts, workdir: Path) -> Model:
    """Export ``name``, build our module(s) (tuning first with ``--tune``) and check them against
    ONNX Runtime; what failed is a note, not an exception."""
    shape = models()[name][1]
    onnx_path = export(name, workdir, opts.opset)
    m = Model(name, tuple(shape), onnx_path, 2.0 * model_macs(onnx_path))
    x = model_input(shape)
    sess = _ort_session(onnx_path, THREADS)
    ref = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    m.notes.append(_eager_check(m, x, ref))
    code = _code_hash()
    stem = f"{name}-opset{opts.opset}-{code}"
    todo = [(UNTUNED, workdir / f"{stem}-untuned.so", None, None)]
    if opts.tune:
        try:
            m.tune_s = tune(m, opts)
        except Exception as e:  # noqa: BLE001 (one line, then on to the peers)
            m.notes.append(f"{TUNED}: not tuned: {type(e).__name__}: {_first_line(e)}")
        else:
            algorithms = None if opts.algorithms == "rule" else opts.algorithms
            todo.append((TUNED, workdir / f"{stem}-tuned-{_log_key(opts.db)}-{opts.algorithms}.so", opts.db,
                         algorithms))
    for label, so_path, log, algorithms in todo:
        try:
            _build(name, onnx_path, so_path, log, algorithms)
            out = _run_ours(so_path, x, output_shapes(onnx_path))
        except Exception as e:  # noqa: BLE001
            m.notes.append(f"{label}: not built: {type(e).__name__}: {_first_line(e)}")
            continue
        ok, abs_err, rel_err = compare(out, ref)
        m.notes.append(f"{label} vs onnxruntime: max abs error {abs_err:.2e}, max error / max|ref| "
                       f"{rel_err:.2e}: {'ok' if ok else 'MISMATCH'}")
        m.mismatch = m.mismatch or not ok
        m.builds[label] = so_path
    return m


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0]


def _run_ours(so_path: Path, x: np.ndarray, shapes) -> np.ndarray:
    import compiler

    module = compiler.runtime.load_module(str(so_path))
    outs = [np.full(s, np.nan, np.float32) for s in shapes]
    module(x, *outs)
    return outs[0]


def _eager_check(m: Model, x: np.ndarray, ref: np.ndarray) -> str:
    """How far PyTorch eager is from ONNX Runtime (is the exported model the model?)."""
    import torch

    module = torch_model(m.name)
    with torch.inference_mode():
        out = module(torch.from_numpy(x)).numpy()
    ok, abs_err, rel_err = compare(out, ref)
    return (f"torch eager vs onnxruntime (the export's check): max abs error {abs_err:.2e}, "
            f"max error / max|ref| {rel_err:.2e}{'' if ok else ': the export differs'}")


# ----------------------------------------------------------------------------- timing


def contenders(m: Model, peers, repeat: int, min_ms: float) -> list[B.Contender]:
    """Our builds and the chosen peers of ``m``, as child specs."""
    # The children are given the output shapes: reading them from the ONNX file there would
    # leave its weights' pages in the child's heap before the peak is restarted, and a peer
    # that reuses them would seem to need that much less memory.
    common = {"model": m.name, "input": list(m.input_shape), "repeat": repeat, "min_ms": min_ms,
              "outputs": output_shapes(m.onnx_path)}
    out = [B.Contender(label, {**common, "kind": "ours", "label": label, "path": str(so)})
           for label, so in m.builds.items()]
    for key in peers:
        out.append(B.Contender(PEERS[key], {**common, "kind": key, "label": PEERS[key],
                                            "onnx": str(m.onnx_path)}))
    return out


def quietness(threads: int = THREADS) -> B.Quietness:
    """:func:`bench_common.measure_quietness` in a fresh process: our kernels run up to ten times
    slower in a process that loaded PyTorch (its libgomp) before the compiler, as this one does."""
    reply = ChildRunner().reply({"kind": "quietness"}, B.thread_env(threads))
    return B.Quietness.from_dict({f.name: reply[f.name] for f in dataclasses.fields(B.Quietness)})


class ChildRunner:
    """:func:`bench_common.time_interleaved`'s runner: this script as the child, its replies kept
    (``replies[label]``: memory, kernel sums) beside the seconds it returns."""

    def __init__(self, timeout: float = 1800):
        self.timeout = timeout
        self.replies: dict[str, list[dict]] = defaultdict(list)

    def __call__(self, spec: dict, env: dict) -> tuple[float, str]:
        reply = self.reply(spec, env)
        self.replies[spec["label"]].append(reply)
        return float(reply["seconds"]), str(reply.get("info", ""))

    def reply(self, spec: dict, env: dict) -> dict:
        """The child's reply to ``spec``; RuntimeError with the last line of its error if it failed."""
        return B.child_reply(spec, env, self.timeout, command=[sys.executable, str(_HERE), "--child"])


class PlacementChecks:
    """:func:`bench_common.time_interleaved`'s ``placement``: each call a fresh process's
    :func:`bench_common.placement_check`, kept in order to be printed."""

    def __init__(self):
        self.seen: list[float] = []

    def __call__(self) -> float:
        self.seen.append(B.placement_check(THREADS))
        return self.seen[-1]

    def describe(self) -> str:
        """The checks in order, on one line."""
        return ("where the cores were (another core's block read in x the time of a core's own; before the "
                f"first child and after each): {' '.join(f'{c:.2f}' for c in self.seen)}")


@dataclass
class Result:
    """A model's timings and the per-contender figures of its children."""

    model: Model
    timings: dict  # label -> B.Timing
    replies: dict  # label -> [child replies]

    def ours(self) -> str | None:
        """The build the speedups are for: tuned where there is one, else untuned."""
        for label in (TUNED, UNTUNED):
            if label in self.timings and self.timings[label].median:
                return label
        return None

    def median(self, label: str) -> float | None:
        t = self.timings.get(label)
        return t.median if t else None

    def kept_replies(self, label: str) -> list[dict]:
        """The replies of the rounds the medians use (:meth:`bench_common.Timing.kept_indices`:
        those with the vCPUs placed as usual), all of them where the two do not line up."""
        replies, t = self.replies.get(label, []), self.timings.get(label)
        if t is None or len(replies) != len(t.rounds):
            return replies
        return [replies[i] for i in t.kept_indices()]

    def memory_mib(self, label: str) -> float | None:
        """The median over the rounds of the child's peak RSS growth, in MiB."""
        values = [r["rss_kib"] / 1024 for r in self.replies.get(label, []) if r.get("rss_kib") is not None]
        return statistics.median(values) if values else None

    def overhead(self, label: str, kernels: str = "kernel_s") -> float | None:
        """Median over the rounds of latency / sum of the kernels' times (``None``: not profiled):
        timed alone (``kernel_s``) or inside the model (``kernel_in_model_s``)."""
        ratios = [r["seconds"] / r[kernels] for r in self.kept_replies(label) if r.get(kernels)]
        return statistics.median(ratios) if ratios else None

    def deployed(self):
        """The tuned build's latency in parts (``autotune.DeployedLatency``, the medians over the
        rounds), or ``None`` without a profiled tuned build."""
        from autotune.model import DeployedLatency

        replies = [r for r in self.kept_replies(TUNED) if r.get("in_model_split")]
        if not replies or not self.median(TUNED):
            return None
        splits = [r["in_model_split"] for r in replies]
        return DeployedLatency.from_rounds([r["seconds"] for r in replies],
                                           [r["kernel_in_model_s"] for r in replies],
                                           statistics.median(s[0] for s in splits),
                                           statistics.median(s[1] for s in splits), splits[0][2])

    def speedup(self, peer: str) -> float | None:
        ours, theirs = self.median(self.ours() or ""), self.median(peer)
        return theirs / ours if ours and theirs else None


def _ms(s: float | None) -> str:
    return f"{s * 1e3:.2f}" if s else "n/a"


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v else "n/a"


def _mib(v: float | None) -> str:
    return f"{v:.0f}" if v is not None else "n/a"


TABLE_HEADER = ("model", "GFLOP", "untuned ms", "tuned ms", "ORT ms", "eager ms", "compile ms", "vs ORT",
                "vs eager", "vs compile", "overhead", "executor", "% peak", "MiB ours", "MiB ORT",
                "MiB eager", "MiB compile")


def table_row(r: Result, peak: float) -> tuple:
    """One row of the table: latencies, our speedups, overhead, share of the peak, memory."""
    ours = r.ours()
    latency = r.median(ours) if ours else None
    overhead = r.overhead(ours) if ours else None
    executor = r.overhead(ours, "kernel_in_model_s") if ours else None
    share = f"{r.model.flop / latency / peak:.0%}" if latency and peak else "n/a"
    name = r.model.name + (" MISMATCH" if r.model.mismatch else "")
    return (name, f"{r.model.flop / 1e9:.3g}", _ms(r.median(UNTUNED)), _ms(r.median(TUNED)),
            *(_ms(r.median(PEERS[k])) for k in PEERS), *(_x(r.speedup(PEERS[k])) for k in PEERS),
            *(f"{v - 1:+.1%}" if v else "n/a" for v in (overhead, executor)), share,
            _mib(r.memory_mib(ours)) if ours else "n/a", *(_mib(r.memory_mib(PEERS[k])) for k in PEERS))


# (kernel, workload, log seconds, deployed seconds, alone seconds or None)
KernelRow = tuple[str, str, float, float, float | None]
LOGGED, ALONE = 2, 4  # the positions in a KernelRow that deployed seconds are compared with


def kernels_vs_log(r: Result, db) -> list[KernelRow]:
    """Each tuned kernel of ``r``'s tuned build: ``(kernel, workload, log seconds, deployed
    seconds, alone seconds)``, the log's figure being its best config's median in ``db`` (the
    figure the build chose it by), the deployed one the kernel timed inside the model in the
    timing children (``profile(..., in_model=True)``, the median over the rounds), and the alone
    one the kernel timed alone in those children as the tuner times it (``profile(...,
    cache_flush="model")``; None from children that did not)."""
    import db as tuning_db
    from autotune.selection import best

    replies = [reply for reply in r.kept_replies(TUNED) if reply.get("kernel_in_model_times")]
    if not replies:
        return []
    workloads = replies[0].get("tuned_workloads", {})
    rows = []
    with tuning_db.open(db) as log:
        for kernel, key in workloads.items():
            ranked = best(log, key)
            if not ranked or ranked[0].median is None:
                continue
            deployed = statistics.median(reply["kernel_in_model_times"][kernel] for reply in replies)
            alone = [reply["kernel_alone_model_times"][kernel] for reply in replies
                     if kernel in reply.get("kernel_alone_model_times", {})]
            alone_s = statistics.median(alone) if alone else None
            rows.append((kernel, key, ranked[0].median, deployed, alone_s))
    return rows


def stale_figures(rows: list[KernelRow], db) -> str:
    """Why the log's figures of ``rows`` (from :func:`kernels_vs_log`) cannot judge today's
    kernels: how many of them other code than today's measured (``measure.code_version()``:
    the compiler or a template changed since), "" when none did."""
    import db as tuning_db
    from measure import code_version

    with tuning_db.open(db) as log:
        versions = [log.config_stats(key, limit=1)[0].code_version for _, key, *_ in rows]
    stale = sum(1 for version in versions if version != code_version())
    if not stale:
        return ""
    return (f"{stale} of the {len(rows)} log figures were measured with other code than today's "
            f"({code_version()}): tuning again (--tune) times them again")


def deployed_ratios(rows: list[KernelRow], against: int) -> list[tuple[float, KernelRow]]:
    """Each row's deployed seconds over its seconds at position ``against`` (:data:`LOGGED` or
    :data:`ALONE`), with the row, for the rows that have both; the furthest from 1 first
    (the first of them in ``rows`` where several are as far)."""
    ratios = [(row[3] / row[against], row) for row in rows if row[against]]
    return sorted(ratios, key=lambda p: -abs(p[0] - 1))


def deployed_vs_alone(rows: list[KernelRow]) -> str:
    """The range of the tuned kernels' deployed times over their alone times of the same rounds
    (``rows`` from :func:`kernels_vs_log`) and the furthest kernel, as one line; "" without them.
    Against :func:`kernels_vs_log`'s ratios it separates what the model does to a kernel from
    what the machine did since the log was written."""
    ratios = deployed_ratios(rows, ALONE)
    if not ratios:
        return ""
    values = [ratio for ratio, _ in ratios]
    kernel, _, _, deployed, alone = ratios[0][1]
    return (f"deployed / alone as the tuner times it, in the same children, from {min(values):.2f}x to "
            f"{max(values):.2f}x; furthest: {kernel}, {alone * 1e3:.3f} ms alone, "
            f"{deployed * 1e3:.3f} ms deployed")


def time_lost_in_model(r: Result, rows: list[KernelRow], top: int = 3) -> str:
    """The ``top`` tuned kernels whose time inside the model exceeds their log figures the most,
    over all their calls (``rows`` from :func:`kernels_vs_log`), as one line; "" where none does."""
    replies = [reply for reply in r.replies.get(TUNED, []) if reply.get("kernel_calls")]
    calls = replies[0]["kernel_calls"] if replies else {}
    lost = sorted(((calls.get(k, 1) * (deployed - logged), k, calls.get(k, 1), logged, deployed)
                   for k, _, logged, deployed, _ in rows if deployed > logged), reverse=True)[:top]
    return ", ".join(f"{kernel} +{total * 1e3:.3f} ms ({n} x {logged * 1e3:.3f} -> {deployed * 1e3:.3f} ms)"
                     for total, kernel, n, logged, deployed in lost)


def verdicts(r: Result) -> list[B.Verdict]:
    """The goals ``r`` is judged on (none for a MISMATCH); speed goals are for the tuned build,
    withheld without one, and withheld where the rounds compared disagree."""
    name, ours = r.model.name, r.ours()
    if r.model.mismatch or ours is None:
        return []
    noise = r.timings[ours].noise()
    not_tuned = "" if ours == TUNED else "the goal is for the tuned build (--tune)"
    out = []
    goals = [(PEERS["ort"], goal_vs_ort(name)), (PEERS["eager"], GOAL_VS_EAGER),
             (PEERS["compile"], GOAL_VS_COMPILE)]
    for peer, goal in goals:
        value = r.speedup(peer)
        if goal is None or value is None:
            continue
        out.append(B.Verdict(f"{name} {ours} vs {peer}", value, goal,
                             withheld=not_tuned or noise or r.timings[peer].noise()))
    overhead = r.overhead(ours)
    if overhead:
        out.append(B.Verdict(f"{name} {ours} latency / its kernels' sum", overhead, MAX_OVERHEAD,
                             at_most=True, withheld=noise))
    mine, ort = r.memory_mib(ours), r.memory_mib(PEERS["ort"])
    if mine is not None and ort:
        out.append(B.Verdict(f"{name} {ours} peak memory / onnxruntime's", mine / ort, 1.0, at_most=True))
    return out


# ----------------------------------------------------------------------------- the child process


def _status_kib(field: str) -> int | None:
    """A figure of ``/proc/self/status`` in KiB (``None`` where there is none)."""
    try:
        with open("/proc/self/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith(field + ":")), None)
    except (OSError, ValueError, IndexError):
        return None


def _peak_kib() -> int:
    """The process's peak RSS so far (KiB): Linux's ``VmHWM``, else ``ru_maxrss``. Not ``ru_maxrss``
    where there is ``VmHWM``: Linux folds into it the peak of the process that spawned this one
    (``subprocess`` starts a child with ``vfork``, whose memory is the parent's until ``exec``)."""
    peak = _status_kib("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _reset_peak() -> int:
    """Restart the peak RSS count at the current RSS (``/proc/self/clear_refs``), so that the
    imports' own peak does not hide what comes after; the RSS it starts from (KiB). Where that
    cannot be done, the peak so far."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return _peak_kib()
    rss = _status_kib("VmRSS")
    return rss if rss is not None else _peak_kib()


def _child_ours(spec: dict, x: np.ndarray) -> dict:
    import compiler

    outs = [np.empty(s, np.float32) for s in spec["outputs"]]
    base = _reset_peak()
    f = compiler.runtime.load_module(spec["path"])
    f(x, *outs)
    timer = f.time_evaluator(f.entry_name, compiler.cpu(0), number=1, repeat=spec["repeat"],
                             min_repeat_ms=spec["min_ms"])
    seconds = timer(x, *outs).median
    reply = {"seconds": seconds, "rss_kib": _peak_kib() - base, "info": Path(spec["path"]).name}
    try:
        from compiler.graph import kernel_medians, model_info, profile, profile_runs, split_runs_by_template
    except ImportError:
        profile = None
    if profile is not None:
        # inside the model first, right after the latency: the same spell of the machine
        runs = profile_runs(f, repeat=spec["repeat"], min_repeat_ms=spec["min_ms"])
        in_model = kernel_medians(f, runs)
        reply["kernel_in_model_s"] = float(np.median(runs.sum(axis=1)))
        reply["kernel_in_model_times"] = {name: s for name, (_, s) in in_model.items()}
        reply["kernel_calls"] = {name: calls for name, (calls, _) in in_model.items()}
        templated, untemplated, others = split_runs_by_template(f, runs)
        reply["in_model_split"] = [templated, untemplated, len(others)]
        kernels = profile(f)
        reply["kernel_s"] = sum(calls * s for calls, s in kernels.values())
        reply["tuned_workloads"] = {k["name"]: k["workload"] for k in model_info(f)["kernels"]
                                    if k.get("workload") and k["schedule"].endswith(": tuned")}
        if spec["label"] == TUNED:
            # alone as the tuner timed them, in this spell of the machine: what the log's
            # figures would be now
            alone = profile(f, cache_flush="model")
            reply["kernel_alone_model_times"] = {name: alone[name][1] for name in reply["tuned_workloads"]}
        reply["info"] += f", {len(kernels)} kernels"
    return reply


def _child_ort(spec: dict, x: np.ndarray, threads: int) -> dict:
    import onnxruntime as ort

    outs = [np.empty(s, np.float32) for s in spec["outputs"]]
    base = _reset_peak()
    sess = _ort_session(spec["onnx"], threads)
    binding = sess.io_binding()
    binding.bind_cpu_input(sess.get_inputs()[0].name, x)
    for o, out in zip(sess.get_outputs(), outs, strict=True):
        binding.bind_output(o.name, "cpu", 0, np.float32, list(out.shape), out.ctypes.data)
    return _time(lambda: sess.run_with_iobinding(binding), spec, base, f"onnxruntime {ort.__version__}")


def _child_torch(spec: dict, x: np.ndarray, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    xt = torch.from_numpy(x)
    base = _reset_peak()
    module = torch_model(spec["model"])  # loading it: drawing its weights
    info = f"torch {torch.__version__}"
    with torch.inference_mode():
        if spec["kind"] == "compile":
            module = torch.compile(module)
            module(xt)  # compiles
            info += ", inductor"
        return _time(lambda: module(xt), spec, base, info)


def _time(fn, spec: dict, base: int, info: str) -> dict:
    from compiler.runtime.timer import time_calls

    fn()  # the first run (time_calls warms up with one more)
    seconds = time_calls(fn, number=1, repeat=spec["repeat"], min_repeat_ms=spec["min_ms"]).median
    return {"seconds": seconds, "rss_kib": _peak_kib() - base, "info": info}


def child_main(spec: dict) -> dict:
    """Load and time what ``spec`` names in this process (seconds, RSS growth, kernel sum), or
    check the machine's quietness (kind ``quietness``)."""
    B.steady_heap()
    threads = int(os.environ.get("AUTOTUNE_NUM_THREADS", "0")) or THREADS
    kind = spec["kind"]
    if kind == "quietness":
        return {"seconds": 0.0, **dataclasses.asdict(B.measure_quietness(threads))}
    x = model_input(spec["input"])
    if kind == "ours":
        return _child_ours(spec, x)
    if kind == "ort":
        return _child_ort(spec, x, threads)
    if kind in ("eager", "compile"):
        return _child_torch(spec, x, threads)
    raise ValueError(f"unknown contender kind {kind!r}")


# ----------------------------------------------------------------------------- main


def _parse(argv=None):
    p = argparse.ArgumentParser(description="Whole models: ours against ONNX Runtime, eager, torch.compile.")
    p.add_argument("--models", default=",".join(_default_models()),
                   help=f"comma-separated, of {', '.join(models())} (default: those of model_zoo.MODELS)")
    p.add_argument("--tune", action="store_true", help="tune each model's tasks and time the tuned build too")
    p.add_argument("--trials", type=int, default=TRIALS,
                   help=f"trials per task, the log's included (default {TRIALS}; 0 for none: --time-budget)")
    p.add_argument("--time-budget", type=float, default=None, metavar="MIN",
                   help="with --tune: minutes of tuning per model (with --trials, whichever ends first)")
    p.add_argument("--db", default=None, help="the tuning log (default: bench_model.db in --workdir)")
    p.add_argument("--algorithms", choices=("measure", "rule"), default="measure",
                   help="how the tuned build's 3x3 layers run: as they ran faster inside the model "
                        "(measure, the default) or by the planner's rule")
    p.add_argument("--rounds", type=int, default=B.ROUNDS,
                   help=f"processes per contender (default {B.ROUNDS}; up to twice as many where the vCPUs "
                        "moved during too many)")
    p.add_argument("--repeat", type=int, default=B.REPEAT, help=f"timings per process (default {B.REPEAT})")
    p.add_argument("--min-ms", type=float, default=B.MIN_REPEAT_MS,
                   help=f"each timing lasts at least this long (default {B.MIN_REPEAT_MS:.0f})")
    p.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated, of {', '.join(PEERS)}")
    p.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "bench_model"),
                   help="where exported models and built libraries are cached (default: %(default)s)")
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--wait-quiet", type=float, default=0.0, metavar="MIN",
                   help=f"when the check before the timings finds the machine busy, check again "
                        f"every {B.QUIET_WAIT_INTERVAL_S:.0f} s for up to MIN minutes before timing "
                        "(default 0: time at once)")
    opts = p.parse_args(argv)
    if opts.wait_quiet < 0:
        p.error(f"--wait-quiet takes minutes, 0 or more; got {opts.wait_quiet:g}")
    opts.models = [s for s in opts.models.split(",") if s]
    opts.peers = [s for s in opts.peers.split(",") if s]
    for bad, known, what in ((set(opts.models) - set(models()), models(), "model"),
                             (set(opts.peers) - set(PEERS), PEERS, "peer")):
        if bad:
            p.error(f"unknown {what} {', '.join(sorted(bad))}; known: {', '.join(known)}")
    return opts


def main(argv=None) -> None:
    opts = _parse(argv)
    workdir = Path(opts.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    opts.db = opts.db or str(workdir / "bench_model.db")
    run_start = time.perf_counter()
    import compiler

    print(f"# {platform.processor() or platform.machine()} ({compiler.target.host_cpu_name()}), {THREADS} "
          f"threads, {os.cpu_count()} CPUs; fp32, batch 1; each time the median of {opts.rounds} fresh "
          f"processes (interleaved; up to {2 * opts.rounds} where the vCPUs moved), each the median of "
          f"{opts.repeat} timings", flush=True)
    prepared = []
    for name in opts.models:  # every model built (and tuned) before the first timing
        print(f"{name}:", flush=True)
        m = prepare(name, opts, workdir)
        for note in m.notes:
            print(f"  {note}", flush=True)
        prepared.append(m)
    before = B.wait_until_quiet(quietness, opts.wait_quiet)
    print(f"# before the timings: {before.describe()}", flush=True)
    results = []
    for m in prepared:
        print(f"{m.name}, timed:", flush=True)
        runner = ChildRunner()
        chosen = contenders(m, opts.peers, opts.repeat, opts.min_ms)
        placement = PlacementChecks()
        timings = B.time_interleaved(chosen, THREADS, opts.rounds, runner=runner, placement=placement)
        print(f"  {placement.describe()}", flush=True)
        B.print_rounds(timings)
        results.append(Result(m, timings, dict(runner.replies)))
    after = quietness()
    print(f"# after the timings: {after.describe()}", flush=True)

    peak = max(before.many, after.many)
    print()
    note = B.busy_note([before, after], by_round=True)
    print(f"# {note}" if note else "# quiet machine (checked before the timings and after them)")
    print(f"# FP32 FMA peak {peak / 1e9:.1f} GFLOPS on {THREADS} threads; speedups = peer ms / ours ms, "
          "for ours tuned where there is one, else untuned (as overhead, % peak and MiB ours)")
    print(B.format_table(TABLE_HEADER, [table_row(r, peak) for r in results]))
    print()
    all_verdicts = []
    for r in results:
        if r.model.mismatch:
            print(f"{r.model.name}: MISMATCH against onnxruntime: no verdict")
        all_verdicts += verdicts(r)
    kernel_lines = []
    for r in results:
        rows = kernels_vs_log(r, opts.db) if TUNED in r.replies else []
        if rows:
            ratios = deployed_ratios(rows, LOGGED)
            values = [ratio for ratio, _ in ratios]
            kernel, _, logged, deployed, _ = ratios[0][1]
            kernel_lines.append(f"# {r.model.name}: {len(rows)} tuned kernels, deployed / log from "
                                f"{min(values):.2f}x to {max(values):.2f}x; furthest: {kernel}, "
                                f"{logged * 1e3:.3f} ms in the log, {deployed * 1e3:.3f} ms deployed")
            if same_run := deployed_vs_alone(rows):
                kernel_lines.append(f"# {r.model.name}: {same_run}")
            if lost := time_lost_in_model(r, rows):
                kernel_lines.append(f"# {r.model.name}: the most time lost in the model against the log: "
                                    f"{lost}")
            all_verdicts.append(B.Verdict(f"{r.model.name} tuned kernels deployed / log, the furthest",
                                          ratios[0][0], 1.0, within=KERNEL_VS_LOG,
                                          withheld=r.timings[TUNED].noise() or stale_figures(rows, opts.db)))
    for line in B.verdict_lines(all_verdicts, [before, after], by_round=True):
        print(line)
    for line in kernel_lines:
        print(line)
    for r in results:
        deployed = r.deployed()
        if r.model.estimate_s and deployed:
            print(f"# {r.model.name}: {deployed.against(r.model.estimate_s)}")
    tune_s = sum(r.model.tune_s or 0 for r in results)
    print(f"# whole run: {(time.perf_counter() - run_start) / 60:.1f} min wall time"
          + (f" (tuning {tune_s / 60:.1f} min)" if opts.tune else ""))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(child_main(json.loads(sys.argv[2]))))
    else:
        main()
