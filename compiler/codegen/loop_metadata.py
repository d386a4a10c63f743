"""``!llvm.loop`` metadata (vectorize, unroll hints) for llvmlite-built IR.

A loop's metadata node must be *distinct* and refer to itself
(``!7 = distinct !{!7, !8}``), which llvmlite's metadata builder cannot express.
So the back-edge branch gets a placeholder reference, and the node definitions are
appended to the module text, numbered far above anything llvmlite emits.
"""

from __future__ import annotations

__all__ = ["LoopMetadata"]

_FIRST_ID = 1_000_000


class _Ref:
    """Stands in for a metadata node in ``instr.set_metadata``: llvmlite only asks for its reference."""

    def __init__(self, ident: int):
        self.ident = ident

    def get_reference(self) -> str:
        return f"!{self.ident}"


class LoopMetadata:
    """Collects loop metadata nodes for one module and renders their definitions."""

    def __init__(self):
        self._next = _FIRST_ID
        self._lines: list[str] = []

    def _new_id(self) -> int:
        self._next += 1
        return self._next - 1

    def node(self, *properties: str) -> _Ref:
        """A distinct self-referential loop node with the given properties.

        Each property is the body of a metadata tuple, e.g.
        ``'!"llvm.loop.vectorize.enable", i1 true'``.
        """
        loop = self._new_id()
        refs = [f"!{loop}"]
        for prop in properties:
            ident = self._new_id()
            self._lines.append(f"!{ident} = !{{{prop}}}")
            refs.append(f"!{ident}")
        self._lines.append(f"!{loop} = distinct !{{{', '.join(refs)}}}")
        return _Ref(loop)

    def attach(self, branch, *properties: str) -> None:
        """Attach a loop node with ``properties`` to the back-edge ``branch`` instruction."""
        branch.set_metadata("llvm.loop", self.node(*properties))

    def render(self) -> str:
        """The definitions to append to the module's text."""
        return "\n".join(self._lines) + ("\n" if self._lines else "")


def vectorize(width: int | None) -> tuple[str, ...]:
    """Properties asking the loop vectorizer to vectorize (with ``width`` lanes when given)."""
    props = ['!"llvm.loop.vectorize.enable", i1 true']
    if width:
        props.append(f'!"llvm.loop.vectorize.width", i32 {width}')
    return tuple(props)


def unroll_full() -> tuple[str, ...]:
    return ('!"llvm.loop.unroll.full"',)
