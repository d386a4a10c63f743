"""A PostgreSQL log through an outage of its server: writes wait and retry until it answers
again, and a write that gives up saves its records for ``autotune import``.

The outage is real as the client sees it: the log connects through a TCP relay in front of
the test server, which the tests cut (every connection closed, the port refused) and restore.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from tuning_log_workers import make_record

import autotune
import db
from autotune.cli import main as cli_main


class Relay:
    """Forwards TCP connections from a local port to ``target``; :meth:`cut` closes every one and
    refuses new ones until :meth:`restore`."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.port = 0
        self.restore()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen()
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        try:
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() under way (close alone would not)
        except OSError:
            pass
        listener.close()
        with self._lock:
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self._open.clear()

    def url(self, url: str) -> str:
        return make_url(url).set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # cut
                return
            server = socket.create_connection(self.target)
            with self._lock:
                self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@pytest.fixture
def relay(postgres_url: str):
    url = make_url(postgres_url)
    r = Relay((url.host or "127.0.0.1", url.port or 5432))
    yield r
    if r._listener is not None:
        r.cut()


def _records(url: str) -> list[db.Record]:
    with db.open(url) as log:
        return log.records()


def test_a_write_waits_through_an_outage_of_the_server(postgres_url, relay, caplog):
    caplog.set_level(logging.WARNING, logger="db.log")
    with db.open(relay.url(postgres_url), reconnect_timeout=120) as log:
        assert log.add(make_record(0, 0)) == 1
        relay.cut()
        added: list[int] = []
        writer = threading.Thread(target=lambda: added.append(log.add(make_record(0, 1))))
        writer.start()
        time.sleep(2)
        assert writer.is_alive() and not added  # waiting for the server
        relay.restore()
        writer.join(timeout=60)
        assert added == [1]
    assert sorted(r.config_index for r in _records(postgres_url)) == [0, 1]
    messages = [m for m in caplog.messages if "adding records" in m]
    assert len(messages) == 2 and "failed" in messages[0] and "trying again for up to 120 s" in messages[0]
    assert "done once the server answered again" in messages[1]
    assert f":{make_url(postgres_url).password}@" not in " ".join(messages)  # no password in what is said


def test_a_write_that_gives_up_saves_its_records_for_autotune_import(postgres_url, relay, tmp_path,
                                                                      monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.WARNING, logger="db.log")
    with db.open(relay.url(postgres_url), reconnect_timeout=1) as log:
        run_id = log.start_run("random")
        assert log.add(make_record(0, 0)) == 1
        relay.cut()
        with pytest.raises(db.TuningLogError, match=r"adding records failed: .*unreachable for 1 s\); its 2 "
                                                    r"records are saved in .*autotune import") as err:
            log.add([make_record(0, 1), make_record(0, 2)])
        # Ending the run that failed so is tried once: no second wait, and no records to save.
        with pytest.raises(db.TuningLogError, match="ending a run failed") as ended:
            log.end_run(run_id, "failed")
        assert "unreachable for" not in str(ended.value) and "saved" not in str(ended.value)
        waits = [m for m in caplog.messages if "trying again" in m]
        assert len(waits) == 1 and "adding records failed" in waits[0]
        # Once a write gets through, the next outage is waited for again.
        relay.restore()
        assert log.add(make_record(0, 3)) == 1
        relay.cut()
        with pytest.raises(db.TuningLogError, match="unreachable for 1 s"):
            log.add(make_record(0, 4))
        assert len([m for m in caplog.messages if "trying again" in m]) == 2
    saved = [p for p in tmp_path.glob("autotune-unwritten-*.jsonl") if str(p) in str(err.value)]
    assert len(saved) == 1  # (and one more of the last add's record)
    assert f":{make_url(postgres_url).password}@" not in str(err.value)
    assert cli_main(["import", "--db", postgres_url, str(saved[0])]) == 0
    assert sorted(r.config_index for r in _records(postgres_url)) == [0, 1, 2, 3]


def test_a_wait_interrupted_saves_its_records(postgres_url, relay, tmp_path, monkeypatch, caplog):
    """Ctrl-C while a write waits for the server: its records are saved, and the interrupt goes on."""
    monkeypatch.chdir(tmp_path)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    caplog.set_level(logging.WARNING, logger="db.log")
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with db.open(relay.url(postgres_url), reconnect_timeout=120) as log:
            relay.cut()
            signal.setitimer(signal.ITIMER_REAL, 1.5)
            with pytest.raises(KeyboardInterrupt):
                log.add(make_record(0, 7))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    (saved,) = tmp_path.glob("autotune-unwritten-*.jsonl")
    assert any("interrupted while waiting for the server; its record is saved in" in m and str(saved) in m
               for m in caplog.messages), caplog.messages
    relay.restore()
    with db.open(postgres_url) as log:
        assert log.import_jsonl(saved) == 1
    assert [r.config_index for r in _records(postgres_url)] == [7]


def test_a_tuning_run_outlives_an_outage_of_its_log(postgres_url, relay, tmp_path):
    """Cut after the second trial and restored two seconds later: every trial is in the log."""
    task = autotune.create_task("matmul", (32, 32, 32, "float32"), target="llvm")
    results = []

    def cut_once(inp, res):
        results.append(res)
        if len(results) == 2:
            relay.cut()
            threading.Timer(2.0, relay.restore).start()

    autotune.tune(task, trials=6, tuner="random", db=relay.url(postgres_url), callbacks=[cut_once],
                  progress=False)
    trials = [r for r in _records(postgres_url) if r.kind == db.TRIAL]
    assert len(trials) == 6 and len({r.config_index for r in trials}) == 6
    assert all(r.error_kind is None and r.costs for r in trials)
    with db.open(postgres_url) as log:
        assert [run.status for run in log.runs()] == ["budget"]  # it ran to its end


def test_the_reconnect_timeout_is_checked(tmp_path: Path):
    with pytest.raises(ValueError, match="reconnect_timeout must be a number of seconds >= 0"):
        db.open(str(tmp_path / "t.db"), reconnect_timeout=-1)
