"""Ray as users start it: a cluster from ``ray start --head`` and a second node joined with
``ray start --address``, both on this machine, tuned on from the command line and from a
script, and a node killed while it builds.

No fixture connects this process to Ray: every tuner is a process of its own that finds
the cluster through ``RAY_ADDRESS``, as ``--cluster auto`` does on a cluster node. The
cluster's processes carry a marker in their environment, by which the tests tell the
nodes apart and kill exactly them at the end (``ray stop`` would stop every Ray instance
of this machine, other test sessions' included).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

import db

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds Ray's processes in /proc"),
    pytest.mark.xdist_group("ray"),  # one module of Ray tests at a time (``--dist loadgroup``)
]

ROOT = Path(__file__).resolve().parents[2]
# In the environment of a node's processes, "<cluster>-<node>" (_HELD_BUILDS reads it too).
NODE_VAR = "AUTOTUNE_TEST_RAY_NODE"
_WAIT_S = 300  # the most any step waits for Ray (a loaded machine starts workers slowly)


def _processes(marker: str) -> list[int]:
    """The processes whose environment has ``NODE_VAR`` starting with ``marker``."""
    needle = f"{NODE_VAR}={marker}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                env = (entry / "environ").read_bytes()
            except OSError:
                continue
            if any(item.startswith(needle) for item in env.split(b"\0")):
                pids.append(int(entry.name))
    return pids


def _kill(marker: str) -> None:
    """SIGKILL every process of ``marker`` until none is left."""
    deadline = time.monotonic() + 60
    while (pids := _processes(marker)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_command() -> str:
    beside = Path(sys.executable).parent / "ray"
    found = str(beside) if beside.exists() else shutil.which("ray")
    if found is None:
        pytest.skip("the ray command is not installed")
    return found


@dataclass
class Cluster:
    marker: str
    address: str
    temp_dir: str
    env: dict  # the environment of a process that tunes on the cluster

    def start_node(self, name: str, *args: str) -> None:
        """``ray start`` a node (one CPU) whose processes carry ``<marker>-<name>``."""
        env = {k: v for k, v in self.env.items() if k != "RAY_ADDRESS"}
        env[NODE_VAR] = f"{self.marker}-{name}"
        cmd = [_ray_command(), "start", "--num-cpus=1", "--node-ip-address=127.0.0.1",
               f"--temp-dir={self.temp_dir}", "--disable-usage-stats", *args]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=_WAIT_S)
        assert p.returncode == 0, f"{' '.join(cmd)}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"

    def run(self, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
        """Run ``python args...`` as a tuner on the cluster."""
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600,
                              cwd=cwd, env=self.env)


@pytest.fixture(scope="module")
def cluster():
    """A head node and a second node, one CPU each, on a port and in a temporary directory
    of their own; killed, every process of them, at the end."""
    # Short: Ray's socket paths live in it and have a length limit.
    temp_dir = tempfile.mkdtemp(prefix="rc", dir="/tmp")
    marker = f"c{secrets.token_hex(4)}"
    address = f"127.0.0.1:{_free_port()}"
    env = {**os.environ, "RAY_ADDRESS": address,
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
           # Recent Ray enables token authentication when ~/.ray holds a token; this cluster uses
           # one of its own (older Ray ignores these).
           "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    env.pop(NODE_VAR, None)
    c = Cluster(marker, address, temp_dir, env)
    try:
        c.start_node("head", "--head", f"--port={address.rsplit(':', 1)[1]}", "--include-dashboard=false")
        c.start_node("second", f"--address={address}")
        yield c
    finally:
        _kill(marker)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _trials(path_or_url: str) -> list:
    with db.open(path_or_url) as log:
        return [r for r in log.records() if r.kind == db.TRIAL]


def _errors(trials: list) -> list:
    return [(r.config_index, r.error_kind, r.error_msg) for r in trials if r.error_kind or not r.costs]


def test_cli_tunes_on_a_started_cluster(cluster, tmp_path):
    # A generous --timeout: a fresh Ray worker's first build, on 2 cores shared with the suite's
    # other worker, once took 10.9 s; this test is about tuning on the cluster, not build speed.
    p = cluster.run(["-m", "autotune", "tune", "matmul", "--args", "32,32,32,float32", "--trials", "6",
                     "--cluster", "auto", "--timeout", "60", "--db", "r.db"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "ray.init twice" not in p.stderr
    trials = _trials(str(tmp_path / "r.db"))
    assert len(trials) == 6 and len({r.config_index for r in trials}) == 6
    assert all(r.error_kind is None and r.costs for r in trials), _errors(trials)


def test_script_tunes_workloads_on_the_cluster_into_postgres(cluster, tmp_path, postgres_url):
    script = str(ROOT / "scripts" / "examples" / "tune_on_ray_cluster.py")
    p = cluster.run([script, "--address", "auto", "--db", postgres_url, "--trials", "8", "--tuner", "random",
                     "--batch-size", "4", "--workload", "matmul", "32,32,32,float32",
                     "--workload", "dense", "4,32,32,float32"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    password = make_url(postgres_url).password
    assert f":{password}@" not in p.stdout + p.stderr and "tuning 2 workloads" in p.stdout, p.stdout
    trials = _trials(postgres_url)
    per_template = Counter(r.template for r in trials)
    assert set(per_template) == {"matmul", "dense"} and sum(per_template.values()) == 8, per_template
    assert all(r.error_kind is None and r.costs for r in trials), _errors(trials)


# A tuning script whose builds on cluster nodes announce themselves (a file in GATE named
# after the phase, the config, the node and a unique number) and then wait for GATE/go; the
# template comes from __main__, so it travels by value.
_HELD_BUILDS = """
import logging, os, sys, time, uuid
from pathlib import Path

import autotune
from compiler import te
from measure import MeasureOptions
from measure.ray import RayBuilder, RayRunner

GATE, DB = Path(sys.argv[1]), sys.argv[2]
logging.basicConfig(level=logging.WARNING, format="%(name)s %(message)s")
logging.getLogger("measure.ray").setLevel(logging.INFO)


def reference(n, gate, rng=None):
    a = rng.standard_normal(n).astype("float32")
    return [a], [a * 3.0]


@autotune.template("held_scale", reference=reference)
def held_scale(n, gate):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotune.get_config()
    cfg.define_split("x", n, num_outputs=2)
    node = os.environ.get("AUTOTUNE_TEST_RAY_NODE")
    if node and isinstance(getattr(cfg, "index", None), int) and not cfg.is_fallback:
        phase = "remeasure" if (GATE / "searched").exists() else "search"
        (GATE / f"{phase}-{cfg.index}-{node}-{uuid.uuid4().hex}").touch()
        deadline = time.monotonic() + 300
        while not (GATE / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    cfg["x"].apply(s, B, B.op.axis[0])
    return s, [A, B]


results = []


def searched(inp, res):
    results.append(res)
    if len(results) == 6:
        (GATE / "searched").touch()


task = autotune.create_task("held_scale", (256, str(GATE)), target="llvm")
with MeasureOptions(RayBuilder(address="auto", timeout=600),
                    RayRunner(address="auto", number=2, repeat=2, min_repeat_ms=5, timeout=10)) as options:
    autotune.tune(task, trials=6, tuner="random", db=DB, measure_option=options, callbacks=[searched],
                  progress=False)
print("tuned")
"""


def _builds(gate: Path, phase: str) -> list[tuple[int, str]]:
    """``(config index, node)`` of each build announced in ``gate`` in ``phase``."""
    return [(int(m.group(1)), m.group(2)) for f in gate.iterdir()
            if (m := re.fullmatch(rf"{phase}-(\d+)-\w+-(\w+)-[0-9a-f]+", f.name))]


def test_a_killed_node_rebuilds_only_what_it_was_building(cluster, tmp_path):
    cluster.start_node("victim", f"--address={cluster.address}")  # its own, so that others keep theirs
    gate = tmp_path / "gate"
    gate.mkdir()
    (tmp_path / "tune.py").write_text(textwrap.dedent(_HELD_BUILDS))
    tuner = subprocess.Popen([sys.executable, "tune.py", str(gate), "r.db"], cwd=tmp_path, env=cluster.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Every node holds a build (one CPU each); wait until the victim and one other do.
        deadline = time.monotonic() + _WAIT_S
        while time.monotonic() < deadline and tuner.poll() is None:
            held = _builds(gate, "search")
            if "victim" in {node for _, node in held} and len(held) >= 2:
                break
            time.sleep(0.1)
        assert tuner.poll() is None, tuner.communicate()[1][-3000:]
        held = _builds(gate, "search")
        (on_victim,) = [index for index, node in held if node == "victim"]
        _kill(f"{cluster.marker}-victim")
        (gate / "go").touch()
        out, err = tuner.communicate(timeout=600)
    finally:
        if tuner.poll() is None:
            tuner.kill()
            tuner.communicate()
    assert tuner.returncode == 0 and "tuned" in out, err[-3000:]

    trials = _trials(str(tmp_path / "r.db"))
    assert sorted(r.config_index for r in trials) == sorted({r.config_index for r in trials})
    assert len(trials) == 6 and all(r.error_kind is None and r.costs for r in trials), _errors(trials)
    # The victim's build is built again elsewhere; every other candidate was built once, those
    # held on the other nodes when the victim died included.
    builds = _builds(gate, "search")
    expected = Counter(r.config_index for r in trials) + Counter([on_victim])
    assert Counter(index for index, _ in builds) == expected, (builds, on_victim)
    assert [node for index, node in builds if index == on_victim].count("victim") == 1
    assert [node for _, node in builds].count("victim") == 1
    # In the tuner's view too: one build lost and sent again, no timing lost.
    assert len(re.findall(r"build of candidate \d+ lost", err)) == 1, err[-3000:]
    assert not re.search(r"run of candidate \d+ lost", err), err[-3000:]


def test_a_node_running_other_code_is_left_out_and_the_tuning_goes_on(cluster, tmp_path):
    """A node started from a copy of the project whose compiler differs by one line runs other
    code: the tuner names it once, leaves it out, and measures everything on the other nodes."""
    copy = tmp_path / "other"
    for package in ("compiler", "search_spaces", "measure", "autotune", "db"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "compiler" / "__init__.py", "a") as f:
        f.write("# a line that the tuner's copy lacks\n")
    cluster.env, env = {**cluster.env, "PYTHONPATH": str(copy)}, cluster.env
    try:
        cluster.start_node("stranger", f"--address={cluster.address}")
    finally:
        cluster.env = env
    try:
        p = cluster.run(["-m", "autotune", "tune", "matmul", "--args", "32,32,32,float32", "--trials", "6",
                         "--cluster", "auto", "--timeout", "60", "--db", "r.db"], tmp_path)
    finally:
        _kill(f"{cluster.marker}-stranger")
    assert p.returncode == 0, p.stderr[-3000:]
    left_out = re.findall(r"Ray node (\w+) (?:built|timed) a candidate with code version (\S+), but this "
                          r"tuner runs (\S+): the node is left out", p.stderr)
    assert len(left_out) == 1, p.stderr[-3000:]
    (node, theirs, ours), = left_out
    assert theirs != ours and theirs.split("+")[0] == ours.split("+")[0]
    trials = _trials(str(tmp_path / "r.db"))
    assert len(trials) == 6 and len({r.config_index for r in trials}) == 6
    assert all(r.error_kind is None and r.costs for r in trials), _errors(trials)
    assert {r.code_version for r in trials} == {ours}
    assert node not in {r.device for r in trials}  # a Ray run names its node here
