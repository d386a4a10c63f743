"""MeasureSession: candidates submitted while others are measured, with real local workers."""

from __future__ import annotations

import threading

from measure_faults import FAULTS, costs_ok

from measure import (
    Builder,
    BuildReply,
    Feed,
    MeasureInput,
    MeasureOptions,
    MeasureSession,
)
from measure.local import LocalRunner


def test_candidates_submitted_while_others_build_are_measured_once_each(matmul_task, local_options):
    configs = matmul_task.config_space.sample(6, rng=3)
    with MeasureSession(local_options) as session:
        assert session.capacity == local_options.builder.slots() + 2 * local_options.runner.slots()
        session.submit([MeasureInput(matmul_task, c) for c in configs[:2]])
        got = session.results()  # waits for the first, then takes what else is done
        assert got and session.in_flight == 2 - len(got)
        session.submit([MeasureInput(matmul_task, c) for c in configs[2:]])
        while session.in_flight:
            got += session.results()
    assert sorted(inp.config.index for inp, _ in got) == sorted(c.index for c in configs)
    assert all(costs_ok(r) for _, r in got)


def test_a_feed_grows_until_closed_and_wakes_its_reader():
    feed = Feed(["a"])
    assert len(feed) == 1 and not feed.done(1)
    woke = threading.Event()

    def reader():
        feed.wait(1)
        woke.set()

    t = threading.Thread(target=reader)
    t.start()
    assert list(feed.put(["b", "c"])) == [1, 2]
    t.join(5)
    assert woke.is_set() and feed[2] == "c"
    feed.close()
    assert feed.done(3) and not feed.done(2)


class _ChunkBuilder(Builder):
    """A builder that does not stream: records the lists it is given."""

    def __init__(self):
        self.calls: list[int] = []

    def build(self, inputs, gates):
        self.calls.append(len(inputs))
        for i, _ in enumerate(inputs):
            yield i, BuildReply(None, "not built here", 0.0)


def test_a_builder_that_does_not_stream_gets_one_closed_list_at_a_time(matmul_task):
    builder = _ChunkBuilder()
    configs = matmul_task.config_space.sample(5, rng=4)
    with MeasureSession(MeasureOptions(builder, LocalRunner())) as session:
        session.submit([MeasureInput(matmul_task, c) for c in configs[:3]])
        first = []
        while session.in_flight:
            first += session.results()
        session.submit([MeasureInput(matmul_task, c) for c in configs[3:]])
        second = []
        while session.in_flight:
            second += session.results()
    assert builder.calls == [3, 2]
    assert all(r.error_msg == "not built here" for _, r in first + second)


def test_closing_a_session_abandons_what_is_in_flight(matmul_task, local_options):
    configs = matmul_task.config_space.sample(8, rng=5)
    session = MeasureSession(local_options)
    session.submit([MeasureInput(matmul_task, c) for c in configs])
    session.close()  # returns without waiting for eight builds and timings
    again = MeasureSession(local_options)  # the options' workers go on
    again.submit([MeasureInput(matmul_task, configs[0])])
    (_, result), = again.results()
    again.close()
    assert costs_ok(result)


def test_rounds_of_the_same_candidates_share_their_builds_and_stay_interleaved(matmul_task, local_options):
    configs = matmul_task.config_space.sample(3, rng=6)
    rounds = [[MeasureInput(matmul_task, c) for c in configs] for _ in range(3)]
    with MeasureSession(local_options) as session:
        session.submit([inp for r in rounds for inp in r])
        got = []
        while session.in_flight:
            got += session.results()
    result = {id(inp): res for inp, res in got}
    assert len(result) == 9 and all(costs_ok(r) for r in result.values())
    assert all(result[id(inp)].build_time > 0 for inp in rounds[0])  # each config built once,
    assert all(result[id(inp)].build_time == 0.0 for r in rounds[1:] for inp in r)  # then shared
    finished = [[result[id(inp)].timestamp for inp in r] for r in rounds]
    assert max(finished[0]) <= min(finished[1]) and max(finished[1]) <= min(finished[2])


def test_inputs_sharing_a_failed_build_fail_with_it(faulty_task, local_options):
    broken = faulty_task.config_space.get(FAULTS.index("raise"))
    with MeasureSession(local_options) as session:
        session.submit([MeasureInput(faulty_task, broken) for _ in range(2)])
        got = []
        while session.in_flight:
            got += session.results()
    assert len(got) == 2 and all("cannot be instantiated" in r.error_msg for _, r in got)
