"""The entry point of a measurement worker: ``python -m measure.worker_main [name]``.

Started by :class:`measure.pool.WorkerPool` as a fresh interpreter; it never imports
the tuner's ``__main__``. It talks to the pool in frames over the stdin and stdout it
was started with (see :mod:`measure.pool`), and points its own file descriptors 0
and 1 elsewhere (``/dev/null`` and stderr), so that prints of templates or libraries
cannot corrupt a frame. The calls it answers are :data:`measure.worker.CALLS`: each
takes a request's JSON and returns a reply's JSON (:mod:`measure.protocol`).

:func:`serve` is the loop itself, for workers that answer the calls of another module (the
tuner's feature workers, :mod:`autotune.tuner.feature_worker`).
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import sys
import threading
import time
import traceback

from measure.pool import FrameReader, encode_frame, write_all

_PARENT_CHECK_S = 1.0


class _Channel:
    """Frames in from ``rfd``, frames out to ``wfd``."""

    def __init__(self, rfd: int, wfd: int):
        self.rfd, self.wfd = rfd, wfd
        self._reader = FrameReader()
        self._pending: list[dict] = []

    def receive(self) -> dict | None:
        """The next message; None at the end of the input (the parent closed it or died)."""
        while not self._pending:
            data = os.read(self.rfd, 1 << 20)
            if not data:
                return None
            self._pending.extend(self._reader.feed(data))
        return self._pending.pop(0)

    def send(self, message: dict) -> None:
        write_all(self.wfd, encode_frame(message))


def _watch_parent(parent: int) -> None:
    """Exit as soon as the parent is gone, even in the middle of a call (a hung candidate)."""
    while True:
        time.sleep(_PARENT_CHECK_S)
        if os.getppid() != parent:
            os._exit(3)


def _detach_stdio() -> _Channel:
    channel = _Channel(os.dup(0), os.dup(1))  # dup'ed descriptors are not inherited by children
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return channel


def main() -> int:
    """Serve the calls of :mod:`measure.worker` (see :func:`serve`)."""
    return serve("measure.worker")


def serve(module: str) -> int:
    """Answer the calls of ``module`` over this process's stdin and stdout (see
    :mod:`measure.pool`) until stdin closes or the tuner dies. ``module`` is imported when the
    tuner's init message has set the worker up (its ``sys.path``, where the tuner's templates
    are found, and its CPUs), before the worker says it is ready (a failure there is reported
    to the tuner); its ``CALLS`` map a call's name to a function of a request's JSON and a
    phase callback, returning the reply's JSON. Returns the exit status (2: no init message,
    1: start-up failed)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the tuner; it stops us
    channel = _detach_stdio()
    first = channel.receive()
    if first is None or "init" not in first:
        return 2
    init = first["init"]
    threading.Thread(target=_watch_parent, args=(int(init["parent"]),), name="watch-parent",
                     daemon=True).start()
    try:
        sys.path[:] = init["sys_path"]
        if init.get("cpus"):
            os.sched_setaffinity(0, init["cpus"])
        calls = importlib.import_module(module).CALLS  # the project's code, once, before any call
    except BaseException:
        channel.send({"fatal": traceback.format_exc()})
        return 1
    channel.send({"ready": f"{socket.gethostname()}:{os.getpid()}"})

    def phase(name: str, timeout: float) -> None:
        channel.send({"phase": name, "timeout": timeout})

    while True:
        msg = channel.receive()
        if msg is None:
            return 0
        try:
            reply = {"reply": calls[msg["call"]](msg["request"], phase)}
        except BaseException:
            reply = {"error": traceback.format_exc()}
        channel.send(reply)


if __name__ == "__main__":
    sys.exit(main())
