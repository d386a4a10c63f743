"""Groups of stages (TVM's ``Schedule.create_group``): stages placed together.

A group is a stage of its own, without an operation or loops. Its members that sit at
their group's root (every member, until one is computed at another member) are computed
wherever the group is: ``g.compute_at(s[D], xo)`` moves all of them into ``D``'s loop
``xo``, each for the region that the stages there need. Members may still be computed at
one another (``s[B].compute_at(s[C], ...)``) or inlined.
"""

from __future__ import annotations

import logging

from ..errors import ScheduleError
from ..tir.expr import IterVar

__all__ = ["GroupStage", "create_group"]

logger = logging.getLogger(__name__)


class GroupStage:
    """A group of stages made by :meth:`Schedule.create_group`: ``compute_at`` and
    ``compute_root`` place every member that sits at the group's root."""

    def __init__(self, schedule, parent_group: GroupStage | None):
        self.schedule = schedule
        self.group = parent_group
        self.members: list = []  # the stages and groups directly inside this group
        self._attach_type = "root"  # "root" or "scope" (at _attach_stage's loop _attach_ivar)
        self._attach_stage = None
        self._attach_ivar: IterVar | None = None

    def __repr__(self) -> str:
        return f"GroupStage({', '.join(s.op.name for s in self.stages)})"

    @property
    def stages(self) -> list:
        """Every stage of the group, those of groups inside it included."""
        out = []
        for m in self.members:
            out.extend(m.stages if isinstance(m, GroupStage) else [m])
        return out

    @property
    def num_child_stages(self) -> int:
        """How many stages and groups lie directly inside this group (TVM's name)."""
        return len(self.members)

    @property
    def attach_type(self) -> str:
        """Where the group is computed: "root" (where the group holding it is) or "scope"."""
        return self._attach_type

    @property
    def attach_stage(self):
        """The stage the group is computed at (``compute_at``), or None."""
        return self._attach_stage

    @property
    def attach_ivar(self) -> IterVar | None:
        """The loop of :attr:`attach_stage` the group is computed in, or None."""
        return self._attach_ivar

    def contains(self, stage) -> bool:
        """Whether ``stage`` (a stage or a group) lies inside this group, at any depth."""
        g = stage.group
        while g is not None:
            if g is self:
                return True
            g = g.group
        return False

    def _fail(self, what: str) -> ScheduleError:
        return ScheduleError(f"group of {', '.join(repr(s.op.name) for s in self.stages)}: {what}")

    def compute_at(self, parent, iv: IterVar) -> None:
        """Compute the group's stages inside ``parent``'s loop ``iv``, for the region that
        the stages computed there need."""
        from .schedule import Stage  # schedule.py imports this module

        if not isinstance(parent, Stage):
            raise self._fail(f"compute_at needs a stage (s[T]), got {parent!r}")
        parent._leaf_index(iv, "compute_at")
        stages = self.stages
        if parent in stages:
            raise self._fail(f"cannot compute the group at its own stage {parent.op.name!r}")
        if self.group is not None and not self.group.contains(parent):
            raise self._fail(f"the group lies inside another group, which {parent.op.name!r} is not "
                             "part of; compute it at a stage of that group")
        outputs = [s.op.name for s in stages if s.is_output]
        if outputs:
            raise self._fail(f"stage {outputs[0]!r} is an output; an output cannot be computed at "
                             "another stage")
        if parent.attach_type == "inline":
            raise self._fail(f"cannot compute_at stage {parent.op.name!r}: it is inlined")
        sch = self.schedule
        if not any(sch._depends_on(parent, s) for s in stages):
            raise self._fail(f"compute_at: stage {parent.op.name!r} reads none of the group's results "
                             "(directly or through inlined stages), so it cannot host it")
        cur = parent
        while cur is not None:  # the parent, or a stage it is computed in, is computed in the group
            if cur in stages:
                raise self._fail(f"compute_at into {parent.op.name!r} would form a cycle: it is "
                                 f"computed inside the group's stage {cur.op.name!r}")
            cur = cur.attach_stage
        self._attach_type, self._attach_stage, self._attach_ivar = "scope", parent, iv

    def compute_root(self) -> None:
        """Compute the group's stages at the root of the group that holds it (the top level
        for a group in no group)."""
        self._attach_type, self._attach_stage, self._attach_ivar = "root", None, None

    def compute_inline(self) -> None:
        """Refused: inline the group's stages one by one."""
        raise self._fail("a group cannot be inlined; call compute_inline on its stages")


def _stages_between(sch, outputs: list, inputs: list, include_inputs: bool) -> list:
    """The stages on a path from ``inputs`` to ``outputs`` (outputs included; inputs only
    with ``include_inputs``), producers first, as TVM's ``GetSubGraph``."""
    boundary = {sch[t] for t in inputs}
    reached: dict = {}
    found: list = []

    def visit(st) -> bool:
        if st in reached:
            return reached[st]
        if st in boundary:
            reached[st] = True
            if include_inputs:
                found.append(st)
            return True
        reached[st] = False
        hit = False
        for t in st.op.input_tensors:
            hit = visit(sch[t]) or hit
        reached[st] = hit
        if hit:
            found.append(st)
        return hit

    for t in outputs:
        visit(sch[t])
    return found


def _common_group(stages: list):
    """The innermost group holding every one of ``stages`` (None: the top level)."""
    def chain(g) -> list:
        out = []
        while g is not None:
            out.append(g)
            g = g.group
        return out

    common = chain(stages[0].group)
    for st in stages[1:]:
        mine = chain(st.group)
        common = [g for g in common if any(g is m for m in mine)]
    return common[0] if common else None


def _child_of(parent, stage):
    """The group directly inside ``parent`` that holds ``stage``, or None when ``stage``
    sits directly in ``parent``."""
    g = stage.group
    if g is parent:
        return None
    while g.group is not parent:
        g = g.group
    return g


def _tensors(x, what: str) -> list:
    from ..te.tensor import Tensor

    items = [x] if isinstance(x, Tensor) else list(x) if isinstance(x, (list, tuple)) else None
    if items is None or not all(isinstance(t, Tensor) for t in items):
        raise ScheduleError(f"create_group: {what} must be a tensor or a list of tensors, got {x!r}")
    return items


def create_group(sch, outputs, inputs, include_inputs: bool = False) -> GroupStage:
    """The group of the stages between ``inputs`` and ``outputs`` (see
    :meth:`compiler.schedule.Schedule.create_group`)."""
    outputs = _tensors(outputs, "outputs")
    inputs = _tensors(inputs, "inputs")
    stages = _stages_between(sch, outputs, inputs, include_inputs)
    if not stages:
        raise ScheduleError("create_group: no stage lies on a path from the inputs ("
                            + ", ".join(repr(t.name) for t in inputs) + ") to the outputs ("
                            + ", ".join(repr(t.name) for t in outputs) + ")")
    parent = _common_group(stages)
    # As TVM: stages directly in the common group move into the new group; a group inside
    # it moves in whole when every one of its stages is taken, and is an error otherwise.
    direct, children = [], []
    for st in stages:
        child = _child_of(parent, st)
        if child is None:
            direct.append(st)
        elif child not in children:
            children.append(child)
    taken = set(stages)
    for child in children:
        missing = [st.op.name for st in child.stages if st not in taken]
        if missing:
            raise ScheduleError(f"create_group: the stages {', '.join(repr(st.op.name) for st in stages)} "
                                f"take part of an existing group, not its stages {missing}; a group can "
                                "take another group only whole")
    group = GroupStage(sch, parent)
    for member in [*direct, *children]:
        if parent is not None:
            parent.members.remove(member)
        member.group = group
        group.members.append(member)
    if parent is not None:
        parent.members.append(group)
    # A member computed at a stage outside the group would take it apart; as TVM, such a
    # member goes back to the group's root.
    for st in stages:
        if st._attach_type == "scope" and st.scan_stage is None and not group.contains(st._attach_stage):
            logger.warning("create_group: stage %r was computed at %r, outside the group; it is now "
                           "computed at the group's root", st.op.name, st._attach_stage.op.name)
            st._set_attach("root")
    sch.groups.append(group)
    return group
