"""Whether anything else ran on this process's CPUs while it timed a candidate.

A kernel timed with as many threads as the machine has cores collapses when one core is
taken: on 2 vCPUs a 2-thread convolution ran 4.5x slower beside one busy process, while a
config that happens to run on one thread hardly slowed. Timings taken beside other work
are therefore not only slower but ranked wrongly. The kernel's accounting says it:
over a timing, the CPUs this process may use (its affinity, or every CPU OpenMP binds its
threads to: :func:`compiler.runtime.threads.process_cpus`) were busy for some seconds,
this process used some of them, and the rest (other processes, and time the hypervisor
stole from a virtual machine) went to others. :class:`CpuSample` reads both, and
:meth:`CpuSample.others_busy` is the share of one core that others took beyond the cores
the timing left free.

Linux only (``/proc``); elsewhere a sample is empty and nothing counts as busy.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from compiler.runtime.threads import process_cpus

__all__ = ["CpuSample", "BUSY_SHARE"]

#: The share of a core that other work may take from a timing before the timing counts as
#: busy: quiet timings on 2 vCPUs read 0-0.13, timings beside one busy process 0.55-0.87.
BUSY_SHARE = 0.25

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
# /proc/stat's columns after the CPU name: user nice system idle iowait irq softirq steal ...
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)


def _busy_seconds(cpus: set[int]) -> float | None:
    """Seconds that ``cpus`` spent busy since boot, stolen time included; None without /proc."""
    try:
        with open("/proc/stat") as f:
            lines = f.readlines()
    except OSError:
        return None
    ticks = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            columns = rest.split()
            ticks += sum(int(columns[c]) for c in _BUSY_COLUMNS if c < len(columns))
    return ticks * _TICK_S


@dataclass(frozen=True)
class CpuSample:
    """The busy seconds of this process's CPUs and of the process itself, at one moment."""

    wall: float
    busy: float | None
    own: float
    cpus: int

    @classmethod
    def now(cls) -> CpuSample:
        """Sample now."""
        cpus = set(process_cpus())
        t = os.times()
        return cls(time.monotonic(), _busy_seconds(cpus), t.user + t.system, len(cpus))

    def others_busy(self, later: CpuSample, threads: int) -> float:
        """The share of one core (0: none) that other work took between this sample and
        ``later``, beyond the ``cpus - threads`` cores that a timing on ``threads`` threads
        leaves to it. The counters tick in 1/100 s, so windows under ~0.1 s read as 0."""
        wall = later.wall - self.wall
        if self.busy is None or later.busy is None or wall < 10 * _TICK_S:
            return 0.0
        others = (later.busy - self.busy) - (later.own - self.own)
        spare = max(0, self.cpus - threads) * wall
        return max(0.0, others - spare) / wall
