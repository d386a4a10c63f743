"""Memory planning: where every tensor of a fused graph lives while the model runs.

* the model's inputs and outputs are the caller's arrays; a kernel that computes an output
  writes it there directly;
* the constants (weights) are packed into one read-only block, each at a 64-byte boundary;
* every other tensor gets a place in one workspace, reused by liveness: a tensor's bytes are
  taken when its kernel runs and given back after its last reader ran, so tensors whose
  lifetimes do not overlap share memory. A kernel's outputs never share memory with its own
  inputs. Each output takes the free range that the kernels used last, if one fits: its bytes
  are the likeliest to be still in the caches, where a kernel writing into memory that left them
  first reads every line of it back (MobileNetV2's depthwise layers ran up to twice as slow so).
  Where that needs a larger workspace than taking the first range that fits, which packs the
  tensors tightest, the plan takes the first;
* a kernel's scratch (its intermediates that its caller may place:
  :mod:`compiler.codegen.llvm_scratch`) gets a place in the workspace too, taken after its
  outputs' and given back when it returns;
* a kernel that only reshapes (its bytes are its input's, in the same order) runs nothing: its
  output is its input's memory under another shape (:func:`aliases`), and that memory lives
  until the last reader of either; where its output is the model's, its input is computed in
  the caller's array.

:class:`MemoryPlan` reports the workspace's size (the peak of live intermediate tensors) against
what the intermediates would take without reuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .fuse import fused_kernels
from .ir import Graph, Value

__all__ = ["ALIGN", "Place", "MemoryPlan", "plan_memory", "aliases"]

ALIGN = 64  # bytes: a cache line, and the widest vector load


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass(frozen=True)
class Place:
    """Where a tensor lives: ``region`` is "input", "output", "constant" or "workspace";
    ``index`` the input's or output's position, or the byte offset in the block."""

    region: str
    index: int


@dataclass
class MemoryPlan:
    """The place of every tensor, the constant block, and the sizes."""

    places: dict[int, Place]
    constants: list[tuple[Value, int]]  # (constant, byte offset)
    constant_bytes: int
    workspace_bytes: int
    unshared_bytes: int  # the intermediates' total, were none to share memory
    copies: list[tuple[Place, int, int]] = field(default_factory=list)  # (source, output index, bytes)
    aliases: dict[int, Value] = field(default_factory=dict)  # a reshape's output -> whose memory it is
    scratch: dict[str, int] = field(default_factory=dict)  # kernel node's name -> its scratch's offset
    largest_scratch: int = 0  # bytes: the largest kernel's scratch
    warm: bool = False  # the outputs in the most recently used free memory (else the first that fits)

    def place(self, v: Value) -> Place:
        """Where ``v`` lives."""
        return self.places[v.uid]

    def constant_block(self) -> bytearray:
        """The constants, each at its offset, as one block of bytes."""
        block = bytearray(self.constant_bytes)
        for v, offset in self.constants:
            data = memoryview(np.ascontiguousarray(v.data).reshape(-1).view(np.uint8))  # its bytes, no copy
            block[offset:offset + len(data)] = data
        return block

    def report(self) -> str:
        """One line: the workspace's peak against the intermediates' total, and the constants."""
        mib = 1 << 20
        saved = 1 - self.workspace_bytes / self.unshared_bytes if self.unshared_bytes else 0.0
        scratch = (f"; the largest kernel's scratch {self.largest_scratch / mib:.2f} MiB"
                   if self.largest_scratch else "")
        placed = "outputs in the memory used last" if self.warm else "outputs first fit"
        return (f"workspace {self.workspace_bytes / mib:.2f} MiB (intermediates without reuse "
                f"{self.unshared_bytes / mib:.2f} MiB, {saved:.0%} saved{scratch}; {placed}), constants "
                f"{self.constant_bytes / mib:.2f} MiB")


class _Arena:
    """Free byte ranges of the workspace, each with the step of the plan that last used it; it
    grows at its end when nothing free fits. Adjacent free ranges stay apart, each with its own
    last use, and serve a request together when none alone fits."""

    def __init__(self):
        self.free: list[tuple[int, int, int]] = []  # (offset, size, last use), sorted by offset
        self.end = 0

    def take(self, size: int, warm: bool = False) -> int:
        """The offset of ``size`` free bytes: with ``warm`` the most recently used free range
        that fits, where there is one; else the first that fits (adjacent ranges together)."""
        fits = [k for k, (_, free, _) in enumerate(self.free) if free >= size] if warm else []
        if fits:
            k = max(fits, key=lambda k: (self.free[k][2], -self.free[k][0]))
            return self._cut(k, k + 1, size)
        start = 0
        while start < len(self.free):
            offset, total, stop = self.free[start][0], 0, start
            while stop < len(self.free) and self.free[stop][0] == offset + total:
                total += self.free[stop][1]
                stop += 1
            if total >= size:
                return self._cut(start, stop, size)
            if offset + total == self.end:  # the last ranges reach the end: grow from them
                del self.free[start:]
                self.end = offset + size
                return offset
            start = stop
        offset, self.end = self.end, self.end + size
        return offset

    def _cut(self, start: int, stop: int, size: int) -> int:
        """Take ``size`` bytes from the start of the adjacent ranges ``free[start:stop]``."""
        offset = self.free[start][0]
        taken = 0
        while taken < size:
            o, free, used = self.free.pop(start)
            if taken + free > size:  # the rest of this range stays free
                self.free.insert(start, (o + size - taken, taken + free - size, used))
            taken += free
        return offset

    def give(self, offset: int, size: int, used: int) -> None:
        """Free ``size`` bytes at ``offset``, last used at step ``used``."""
        self.free.append((offset, size, used))
        self.free.sort()


def aliases(graph: Graph) -> dict[int, Value]:
    """The outputs of the fused ``graph``'s reshape-only kernels, by uid, each mapped to the value
    whose memory it is (its input, or what that input is an alias of). A constant's reshape is no
    alias: it has memory of its own; so has a model output that reshapes a model input or output.
    A model output that reshapes an intermediate is one the other way round: the intermediate is
    computed in the output's memory (:func:`plan_memory`), once per intermediate."""
    outputs = {v.uid for v in graph.outputs}
    inputs = {v.uid for v in graph.inputs}
    in_output: set[int] = set()  # intermediates computed in an output's memory
    found: dict[int, Value] = {}
    for node in fused_kernels(graph):
        body = node.attrs["body"]
        if len(node.inputs) != 1 or any(n.op != "reshape" for n in body.nodes):
            continue
        (source,) = node.inputs
        if source.is_constant:
            continue
        owner = found.get(source.uid, source)
        if node.output.uid in outputs:
            if owner.uid in inputs or owner.uid in outputs or owner.uid in in_output:
                continue
            in_output.add(owner.uid)
        found[node.output.uid] = owner
    return found


def plan_memory(graph: Graph, scratch: Mapping[str, int] | None = None) -> MemoryPlan:
    """Place every tensor of the fused ``graph`` (see the module's docstring), and the scratch of
    the kernels that have one: ``scratch`` maps a kernel node's name to its bytes."""
    compact = _plan(graph, scratch or {}, warm=False)
    warm = _plan(graph, scratch or {}, warm=True)
    return warm if warm.workspace_bytes <= compact.workspace_bytes else compact


def _plan(graph: Graph, scratch: Mapping[str, int], warm: bool) -> MemoryPlan:
    """:func:`plan_memory`, the kernels' outputs placed in the most recently used free memory
    that fits (``warm``) or the first (the most compact)."""
    kernels = fused_kernels(graph)
    alias = aliases(graph)
    places: dict[int, Place] = {v.uid: Place("input", k) for k, v in enumerate(graph.inputs)}
    copied: list[int] = []  # outputs that are inputs, constants or repeats: copied at the end
    for k, v in enumerate(graph.outputs):
        if v.is_constant or v.uid in places:
            copied.append(k)
        else:
            places[v.uid] = Place("output", k)
            if v.uid in alias:  # the intermediate it reshapes is computed there
                places[alias[v.uid].uid] = places[v.uid]

    constants: list[tuple[Value, int]] = []
    offset = 0
    for v in graph.constants():
        constants.append((v, offset))
        places[v.uid] = Place("constant", offset)
        offset += _aligned(v.type.nbytes)

    def owner(v: Value) -> Value:
        return alias.get(v.uid, v)

    last_read: dict[int, int] = {}
    for i, node in enumerate(kernels):
        for v in node.inputs:
            last_read[owner(v).uid] = i
    arena, unshared, scratch_places = _Arena(), 0, {}
    for i, node in enumerate(kernels):
        if node.output.uid in alias:
            places[node.output.uid] = places[owner(node.output).uid]
            continue
        for v in node.outputs:
            if v.uid not in places:
                size = _aligned(max(v.type.nbytes, 1))
                places[v.uid] = Place("workspace", arena.take(size, warm))
                unshared += size
                if v.uid not in last_read:  # never read: free at once (after this kernel)
                    last_read[v.uid] = i
        if scratch.get(node.name):
            size = _aligned(scratch[node.name])
            scratch_places[node.name] = arena.take(size)
            unshared += size
        for v in dict((owner(v).uid, owner(v)) for v in (*node.inputs, *node.outputs)).values():
            p = places[v.uid]
            if p.region == "workspace" and last_read.get(v.uid) == i:
                arena.give(p.index, _aligned(max(v.type.nbytes, 1)), i)
        if node.name in scratch_places:
            arena.give(scratch_places[node.name], _aligned(scratch[node.name]), i)
    copies = [(places[graph.outputs[k].uid], k, graph.outputs[k].type.nbytes) for k in copied]
    return MemoryPlan(places, constants, offset, arena.end, unshared, copies, alias, scratch_places,
                      max((scratch[name] for name in scratch_places), default=0), warm)
