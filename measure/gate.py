"""Keeping builds off the cores that a timing run uses.

A :class:`CoreGate` guards one machine's cores: any number of builds may hold it
together, a timing run holds it alone. A runner that asks for the gate stops new
builds from starting at once and gets it when the running builds finish; a runner
with more candidates queued keeps it until its queue is empty, so timings run back
to back and builds resume in between batches of them. Where builds and timing run
on disjoint cores (see ``MeasureOptions``) the gate is :class:`OpenGate`.
"""

from __future__ import annotations

import threading

__all__ = ["CoreGate", "OpenGate", "Gates"]


class CoreGate:
    """Builds share the machine; timing has it alone (and goes first once it asked)."""

    def __init__(self):
        self._cv = threading.Condition()
        self._builds = 0
        self._timing = False
        self._requests = 0

    def try_build(self) -> bool:
        """Start a build if no timing runs or waits; call :meth:`build_done` after it."""
        with self._cv:
            if self._timing or self._requests:
                return False
            self._builds += 1
            return True

    def build_done(self) -> None:
        with self._cv:
            self._builds -= 1
            self._cv.notify_all()

    def acquire_build(self) -> None:
        """Hold the cores as a build does, waiting while a timing runs or waits; call
        :meth:`build_done` after. For work other than builds that must not overlap a timing."""
        with self._cv:
            self._cv.wait_for(lambda: not self._timing and not self._requests)
            self._builds += 1

    def request_timing(self) -> None:
        """Stop new builds from starting until :meth:`try_timing` succeeds."""
        with self._cv:
            self._requests += 1

    def try_timing(self) -> bool:
        """After :meth:`request_timing`: take the gate if no build runs."""
        with self._cv:
            if self._builds or self._timing:
                return False
            self._requests -= 1
            self._timing = True
            return True

    def acquire_timing(self) -> None:
        """Take the gate for timing, waiting for the running builds to finish."""
        with self._cv:
            self._requests += 1
            self._cv.wait_for(lambda: not self._builds and not self._timing)
            self._requests -= 1
            self._timing = True

    def release_timing(self) -> None:
        with self._cv:
            self._timing = False
            self._cv.notify_all()

    def wait_open(self, timeout: float) -> None:
        """Sleep until builds may start again (or ``timeout`` seconds)."""
        with self._cv:
            self._cv.wait_for(lambda: not self._timing and not self._requests, timeout)


class OpenGate(CoreGate):
    """A gate that never closes: builds and timing use different cores."""

    def try_build(self) -> bool:
        return True

    def build_done(self) -> None:
        pass

    def acquire_build(self) -> None:
        pass

    def request_timing(self) -> None:
        pass

    def try_timing(self) -> bool:
        return True

    def acquire_timing(self) -> None:
        pass

    def release_timing(self) -> None:
        pass

    def wait_open(self, timeout: float) -> None:
        pass


class Gates:
    """One gate per machine (``"local"``, or a Ray node id), made on first use."""

    def __init__(self, exclusive: bool = True):
        self.exclusive = exclusive
        self._gates: dict[str, CoreGate] = {}
        self._lock = threading.Lock()
        self.stop = threading.Event()  # set when the consumer of a batch goes away

    def __call__(self, machine: str) -> CoreGate:
        with self._lock:
            gate = self._gates.get(machine)
            if gate is None:
                gate = self._gates[machine] = CoreGate() if self.exclusive else OpenGate()
            return gate
