"""Simulated dispatch: one tuner keeps a cluster of 16 and 64 simulated nodes busy.

The nodes (:mod:`measure.simulated`) compile and time nothing, but take real wall time
(16 CPUs each, a build 0.8 s on one CPU, a timing 0.2 s on the node's one runner, each
0.9 to 1.1 times as long), and share their cores as the Ray nodes do: builds on a node pause
while its runner times (:mod:`measure.gate`). So a runner can be busy at most
``16 * 0.2 / (16 * 0.2 + 0.8)`` = 80% of the time (``runner_ceiling``): the other 20% its
node builds what it will time. "Busy" is therefore judged two ways, over the search's
steady state (:meth:`SimulatedCluster.window`): the nodes' time in use, timing or building,
must be at least 90%, and the runners must reach at least 90% of their ceiling. At 64 nodes
the tuning loop must then spend less than ``0.2 / (64 * 0.8)`` = 3.9 ms of its own per trial
(it spends about 2 on an idle two-core machine); builds and timings half as long would leave
it 2 ms, which a busy machine does not give.
"""

from __future__ import annotations

import time

import pytest

import autotune
import search_spaces  # noqa: F401 - registers the templates
from measure import ErrorKind, MeasureInput, MeasureOptions, MeasureSession
from measure.simulated import SimulatedCluster, knob_cost

CPUS, BUILD_S, RUN_S = 16, 0.8, 0.2
JITTER = 0.1  # each build and timing takes 0.9 to 1.1 times as long
BUSY = 0.9


@pytest.fixture(scope="module")
def tasks():
    """Small CPU tasks whose spaces together hold some 6700 configs."""
    shapes = [(64, 64, 64), (512, 512, 512), (1024, 1024, 1024), (768, 512, 256)]
    made = [autotune.create_task("matmul", (*s, "float32"), "llvm") for s in shapes]
    made.append(autotune.create_task("softmax", (256, 1024, "float32"), "llvm"))
    made.append(autotune.create_task("dense", (16, 512, 512, "float32"), "llvm"))
    made.append(autotune.create_task("batch_matmul", (4, 128, 128, 128, "float32"), "llvm"))
    return made


def _tune(tasks, cluster, trials, tuner="random", callbacks=()):
    with MeasureOptions(cluster.builder, cluster.runner) as options:
        return autotune.tune_tasks(tasks, trials=trials, tuner=tuner, db=None, measure_option=options,
                                   progress=False, seed=0, remeasure=False, callbacks=callbacks)


def _measured_once(results) -> int:
    """The number of trials, after checking that no config was measured twice."""
    keys = [(r.task.workload_key, t.config.index) for r in results for t in r.history]
    assert len(keys) == len(set(keys)), "a config was measured twice"
    return len(keys)


# ---------------------------------------------------------------------------- the cluster itself


def _valid_configs(task, n):
    space, configs, i = task.config_space, [], 0
    while len(configs) < n:
        if space.is_valid(i):
            configs.append(space.from_index(i))
        i += 1
    return configs


def test_builds_and_timings_take_their_time_on_the_nodes_and_never_overlap(tasks):
    cluster = SimulatedCluster(nodes=2, cpus_per_node=2, build_s=0.05, run_s=0.02)
    task = tasks[0]
    configs = _valid_configs(task, 12)
    start = time.monotonic()
    with MeasureOptions(cluster.builder, cluster.runner) as options, MeasureSession(options) as session:
        assert session.capacity == 2 * 2 + 2 * 2
        session.submit(MeasureInput(task, c) for c in configs)
        done = []
        while session.in_flight:
            done += session.results()
    wall = time.monotonic() - start
    assert sorted(inp.config.index for inp, _ in done) == sorted(c.index for c in configs)
    for inp, res in done:
        assert res.ok and res.worker in ("sim-node-0", "sim-node-1")
        assert res.costs == (knob_cost(inp.config, task.flop),)  # the same cost every time
        assert res.build_time >= 0.05 and res.run_time >= 0.02
    # 12 timings of 0.02 s and 12 builds of 0.05 s on 2 CPUs per node take 0.54 s of the 2 nodes'
    # time (a node times alone): 0.27 s of wall time at least
    assert wall >= 0.27
    for node in cluster.nodes:
        for b0, b1 in node.build_spans:
            for r0, r1 in node.run_spans:
                assert b1 <= r0 + 1e-6 or r1 <= b0 + 1e-6, "a build ran on a node while it timed"


def test_a_build_lost_twice_is_a_worker_crash(tasks):
    cluster = SimulatedCluster(nodes=2, cpus_per_node=1, build_s=0.3, run_s=0.01)
    task = tasks[0]
    with MeasureOptions(cluster.builder, cluster.runner) as options, MeasureSession(options) as session:
        session.submit([MeasureInput(task, task.config_space.default_config)])
        time.sleep(0.1)
        cluster.lose_node(0)  # building there: built again on node 1
        time.sleep(0.1)
        cluster.lose_node(1)  # lost again: no third try
        (inp, res), = session.results(timeout=5)
    assert res.error_kind is ErrorKind.WORKER_CRASH
    assert cluster.builds_retried == 1 and cluster.runs_per_node() == [0, 0]


# ---------------------------------------------------------------------------- through tune_tasks


# The capacity (18 per node), then 8.4 s of work at the runners' ceiling (4 per node and second):
# the first cycle of a node (16 timings and their builds, 4 s) times the candidates handed out
# at the start, the second is the steady state that is judged.
@pytest.mark.parametrize("nodes, trials", [(16, 830), (64, 3300)])
def test_tune_tasks_keeps_every_node_busy(tasks, nodes, trials):
    cluster = SimulatedCluster(nodes, CPUS, BUILD_S, RUN_S, jitter=JITTER)
    start = time.monotonic()
    results = _tune(tasks, cluster, trials)
    wall = time.monotonic() - start
    loop_ms = 1e3 * results[0].tuner_seconds / trials
    assert _measured_once(results) == trials
    runs = cluster.runs_per_node()
    assert sum(runs) == trials and min(runs) > 0, runs  # every node timed candidates
    since, until = cluster.window()
    busy, runners = cluster.node_busy(), cluster.utilisation()
    print(f"\n{nodes} nodes: {trials} trials in {wall:.1f} s ({trials / wall:.0f}/s), steady state "
          f"{until - since:.1f} s: nodes {busy:.1%} busy, runners {runners:.1%} (ceiling "
          f"{cluster.runner_ceiling:.1%}), tuning loop's own work {loop_ms:.2f} ms/trial")
    assert busy >= BUSY
    assert runners >= BUSY * cluster.runner_ceiling


def test_a_lost_node_costs_only_its_in_flight_candidates(tasks):
    """Node 1 goes while it times, node 2 while it builds: what they had in flight is built or
    timed again elsewhere, every trial gets its result, and they get no more work."""
    cluster = SimulatedCluster(4, CPUS, build_s=0.1, run_s=0.025)
    lost = {}

    def lose_nodes(inp, res):
        now = time.monotonic()
        for k, busy in ((1, lambda n: n.run is not None), (2, lambda n: n.builds > 0)):
            if k not in lost and busy(cluster.nodes[k]):
                lost[k] = (now, cluster.lose_node(k))

    results = _tune(tasks, cluster, 300, callbacks=[lose_nodes])
    assert sorted(lost) == [1, 2], "nodes 1 and 2 were never caught timing and building"
    assert _measured_once(results) == 300
    assert all(t.result.ok for r in results for t in r.history), "a candidate was lost with a node"
    builds, runs = (sum(lost[k][1][j] for k in lost) for j in (0, 1))
    assert builds >= 1 and runs >= 1
    assert (cluster.builds_retried, cluster.runs_retried) == (builds, runs)
    assert sum(cluster.runs_per_node()) == 300 + runs
    for k, (when, _) in lost.items():
        node = cluster.nodes[k]
        assert all(start <= when for start, _ in node.run_spans + node.build_spans), "a lost node got work"
