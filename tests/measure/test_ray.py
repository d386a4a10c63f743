"""RayBuilder + RayRunner on a real local Ray instance (two CPUs, started once for the module)."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from measure_faults import costs_ok, inputs_for

import db
import measure.ray as ray_measure
from compiler.runtime.cuda import attached_arch
from compiler.target import host_cpu_name
from measure import (
    ErrorKind,
    MeasureError,
    MeasureInput,
    MeasureOptions,
    RunReply,
    measure_batch,
    measure_stream,
)
from search_spaces import create_task

# One module of Ray tests at a time (``--dist loadgroup``): each starts Ray of its own.
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module")
def ray_options(ray_cluster):
    # A build's clock includes a fresh Ray worker importing the project: generous on a loaded
    # machine, yet well below the minute that the slow_build fault sleeps.
    with MeasureOptions(ray_measure.RayBuilder(timeout=10, startup_grace=5),
                        ray_measure.RayRunner(number=2, repeat=2, min_repeat_ms=5, timeout=3)) as options:
        yield options


def test_ray_measures_and_isolates_faults(faulty_task, matmul_task, ray_options):
    faults = ["none", "abort", "hang", "wrong", "raise", "slow_build", "none"]
    configs = matmul_task.config_space.sample(3, rng=21)
    inputs = inputs_for(faulty_task, faults) + [MeasureInput(matmul_task, c) for c in configs]
    results = measure_batch(inputs, ray_options)
    kinds = [r.error_kind for r in results]
    assert kinds == [None, ErrorKind.RUNTIME_ERROR, ErrorKind.RUN_TIMEOUT, ErrorKind.WRONG_ANSWER,
                     ErrorKind.INSTANTIATION_ERROR, ErrorKind.BUILD_TIMEOUT, None, None, None, None], \
        [(r.error_kind, r.error_msg) for r in results]
    assert all(costs_ok(r) for r in results if r.error_kind is None)
    node = ray_measure.ray.get_runtime_context().get_node_id()
    assert {results[i].worker for i in (0, 6, 7)} == {node}


def test_a_node_running_other_code_is_left_out_and_none_left_is_a_clear_error(matmul_task, ray_cluster,
                                                                             monkeypatch, caplog):
    """The tuner files every measurement under its own code version: a node that runs other code
    (here: the tuner's version made to differ) is left out, and with no other node the measuring
    stops, naming both versions."""
    monkeypatch.setattr(ray_measure, "_foreign_nodes", {})  # this module's later tests use the node
    config = matmul_task.config_space.sample(1, rng=23)[0]

    def measure_on_the_node():
        with MeasureOptions(ray_measure.RayBuilder(timeout=10, startup_grace=5),
                            ray_measure.RayRunner(number=2, repeat=2, min_repeat_ms=5, timeout=3)) as options:
            return measure_batch([MeasureInput(matmul_task, config)], options)

    # Of the same code: measured there. (This also sends the node the remote functions, which
    # travel by value: patched before, they would carry the tuner's patched version along.)
    (result,) = measure_on_the_node()
    assert result.error_kind is None and costs_ok(result) and not ray_measure._foreign_nodes
    monkeypatch.setattr(ray_measure, "code_version", lambda: "0.0.9+tuner")
    with pytest.raises(MeasureError, match=r"no node of the Ray cluster runs this tuner's code version "
                                           r"0\.0\.9\+tuner \(found: 0\.1\..*install the same version"):
        measure_on_the_node()
    node = ray_measure.ray.get_runtime_context().get_node_id()
    assert list(ray_measure._foreign_nodes) == [node]
    assert [m for m in caplog.messages if "built a candidate with code version 0.1." in m
            and "but this tuner runs 0.0.9+tuner: the node is left out" in m]
    # a timing reply alike (one warning per node), and one from a node older than code versions
    caplog.clear()
    for _ in range(2):
        assert not ray_measure._same_code(RunReply((1e-3,), code_version="0.1.0+other"), "n1",
                                          "timed a candidate")
    assert ray_measure._foreign_nodes["n1"] == "0.1.0+other"
    assert len([m for m in caplog.messages if "n1 timed a candidate with code version 0.1.0+other" in m]) == 1
    assert not ray_measure._same_code(RunReply((1e-3,)), "n2", "timed a candidate")
    assert "one from before code versions" in caplog.messages[-1]
    assert ray_measure._same_code(RunReply((1e-3,), code_version="0.0.9+tuner"), "n3", "timed a candidate")
    assert "n3" not in ray_measure._foreign_nodes


def test_killed_actor_is_replaced_and_its_candidate_retried(matmul_task, ray_options, caplog):
    caplog.set_level(logging.INFO, logger="measure.ray")
    (key, pid), = ray_options.runner.actor_pids().items()
    configs = matmul_task.config_space.sample(5, rng=22)
    stream = measure_stream([MeasureInput(matmul_task, c) for c in configs], ray_options)
    first = [next(stream)]
    os.kill(pid, signal.SIGKILL)
    results = [r for _, r in first + list(stream)]
    assert len(results) == 5
    assert all(costs_ok(r) for r in results), [(r.error_kind, r.error_msg) for r in results]
    new_pid = ray_options.runner.actor_pids()[key]
    assert new_pid != pid
    # retried as it was sent: for the same CPU, on the node's new actor
    assert [m for m in caplog.messages if "lost with actor" in m], caplog.messages
    assert not [m for m in caplog.messages if "CPU" in m], caplog.messages


def test_local_and_ray_agree(faulty_task, local_options, ray_options):
    task = create_task("matmul", (64, 64, 64, "float32"), "llvm")
    configs = task.config_space.sample(3, rng=23)
    inputs = inputs_for(faulty_task, ["none", "wrong", "abort"])
    inputs += [MeasureInput(task, c) for c in configs]
    local = measure_batch(inputs, local_options)
    remote = measure_batch(inputs, ray_options)
    assert [r.error_kind for r in local] == [r.error_kind for r in remote] == [
        None, ErrorKind.WRONG_ANSWER, ErrorKind.RUNTIME_ERROR, None, None, None], \
        [(r.error_kind, r.error_msg) for r in local + remote]
    # Both time every good candidate (how fast depends on the load of the machine: not checked).
    assert all(costs_ok(r) for r in local[3:] + remote[3:])


def _other_cpu() -> str:
    """A CPU other than this machine's whose code any x86-64 host of ours runs (AVX2 and FMA)."""
    return "broadwell" if host_cpu_name() == "haswell" else "haswell"


def test_builds_name_the_tuners_cpu_and_a_target_no_node_has_is_timed_with_a_warning(ray_options, caplog,
                                                                                        monkeypatch):
    """Builds compile for the target's CPU (the tuner's where the target names none), whatever
    node builds them; a target whose CPU no node has is timed on the nodes there are, as a
    local runner on another CPU does, and a warning says so."""
    monkeypatch.setattr(ray_measure, "_reported_hardware", set())
    host = host_cpu_name()
    plain = create_task("matmul", (32, 32, 32, "float32"), "llvm")
    request = ray_measure._request_of(MeasureInput(plain, plain.config_space.sample(1, rng=3)[0]))
    assert request.task["target"] == f"llvm -mcpu={host}" and plain.target == "llvm"
    # a GPU target names the tuner's GPU; without one, a warning says that each node picks its own
    ray_measure._pinned.cache_clear()
    arch = attached_arch()
    assert ray_measure._pinned("cuda") == (f"cuda -arch={arch}" if arch else "cuda")
    assert bool(arch) != any("target 'cuda' names no -arch and this machine cannot tell which" in m
                             for m in caplog.messages)
    other = _other_cpu()
    task = create_task("matmul", (32, 32, 32, "float32"), f"llvm -mcpu={other}")
    results = measure_batch([MeasureInput(task, c) for c in task.config_space.sample(2, rng=4)], ray_options)
    assert all(r.error_kind is None and costs_ok(r) for r in results), [(r.error_kind, r.error_msg)
                                                                       for r in results]
    node = ray_measure.ray.get_runtime_context().get_node_id()
    warned = [m for m in caplog.messages if f"no node of the Ray cluster has the target's CPU {other}" in m]
    assert len(warned) == 1 and f"node {node} (CPU {host}) times its candidates" in warned[0], caplog.messages


def test_only_nodes_of_the_targets_hardware_time_its_candidates(caplog, monkeypatch):
    """Of a cluster of two CPUs (or GPUs), only the nodes of the target's time its candidates;
    each other node is named once. While a node has not said what it has, nothing else is chosen."""
    monkeypatch.setattr(ray_measure, "_reported_hardware", set())
    zen4, sapphire, zen3 = (ray_measure._Hardware("CPU", "mcpu", name)
                            for name in ("znver4", "sapphirerapids", "znver3"))

    def actor(node, hardware, starting=False):
        return ray_measure._Actor(node, node, handle=None, hardware=hardware,
                                  restarting=object() if starting else None)

    zen, xeon, new = actor("a", "znver4"), actor("b", "sapphirerapids"), actor("c", "", starting=True)
    assert ray_measure._timers_of(zen4, [zen, xeon, new]) == [zen]
    assert ray_measure._timers_of(sapphire, [zen, new]) == []  # c may be the one: wait
    assert not caplog.messages
    for _ in range(2):
        assert ray_measure._timers_of(zen4, [zen, xeon]) == [zen]
    assert caplog.messages == ["Ray node b has CPU sapphirerapids, not the target's znver4: it times no "
                               "candidate of this target (tune with -mcpu=sapphirerapids to tune for it)"]
    # a restarted actor keeps what it said before
    zen.restarting = object()
    assert ray_measure._timers_of(zen4, [zen, xeon]) == [zen]
    assert ray_measure._timers_of(zen3, [zen, xeon]) == [zen, xeon]
    none_has = "no node of the Ray cluster has the target's CPU znver3"
    assert len([m for m in caplog.messages if none_has in m]) == 2
    # GPUs alike
    caplog.clear()
    h100, a100 = actor("g1", "sm_90"), actor("g2", "sm_80")
    assert ray_measure._timers_of(ray_measure._Hardware("GPU", "arch", "sm_90"), [h100, a100]) == [h100]
    assert caplog.messages == ["Ray node g2 has GPU sm_80, not the target's sm_90: it times no candidate of "
                               "this target (tune with -arch=sm_80 to tune for it)"]


def test_a_candidates_hardware_is_its_targets():
    ray_measure._hardware_of.cache_clear()
    assert ray_measure._hardware_of("llvm") == ray_measure._Hardware("CPU", "mcpu", host_cpu_name())
    assert ray_measure._hardware_of("llvm -mcpu=haswell").name == "haswell"
    assert ray_measure._hardware_of("cuda -arch=sm_80") == ray_measure._Hardware("GPU", "arch", "sm_80")
    arch = attached_arch()  # without a GPU here, "cuda" says nothing: any GPU times it
    assert ray_measure._hardware_of("cuda") == (ray_measure._Hardware("GPU", "arch", arch) if arch else None)


# ---------------------------------------------------------------------------- connecting


class _FakeRay:
    """Stands in for ``ray``'s init/shutdown: an init that takes a while, as a real one does."""

    def __init__(self):
        self.initialised = False
        self.inits = 0
        self.shutdowns = 0

    def is_initialized(self) -> bool:
        return self.initialised

    def init(self, address=None, **kwargs) -> None:
        self.inits += 1
        if self.initialised:
            raise AssertionError("Perhaps you called ray.init twice by accident?")
        threading.Event().wait(0.3)  # the window in which a second, unlocked caller also inits
        self.initialised = True

    def shutdown(self) -> None:
        self.shutdowns += 1
        self.initialised = False


@pytest.fixture
def fake_ray(monkeypatch):
    fake = _FakeRay()
    for name in ("is_initialized", "init", "shutdown"):
        monkeypatch.setattr(ray_measure.ray, name, getattr(fake, name))
    # Connections that other tests' options hold are not this test's.
    monkeypatch.setattr(ray_measure, "_users", 0)
    monkeypatch.setattr(ray_measure, "_initialised", False)
    return fake


def test_builder_and_runner_connect_at_once_and_init_once(fake_ray):
    builder, runner = ray_measure.RayBuilder(), ray_measure.RayRunner()
    errors = []

    def open_(component):
        try:
            component._connection.open(None, {})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_, args=(c,)) for c in (builder, runner)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and fake_ray.inits == 1
    builder.close()
    assert fake_ray.shutdowns == 0  # the runner still uses it
    runner.close()
    assert fake_ray.shutdowns == 1 and not fake_ray.initialised
    runner.close()  # closing twice gives nothing back twice
    assert fake_ray.shutdowns == 1


def test_ray_initialised_elsewhere_stays_up(fake_ray):
    ray_measure.connect(None)  # the user's (or a fixture's) own connection
    builder = ray_measure.RayBuilder()
    builder._connection.open(None, {})
    builder.close()
    assert fake_ray.inits == 1 and fake_ray.shutdowns == 0 and fake_ray.initialised


@pytest.mark.parametrize("make", [ray_measure.RayBuilder, ray_measure.RayRunner])
def test_ray_client_address_without_ray_client_names_the_install(monkeypatch, make):
    monkeypatch.setitem(sys.modules, "grpc", None)  # as where ray[client] is not installed
    with pytest.raises(MeasureError, match=r"'ray://head:10001' uses Ray Client.*pip install 'ray\[client\]"):
        make(address="ray://head:10001")
    make(address="head:6379")  # a cluster's own address needs no Ray Client (and connects to nothing yet)


def test_cli_cluster_ray_client_without_ray_client_fails_before_tuning(monkeypatch, tmp_path, capsys):
    from autotune.cli import main

    monkeypatch.setitem(sys.modules, "grpc", None)
    monkeypatch.chdir(tmp_path)
    code = main(["tune", "dense", "--args", "4,32,32,float32", "--trials", "2", "--cluster", "ray://head:10001",
                 "--db", "r.db"])
    err = capsys.readouterr().err
    assert code != 0 and "pip install 'ray[client]'" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r.db").exists()


def _ray_processes(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads processes from /proc")
def test_cli_cluster_local_tunes_and_leaves_no_ray_process(tmp_path):
    root = Path(__file__).resolve().parents[2]
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths have a length limit
    env = {**os.environ, "RAY_TMPDIR": ray_tmp,
           "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)}
    try:
        p = subprocess.run([sys.executable, "-m", "autotune", "tune", "matmul", "--args", "32,32,32,float32",
                            "--trials", "4", "--tuner", "random", "--cluster", "local", "--timeout", "60",
                            "--db", "r.db"],  # a fresh Ray worker's first build on a busy machine: slow
                           capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "ray.init twice" not in p.stderr
        with db.open(str(tmp_path / "r.db")) as log:
            records = log.records()
        assert len(records) >= 4 and all(r.error_kind is None and r.costs for r in records)
        left = _ray_processes(ray_tmp)
        assert left == [], [(pid, Path(f"/proc/{pid}/cmdline").read_bytes()[:200]) for pid in left]
    finally:
        for pid in _ray_processes(ray_tmp):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(ray_tmp, ignore_errors=True)
