"""Measuring on a Ray cluster: builds as Ray tasks, timing in Ray actors.

``address=None`` starts a local Ray instance; ``"auto"`` (``RAY_ADDRESS``, or the
cluster this machine belongs to), ``"host:port"`` or ``"ray://host:port"`` (Ray
Client, which needs ``pip install 'ray[client]'``) joins a cluster (already
initialised Ray is used as it is). What travels are the
messages of :mod:`measure.protocol`, encoded as bytes: a Ray task receives a
:class:`~measure.protocol.BuildRequest` and returns a
:class:`~measure.protocol.BuildReply`, an actor receives a
:class:`~measure.protocol.RunRequest` and returns a :class:`~measure.protocol.RunReply`
(templates from ``__main__`` travel by value inside them); workers import the
project and rebuild.

Connecting is thread-safe (the builder and the runner connect from their own
threads at once), and Ray started from such a thread is started from one that lives
until Ray shuts down (the processes of a local instance die with the thread that
started them). Ray that a builder or runner initialised itself is shut down when
the last of them closes, so the processes of a local instance end with the tuning.

* :class:`RayBuilder`: one Ray task per candidate (``num_cpus=1``), placed on a node
  with a free CPU, so builds spread over every CPU of the cluster. A build that
  crashes its Ray worker is retried once on another node, then gets a worker-crash
  result; no build goes to that node until a probe task returns from it or Ray
  reports it gone, so of a node that dies only the builds it was running are built
  again. A build that runs past ``timeout`` gets a build-timeout result (a build still
  running ``startup_grace`` seconds later is cancelled by force, killing its worker).
* :class:`RayRunner`: one actor per node for CPU targets (one per GPU, ``num_gpus=1``,
  for CUDA), so no two timings share a device. A candidate is built for its target's CPU or GPU
  architecture (the tuner's, where the target names none) on whichever node builds it, and
  timed only on devices of that hardware, for figures of the hardware that its record names;
  each node of other hardware is named once, in a warning. Where no device has it, every one
  times (as a local runner on another CPU does), and a warning says so. Each actor runs a
  :class:`~measure.local.LocalRunner`, whose sandbox process absorbs crashes and
  hangs of generated code exactly as locally. An actor that dies (its process
  killed, its node lost) is restarted by Ray; its candidate is retried once on
  another actor before it gets a worker-crash result. No candidate goes to an actor
  on a node where a build was lost, until that node is known to be well. Results reach the driver as they
  finish, so a node that leaves loses no finished trial.

Every reply names the code version of the node that made it (:func:`measure.code_version`): the
tuner files every measurement under its own version, so a node whose code is not the tuner's is
left out (named once, in a warning that gives both versions) and what it built or timed is done
again on the other nodes. A :class:`MeasureError` says so when no node runs the tuner's code.

On each node builds pause while that node's actor times (:mod:`measure.gate`). A node found
lost (a build there fails with ``NodeDiedError``, or Ray's list of nodes drops it, which its
health checks take some seconds to do) is named once, in a warning.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from compiler.runtime.cuda import attached_arch
from compiler.target import Target, host_cpu_name
from measure.base import Builder, Feed, Runner, as_feed, error_result
from measure.code_version import code_version
from measure.errors import MeasureError
from measure.gate import Gates
from measure.local import LocalRunner
from measure.protocol import BuildReply, BuildRequest, RunReply, RunRequest
from measure.records import ErrorKind, MeasureInput, MeasureResult
from measure.worker import build

__all__ = ["RayBuilder", "RayRunner", "connect", "check_address"]

logger = logging.getLogger(__name__)

_POLL_S = 0.02
_REFRESH_S = 2.0  # how often the set of alive nodes is read again
_NO_GPU = "RayRunner(gpu=True): no alive node of the Ray cluster has a GPU resource"


_connect_lock = threading.Lock()
_users = 0          # builders and runners that hold the connection they made
_initialised = False  # whether they initialised Ray (then the last to close shuts it down)


def check_address(address: str | None) -> None:
    """Raise :class:`MeasureError` for an address this process cannot connect to: not a
    string, or a Ray Client address (``ray://``) without Ray Client installed."""
    if address is None:
        return
    if not isinstance(address, str) or not address.strip():
        raise MeasureError(f"a Ray address is 'auto', 'host:port' or 'ray://host:port', got {address!r}")
    if address.startswith("ray://"):
        try:
            import grpc  # noqa: F401 - what ray[client] adds to ray
        except ImportError:
            raise MeasureError(f"Ray address {address!r} uses Ray Client, which is not installed "
                               "(it needs grpcio): pip install 'ray[client]'") from None


def connect(address: str | None = None, **init_kwargs) -> None:
    """Join (``address``) or start (None) Ray, unless this process is connected already.

    Safe to call from several threads at once. Ray initialised here stays up until
    ``ray.shutdown()``; builders and runners use :func:`_acquire` instead, which shuts
    down what they started when the last of them closes.
    """
    check_address(address)
    with _connect_lock:
        _init(address, init_kwargs)


def _init(address: str | None, init_kwargs: dict) -> bool:
    """``ray.init`` unless connected; whether it was called (the lock is held)."""
    if ray.is_initialized():
        return False
    init_kwargs = dict(init_kwargs)
    if not (address or "").startswith("ray://"):  # Ray Client would pass them on to the server
        init_kwargs.setdefault("include_dashboard", False)
        init_kwargs.setdefault("log_to_driver", False)
    if address is None:
        # Workers of a local instance import the project from where this process did.
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        init_kwargs.setdefault("runtime_env", {"env_vars": {"PYTHONPATH": path}})
    if threading.current_thread() is threading.main_thread():
        ray.init(address=address, **init_kwargs)
    else:
        _init_in_keeper(address, init_kwargs)
    return True


_keeper_stop = threading.Event()


def _init_in_keeper(address: str | None, init_kwargs: dict) -> None:
    """``ray.init`` in a thread that lives until Ray shuts down.

    On Linux the processes of a local Ray instance die with the *thread* that started
    them (``PR_SET_PDEATHSIG``), so starting Ray from a builder's or runner's thread,
    which ends with its batch, would kill the instance under the tuner.
    """
    started = threading.Event()
    failed: list[BaseException] = []

    def keep() -> None:
        try:
            ray.init(address=address, **init_kwargs)
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
            failed.append(exc)
        finally:
            started.set()
        if not failed:
            _keeper_stop.wait()

    _keeper_stop.clear()
    threading.Thread(target=keep, name="ray-keeper", daemon=True).start()
    started.wait()
    if failed:
        raise failed[0]


def _shutdown() -> None:
    """``ray.shutdown``, then let the keeper thread (if any) end."""
    if ray.is_initialized():
        ray.shutdown()
    _keeper_stop.set()


def _acquire(address: str | None, init_kwargs: dict) -> None:
    """Connect for a builder or runner, which calls :func:`_release` when it closes."""
    global _users, _initialised
    with _connect_lock:
        if _init(address, init_kwargs):
            _initialised = True
        _users += 1


def _release() -> None:
    """The end of an :func:`_acquire`; the last one shuts down the Ray that they started."""
    global _users, _initialised
    with _connect_lock:
        _users -= 1
        if _users == 0 and _initialised:
            _initialised = False
            _shutdown()


class _Connection:
    """A builder's or runner's hold on Ray: taken on first use, given back by :meth:`close`."""

    def __init__(self):
        self.held = False

    def open(self, address: str | None, init_kwargs: dict) -> None:
        if not self.held:
            _acquire(address, init_kwargs)
            self.held = True

    def close(self) -> None:
        if self.held:
            self.held = False
            _release()


# Node ids that a lost build showed dead. Ray's list of nodes says so only once its health
# checks miss the node (seconds later); a node id never comes back.
_dead_nodes: set[str] = set()
# Nodes where a build was lost and that a probe has not yet shown to run tasks: no build and
# no timing goes there meanwhile.
_suspect_nodes: set[str] = set()
# What a task gets when the node it was sent to is gone (or goes while it runs).
_NODE_GONE = (ray.exceptions.NodeDiedError, ray.exceptions.TaskUnschedulableError)
# Nodes whose loss was reported (a warning, once per node: the builder and the runner both notice).
_reported_lost: set[str] = set()
_report_lock = threading.Lock()
# Nodes left out because a reply showed their code version (the value) is not the tuner's. A
# node brought to the same version by a reinstall joins again under a new node id.
_foreign_nodes: dict[str, str] = {}


def _report_lost(node: str, why: str) -> None:
    """Warn, once per node, that ``node`` is lost (``why``: how that was noticed)."""
    with _report_lock:
        if node in _reported_lost:
            return
        _reported_lost.add(node)
    logger.warning("Ray node %s lost (%s): the candidates in flight there are retried on other nodes",
                   node, why)


def _alive_nodes() -> dict[str, dict]:
    """``{node id: resources}`` of the nodes that can measure: alive, and of the tuner's code."""
    return {n["NodeID"]: n.get("Resources", {}) for n in ray.nodes()
            if n.get("Alive") and n["NodeID"] not in _dead_nodes and n["NodeID"] not in _foreign_nodes}


def _gone(node: str) -> None:
    """Warn that ``node`` left the cluster, unless it was left out for its code."""
    if node not in _foreign_nodes:
        _report_lost(node, "it left the cluster")


def _on(node: str) -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(node, soft=False)


@dataclass(frozen=True)
class _Hardware:
    """What a candidate's target compiles for: ``CPU znver4`` (``-mcpu``), ``GPU sm_90`` (``-arch``)."""

    kind: str
    option: str
    name: str


@functools.lru_cache(maxsize=64)
def _hardware_of(target: str) -> _Hardware | None:
    """The hardware ``target`` compiles for (this process's CPU or GPU where it names none), or None
    where this process cannot tell (``cuda`` without a GPU here)."""
    t = Target(target)
    option = t.kind_info.model_option
    if option is None or t.model == "unknown":
        return None
    return _Hardware("CPU" if t.device_type == "cpu" else "GPU", option, t.model)


@functools.lru_cache(maxsize=64)
def _pinned(target: str) -> str:
    """``target`` naming its hardware (:meth:`compiler.target.Target.pinned`: ``llvm`` -> ``llvm
    -mcpu=znver4`` on a Zen 4 tuner), so that a node of another CPU or GPU builds for the tuner's
    target, not for its own. Where the tuner does not know it (``cuda`` on a machine without a
    GPU), a warning says that each node builds for its own."""
    t = Target(target)
    pinned = t.pinned()
    option = t.kind_info.model_option
    if option is not None and option not in pinned.options:
        logger.warning("target %r names no -%s and this machine cannot tell which: each Ray node builds "
                       "for its own (give the target -%s=...)", target, option, option)
    return str(pinned)


def _request_of(inp: MeasureInput) -> BuildRequest:
    request = BuildRequest.of(inp)
    request.task = {**request.task, "target": _pinned(request.task["target"])}
    return request


@ray.remote(num_cpus=0, max_retries=0)
def _probe() -> bool:
    """Returns from a node that can run tasks."""
    return True


@ray.remote(num_cpus=1, max_retries=0)
def _build(request: bytes) -> bytes:
    """A :class:`BuildRequest` in, a :class:`BuildReply` out (both encoded), naming this node's
    code version."""
    reply = build(BuildRequest.decode(request))
    reply.code_version = code_version()
    return reply.encode()


def _same_code(reply: BuildReply | RunReply, node: str, what: str) -> bool:
    """Whether ``reply`` comes from the tuner's code. Else ``node`` is left out (a warning, once per
    node): the tuner records its own code version with each measurement (see
    :func:`measure.code_version`), so figures of other code would be filed under it."""
    if reply.code_version == code_version():
        return True
    with _report_lock:
        known = node in _foreign_nodes
        _foreign_nodes[node] = reply.code_version
    if not known:
        theirs = reply.code_version or "one from before code versions"
        logger.warning("Ray node %s %s with code version %s, but this tuner runs %s: the node is left "
                       "out and its candidates are measured on the others (install the same version of "
                       "autotune-compiler on every node of the cluster)", node, what, theirs, code_version())
    return False


def _check_some_node_left() -> None:
    """Raise :class:`MeasureError` when every alive node was left out for its code."""
    if _foreign_nodes and not _alive_nodes():
        versions = ", ".join(sorted({v or "one from before code versions" for v in _foreign_nodes.values()}))
        raise MeasureError(f"no node of the Ray cluster runs this tuner's code version {code_version()} "
                           f"(found: {versions}): install the same version of autotune-compiler on every "
                           f"node of the cluster")


# ---------------------------------------------------------------------------- builder


class _BuildNodes:
    """The nodes a builder sends builds to: alive, with a CPU, and not suspect.

    A node where a build was lost is suspect: no build goes there until a probe task
    returns from it (its worker crashed, the node is fine) or Ray reports it gone. So
    of a node that dies only the builds that were running there are built again.
    """

    def __init__(self):
        self.cpus: dict[str, int] = {}
        self.suspects: dict[str, object] = {}  # node -> ObjectRef of its probe (None: not sent yet)
        self._refreshed = -float("inf")

    def refresh(self) -> None:
        """Read the alive nodes again (every ``_REFRESH_S``), and probe the suspects."""
        if time.monotonic() - self._refreshed < _REFRESH_S:
            return
        alive = _alive_nodes()
        for node in self.cpus.keys() - alive.keys():
            _gone(node)
        self.cpus = {n: int(r.get("CPU", 0)) for n, r in alive.items() if r.get("CPU", 0) >= 1}
        for node, probe in list(self.suspects.items()):
            if node not in alive:
                self._unsuspect(node)  # gone: nothing goes there anyway
            elif probe is None:
                self.suspects[node] = _probe.options(scheduling_strategy=_on(node)).remote()
        self._refreshed = time.monotonic()

    def usable(self) -> dict[str, int]:
        return {n: c for n, c in self.cpus.items() if n not in self.suspects}

    def left_out(self, node: str) -> None:
        """``node`` runs other code: no build goes there any more."""
        self.cpus.pop(node, None)
        self._unsuspect(node)
        _check_some_node_left()

    def probes(self) -> list:
        return [p for p in self.suspects.values() if p is not None]

    def lost(self, node: str, exc: BaseException) -> None:
        """A build was lost on ``node`` with ``exc``."""
        if isinstance(exc, _NODE_GONE):
            _report_lost(node, type(exc).__name__)
            _dead_nodes.add(node)
            self.cpus.pop(node, None)
            self._unsuspect(node)
        else:
            _suspect_nodes.add(node)
            self.suspects.setdefault(node, None)
            self._refreshed = -float("inf")  # probe it at once

    def probed(self, ref) -> None:
        """A probe returned (or failed)."""
        node = next(n for n, p in self.suspects.items() if p is ref)
        try:
            ray.get(ref)
            self._unsuspect(node)
        except _NODE_GONE as exc:
            self.lost(node, exc)
        except ray.exceptions.RayError:
            self.suspects[node] = None  # probe it again at the next refresh

    def _unsuspect(self, node: str) -> None:
        self.suspects.pop(node, None)
        _suspect_nodes.discard(node)

    def cancel_probes(self) -> None:
        for node, probe in list(self.suspects.items()):
            if probe is not None:
                ray.cancel(probe, force=True)
            self._unsuspect(node)


@dataclass
class _BuildJob:
    index: int
    attempt: int = 0
    avoid: str | None = None  # the node where the first attempt died
    node: str = ""
    start: float = 0.0


class RayBuilder(Builder):
    """Builds candidates as Ray tasks over every CPU of the cluster."""

    def __init__(self, address: str | None = None, timeout: float = 10, startup_grace: float = 30,
                 init_kwargs: dict | None = None):
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        check_address(address)
        self.address = address
        self.timeout = timeout
        self.startup_grace = startup_grace
        self.init_kwargs = dict(init_kwargs or {})
        self._connection = _Connection()

    streams = True

    def slots(self) -> int:
        """The CPUs of the cluster's alive nodes."""
        self._connection.open(self.address, self.init_kwargs)
        return max(1, sum(int(r.get("CPU", 0)) for r in _alive_nodes().values()))

    def build(self, inputs: Sequence[MeasureInput] | Feed, gates: Gates) -> Iterator[tuple[int, BuildReply]]:
        self._connection.open(self.address, self.init_kwargs)
        feed = as_feed(inputs)
        todo: deque[_BuildJob] = deque()
        seen = 0
        running: dict = {}  # ObjectRef -> _BuildJob
        nodes = _BuildNodes()
        try:
            while True:
                if len(feed) > seen:
                    n = len(feed)
                    todo.extend(_BuildJob(i) for i in range(seen, n))
                    seen = n
                if gates.stop.is_set():
                    todo.clear()
                if not todo and not running:
                    if feed.done(seen) or gates.stop.is_set():
                        return
                    feed.wait(seen, _POLL_S)
                    continue
                nodes.refresh()
                self._dispatch(feed, todo, running, nodes.usable(), gates)
                waiting = list(running) + nodes.probes()
                if not waiting:
                    time.sleep(_POLL_S)
                    continue
                ready, _ = ray.wait(waiting, num_returns=1, timeout=_POLL_S)
                for ref in ready:
                    if ref not in running:
                        nodes.probed(ref)
                        continue
                    job = running.pop(ref)
                    # A node lost with it is marked before its gate opens for the runner.
                    result = self._result(ref, job, todo, nodes)
                    gates(job.node).build_done()
                    if result is not None:
                        yield job.index, result
                now = time.monotonic()
                for ref, job in list(running.items()):
                    if now - job.start > self.timeout + self.startup_grace:
                        ray.cancel(ref, force=True)
                        del running[ref]
                        gates(job.node).build_done()
                        why = f"build took more than {self.timeout:g} s; cancelled"
                        yield job.index, BuildReply(None, why, now - job.start, ErrorKind.BUILD_TIMEOUT,
                                                     job.node)
        finally:
            for ref, job in running.items():  # abandoned: the consumer went away
                ray.cancel(ref, force=True)
                gates(job.node).build_done()
            nodes.cancel_probes()

    def _dispatch(self, inputs, todo: deque, running: dict, nodes: dict, gates: Gates) -> None:
        load: dict[str, int] = {}
        for job in running.values():
            load[job.node] = load.get(job.node, 0) + 1
        for node, cpus in nodes.items():
            while todo and load.get(node, 0) < cpus:
                job = next((j for j in todo if j.avoid != node or len(nodes) == 1), None)
                if job is None or not gates(node).try_build():
                    break
                todo.remove(job)
                inp = inputs[job.index]
                ref = _build.options(scheduling_strategy=_on(node)).remote(_request_of(inp).encode())
                job.node, job.start = node, time.monotonic()
                running[ref] = job
                logger.debug("build of candidate %d (attempt %d) sent to node %s", job.index, job.attempt,
                             node)
                load[node] = load.get(node, 0) + 1

    def _result(self, ref, job: _BuildJob, todo: deque, nodes: _BuildNodes) -> BuildReply | None:
        elapsed = time.monotonic() - job.start
        try:
            result = BuildReply.decode(ray.get(ref))
            if not _same_code(result, job.node, "built a candidate"):
                nodes.left_out(job.node)
                todo.appendleft(job)  # built again by the tuner's code, on another node
                return None
        except ray.exceptions.RayTaskError as exc:
            return BuildReply(None, f"the build task failed: {exc}", elapsed, ErrorKind.COMPILE_ERROR,
                               job.node)
        except ray.exceptions.RayError as exc:
            nodes.lost(job.node, exc)
            if job.attempt == 0:
                logger.info("build of candidate %d lost on node %s (%s); retrying elsewhere", job.index,
                            job.node, type(exc).__name__)
                todo.appendleft(_BuildJob(job.index, 1, job.node))
                return None
            return BuildReply(None, f"the build worker died twice: {type(exc).__name__}: {exc}", elapsed,
                               ErrorKind.WORKER_CRASH, job.node)
        if result.artifact is not None and result.build_time > self.timeout:
            return BuildReply(None, f"build took {result.build_time:.1f} s, more than {self.timeout:g} s",
                               result.build_time, ErrorKind.BUILD_TIMEOUT, result.worker)
        return result

    def close(self) -> None:
        self._connection.close()

    def __getstate__(self):
        return {**self.__dict__, "_connection": _Connection()}

    def __repr__(self) -> str:
        return f"RayBuilder(address={self.address!r}, timeout={self.timeout})"


# ---------------------------------------------------------------------------- runner


# (target hardware, node) pairs whose difference was reported (a warning, once per pair).
_reported_hardware: set[tuple[str, str]] = set()


def _timers_of(want: _Hardware, actors) -> list:
    """The actors that may time a candidate built for ``want``: those whose device is that CPU or
    GPU, for figures of the hardware that the records name. A node of other hardware is named
    once, in a warning. Where no device is ``want``, every one times (as a local runner on
    another CPU does; a warning says so), once every actor has said what it has (none while one
    is still starting)."""
    actors = list(actors)
    same = [a for a in actors if a.hardware == want.name]
    if any(a.restarting is not None and not a.hardware for a in actors):  # some not known yet
        return same
    for a in actors:
        if a.hardware != want.name and (want.name, a.node) not in _reported_hardware:
            _reported_hardware.add((want.name, a.node))
            if same:
                logger.warning("Ray node %s has %s %s, not the target's %s: it times no candidate of this "
                               "target (tune with -%s=%s to tune for it)", a.node, want.kind, a.hardware,
                               want.name, want.option, a.hardware)
            else:
                logger.warning("no node of the Ray cluster has the target's %s %s: node %s (%s %s) times its "
                               "candidates, and the log files those figures under %s", want.kind, want.name,
                               a.node, want.kind, a.hardware, want.name)
    return same or actors


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class _RunActor:
    """Times candidates on one node (or one GPU) through a LocalRunner and its sandbox; the
    timing settings come with each request."""

    def __init__(self, devices: list[int] | None):
        self.runner = LocalRunner(devices=devices)
        self.node = ray.get_runtime_context().get_node_id()
        self.gpu = devices is not None

    def ready(self) -> str:
        """Its device, once the actor is up: the node's CPU (LLVM's name for it), or its GPU's
        architecture (``sm_90``; ``"unknown"`` where the driver cannot say)."""
        return (attached_arch(0) or "unknown") if self.gpu else host_cpu_name()

    def pid(self) -> int:
        return os.getpid()

    def run(self, request: bytes) -> bytes:
        """A :class:`RunRequest` in, a :class:`RunReply` out (both encoded)."""
        reply = self.runner.call(RunRequest.decode(request))
        reply.worker, reply.code_version = self.node, code_version()
        return reply.encode()


@dataclass
class _Actor:
    key: str
    node: str
    handle: object
    hardware: str = ""  # its device's CPU or GPU architecture, as its ``ready`` said
    busy: bool = False
    restarting: object = None  # the ObjectRef of a ping while Ray restarts it
    holds_gate: bool = False
    asked_gate: bool = False


@dataclass
class _RunJob:
    index: int
    input: MeasureInput
    build: BuildReply
    attempt: int = 0
    hardware: _Hardware | None = None  # what its target compiles for (None: any device will do)
    avoid: str | None = None
    actor: str = ""
    start: float = field(default=0.0)


class RayRunner(Runner):
    """Times candidates in Ray actors: one per node (CPU targets) or per GPU (``gpu=True``).

    The timing parameters are those of :class:`~measure.local.LocalRunner`. With
    ``gpu=True`` each actor holds one GPU (``num_gpus=1``; Ray sets its
    ``CUDA_VISIBLE_DEVICES``), and its LocalRunner times CUDA candidates there with CUDA
    events, exactly as locally.
    """

    def __init__(self, address: str | None = None, number: int = 4, repeat: int = 3,
                 min_repeat_ms: float = 50, timeout: float = 10, cooldown_ms: float = 0,
                 cache_flush: bool | str = False, check_correctness: bool = True, gpu: bool = False,
                 init_kwargs: dict | None = None):
        # The settings, checked as LocalRunner checks them; it also writes the requests.
        self._settings = LocalRunner(number, repeat, min_repeat_ms, timeout, cooldown_ms, cache_flush,
                                     check_correctness)
        check_address(address)
        self.address = address
        self.runner_kwargs = {"number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms,
                              "timeout": timeout, "cooldown_ms": cooldown_ms,
                              "cache_flush": self._settings.cache_flush,
                              "check_correctness": check_correctness}
        self.gpu = gpu
        self.init_kwargs = dict(init_kwargs or {})
        self._actors: dict[str, _Actor] = {}
        self._connection = _Connection()

    @property
    def cache_flush(self) -> bool | str:
        """What each node's runner evicts of a CPU candidate's arguments before each call."""
        return self._settings.cache_flush

    @property
    def _deadline(self) -> float:
        """Seconds after which a call that is still running means a stuck actor (it is killed)."""
        t = self.runner_kwargs["timeout"]
        return max(60.0, 6 * t) + 2 * t + 30

    # ------------------------------------------------------------------ actors

    def _refresh(self, gates: Gates | None = None) -> None:
        nodes = _alive_nodes()
        for key, actor in list(self._actors.items()):
            if actor.node not in nodes:
                _gone(actor.node)
                ray.kill(actor.handle, no_restart=True)
                if gates is not None:
                    self._forget(key, gates)
                else:
                    del self._actors[key]
        for node, resources in nodes.items():
            slots = int(resources.get("GPU", 0)) if self.gpu else 1
            for k in range(slots):
                key = f"{node}/gpu{k}" if self.gpu else node
                if key not in self._actors:
                    opts = {"scheduling_strategy": _on(node)}
                    if self.gpu:
                        opts["num_gpus"] = 1
                    # Ray gives a GPU actor one GPU (CUDA_VISIBLE_DEVICES): ordinal 0.
                    handle = _RunActor.options(**opts).remote([0] if self.gpu else None)
                    self._actors[key] = _Actor(key, node, handle, restarting=handle.ready.remote())

    def slots(self) -> int:
        """One per alive node (per GPU with ``gpu=True``)."""
        self._connection.open(self.address, self.init_kwargs)
        nodes = _alive_nodes().values()
        return max(1, sum(int(r.get("GPU", 0)) for r in nodes) if self.gpu else len(nodes))

    def actor_pids(self) -> dict[str, int]:
        """``{actor key: process id}`` of the idle actors (for tests and diagnostics)."""
        self._connection.open(self.address, self.init_kwargs)
        self._refresh()
        return dict(zip(self._actors, ray.get([a.handle.pid.remote() for a in self._actors.values()])))

    # ------------------------------------------------------------------ running

    def run(self, jobs: queue.Queue, gates: Gates) -> Iterator[tuple[int, MeasureResult]]:
        self._connection.open(self.address, self.init_kwargs)
        pending: deque[_RunJob] = deque()
        running: dict = {}  # ObjectRef -> _RunJob
        closed, refreshed = False, 0.0
        try:
            while not closed or pending or running:
                if time.monotonic() - refreshed > _REFRESH_S:
                    self._refresh(gates)
                    refreshed = time.monotonic()
                closed = self._take(jobs, pending, closed, idle=not running and not pending, gates=gates)
                if self.gpu and not self._actors:  # no node has a GPU: no actor would ever take them
                    while pending:
                        job = pending.popleft()
                        yield job.index, error_result(ErrorKind.RUNTIME_ERROR, _NO_GPU, job.build.build_time)
                self._dispatch(pending, running, gates)
                waiting = list(running) + [a.restarting for a in self._actors.values() if a.restarting]
                if not waiting:
                    if pending:  # waiting for a gate (builds finishing on that node)
                        time.sleep(_POLL_S)
                    continue
                ready, _ = ray.wait(waiting, num_returns=1, timeout=_POLL_S)
                for ref in ready:
                    if ref in running:
                        job = running.pop(ref)
                        result = self._result(ref, job, pending, gates)
                        if result is not None:
                            yield job.index, result
                    else:
                        self._restarted(ref, gates)
                self._check_deadlines(running)
                if not pending:
                    self._release(gates)
        finally:
            self._release(gates, everything=True)

    def _take(self, jobs: queue.Queue, pending: deque, closed: bool, idle: bool, gates: Gates) -> bool:
        while not closed:
            try:
                job = jobs.get(timeout=_POLL_S) if idle and not pending else jobs.get_nowait()
            except queue.Empty:
                return closed
            if job is None:
                return True
            if not gates.stop.is_set():
                i, inp, build = job
                pending.append(_RunJob(i, inp, build, hardware=_hardware_of(inp.task.target)))
        return closed

    def _gate_open(self, actor: _Actor, gates: Gates) -> bool:
        if self.gpu or actor.holds_gate:
            return True
        gate = gates(actor.node)
        if not actor.asked_gate:
            gate.request_timing()
            actor.asked_gate = True
        if gate.try_timing():
            actor.asked_gate, actor.holds_gate = False, True
        return actor.holds_gate

    def _release(self, gates: Gates, everything: bool = False) -> None:
        for actor in self._actors.values():
            if actor.holds_gate and (everything or not actor.busy):
                gates(actor.node).release_timing()
                actor.holds_gate = False
            if actor.asked_gate and everything:
                # An unanswered request: take the gate once the builds end, then give it back.
                gates(actor.node).try_timing() and gates(actor.node).release_timing()
                actor.asked_gate = False

    def _dispatch(self, pending: deque, running: dict, gates: Gates) -> None:
        allowed: dict[_Hardware | None, set] = {None: set(self._actors)}  # actors' keys, by hardware
        free = [a for a in self._actors.values() if not a.busy and a.restarting is None
                and a.node not in _dead_nodes and a.node not in _suspect_nodes]
        for job in list(pending):
            if not free:
                return
            if job.hardware not in allowed:
                allowed[job.hardware] = {a.key for a in _timers_of(job.hardware, self._actors.values())}
            keys = allowed[job.hardware]
            idle = [a for a in free if a.key in keys]
            others = [a for a in idle if a.key != job.avoid]
            choice = others or (idle if len(keys) == 1 else [])
            actor = next((a for a in choice if self._gate_open(a, gates)), None)
            if actor is None:
                continue
            pending.remove(job)
            free.remove(actor)
            job.actor, job.start = actor.key, time.monotonic()
            actor.busy = True
            request = self._settings.request(job.input.task, job.build, device=0)
            running[actor.handle.run.remote(request.encode())] = job

    def _result(self, ref, job: _RunJob, pending: deque, gates: Gates) -> MeasureResult | None:
        actor = self._actors.get(job.actor)
        try:
            reply = RunReply.decode(ray.get(ref))
            if actor is not None and not _same_code(reply, actor.node, "timed a candidate"):
                ray.kill(actor.handle, no_restart=True)
                self._forget(job.actor, gates)
                pending.appendleft(job)  # timed again by the tuner's code, on another node
                _check_some_node_left()
                return None
            result = reply.result(job.build.build_time)
        except ray.exceptions.RayActorError as exc:
            if actor is not None:  # Ray restarts it; ping it to know when it is back
                actor.restarting = actor.handle.ready.remote()
            if job.attempt == 0:
                logger.info("run of candidate %d lost with actor %s (%s); retrying", job.index, job.actor,
                            type(exc).__name__)
                pending.appendleft(_RunJob(job.index, job.input, job.build, attempt=1, avoid=job.actor,
                                           hardware=job.hardware))
                return None
            why = f"the run actor died twice: {type(exc).__name__}: {exc}"
            return error_result(ErrorKind.WORKER_CRASH, why, job.build.build_time,
                                time.monotonic() - job.start, job.actor)
        except ray.exceptions.RayError as exc:
            result = error_result(ErrorKind.RUNTIME_ERROR, f"the run call failed: {exc}",
                                  job.build.build_time, time.monotonic() - job.start, job.actor)
        if actor is not None:
            actor.busy = False
        return result

    def _restarted(self, ping, gates: Gates) -> None:
        for key, actor in list(self._actors.items()):
            if actor.restarting is ping:
                try:
                    actor.hardware = ray.get(ping)
                    actor.restarting, actor.busy = None, False
                except ray.exceptions.RayError:
                    if actor.node in _alive_nodes():  # a call made while Ray restarts it fails: ask again
                        time.sleep(_POLL_S)
                        actor.restarting = actor.handle.ready.remote()
                    else:  # gone for good with its node: forget it, and free its node's gate
                        _gone(actor.node)
                        self._forget(key, gates)
                return

    def _forget(self, key: str, gates: Gates) -> None:
        """Drop an actor, giving back the timing gate it holds or asked for (else builds wait forever)."""
        actor = self._actors.pop(key)
        if actor.holds_gate:
            gates(actor.node).release_timing()
        elif actor.asked_gate:
            gates(actor.node).try_timing() and gates(actor.node).release_timing()

    def _check_deadlines(self, running: dict) -> None:
        now = time.monotonic()
        for job in running.values():
            actor = self._actors.get(job.actor)
            if actor is not None and now - job.start > self._deadline:
                logger.warning("actor %s is stuck; restarting it", job.actor)
                ray.kill(actor.handle, no_restart=False)
                job.start = now  # its call now fails, and the candidate is retried

    def close(self) -> None:
        for actor in self._actors.values():
            try:
                ray.kill(actor.handle, no_restart=True)
            except Exception:
                pass
        self._actors.clear()
        self._connection.close()

    def __getstate__(self):
        return {**self.__dict__, "_actors": {}, "_connection": _Connection()}

    def __repr__(self) -> str:
        return f"RayRunner(address={self.address!r}, gpu={self.gpu}, {self.runner_kwargs})"
