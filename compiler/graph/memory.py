"""Memory planning: where every tensor of a fused graph lives while the model runs.

* the model's inputs and outputs are the caller's arrays; a kernel that computes an output
  writes it there directly;
* the constants (weights) are packed into one read-only block, each at a 64-byte boundary;
* every other tensor gets a place in one workspace, reused by liveness: a tensor's bytes are
  taken when its kernel runs and given back after its last reader ran, first fit, so tensors
  whose lifetimes do not overlap share memory. A kernel's outputs never share memory with its
  own inputs;
* a kernel's scratch (its intermediates that its caller may place:
  :mod:`compiler.codegen.llvm_scratch`) gets a place in the workspace too, taken after its
  outputs' and given back when it returns;
* a kernel that only reshapes (its bytes are its input's, in the same order) runs nothing: its
  output is its input's memory under another shape (:func:`aliases`), and that memory lives
  until the last reader of either.

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
        return (f"workspace {self.workspace_bytes / mib:.2f} MiB (intermediates without reuse "
                f"{self.unshared_bytes / mib:.2f} MiB, {saved:.0%} saved{scratch}), constants "
                f"{self.constant_bytes / mib:.2f} MiB")


class _FirstFit:
    """Free byte ranges of the workspace; it grows at its end when nothing free fits."""

    def __init__(self):
        self.free: list[tuple[int, int]] = []  # (offset, size), sorted by offset
        self.end = 0

    def take(self, size: int) -> int:
        for k, (offset, free) in enumerate(self.free):
            if free >= size:
                if free == size:
                    del self.free[k]
                else:
                    self.free[k] = (offset + size, free - size)
                return offset
        if self.free and self.free[-1][0] + self.free[-1][1] == self.end:
            offset = self.free.pop()[0]  # extend the last free range
        else:
            offset = self.end
        self.end = offset + size
        return offset

    def give(self, offset: int, size: int) -> None:
        self.free.append((offset, size))
        self.free.sort()
        merged: list[tuple[int, int]] = []
        for o, s in self.free:
            if merged and merged[-1][0] + merged[-1][1] == o:
                merged[-1] = (merged[-1][0], merged[-1][1] + s)
            else:
                merged.append((o, s))
        self.free = merged


def aliases(graph: Graph) -> dict[int, Value]:
    """The outputs of the fused ``graph``'s reshape-only kernels, by uid, each mapped to the value
    whose memory it is (its input, or what that input is an alias of). A graph output or a
    constant's reshape is no alias: it has memory of its own."""
    outputs = {v.uid for v in graph.outputs}
    found: dict[int, Value] = {}
    for node in fused_kernels(graph):
        body = node.attrs["body"]
        if len(node.inputs) != 1 or any(n.op != "reshape" for n in body.nodes):
            continue
        (source,) = node.inputs
        if source.is_constant or node.output.uid in outputs:
            continue
        found[node.output.uid] = found.get(source.uid, source)
    return found


def plan_memory(graph: Graph, scratch: Mapping[str, int] | None = None) -> MemoryPlan:
    """Place every tensor of the fused ``graph`` (see the module's docstring), and the scratch of
    the kernels that have one: ``scratch`` maps a kernel node's name to its bytes."""
    scratch = scratch or {}
    kernels = fused_kernels(graph)
    alias = aliases(graph)
    places: dict[int, Place] = {v.uid: Place("input", k) for k, v in enumerate(graph.inputs)}
    copied: list[int] = []  # outputs that are inputs, constants or repeats: copied at the end
    for k, v in enumerate(graph.outputs):
        if v.is_constant or v.uid in places:
            copied.append(k)
        else:
            places[v.uid] = Place("output", k)

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
    arena, unshared, scratch_places = _FirstFit(), 0, {}
    for i, node in enumerate(kernels):
        if node.output.uid in alias:
            places[node.output.uid] = places[owner(node.output).uid]
            continue
        for v in node.outputs:
            if v.uid not in places:
                size = _aligned(max(v.type.nbytes, 1))
                places[v.uid] = Place("workspace", arena.take(size))
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
                arena.give(p.index, _aligned(max(v.type.nbytes, 1)))
        if node.name in scratch_places:
            arena.give(scratch_places[node.name], _aligned(scratch[node.name]))
    copies = [(places[graph.outputs[k].uid], k, graph.outputs[k].type.nbytes) for k in copied]
    return MemoryPlan(places, constants, offset, arena.end, unshared, copies, alias, scratch_places,
                      max((scratch[name] for name in scratch_places), default=0))
