"""A config: one point of a config space, the entity chosen for each knob."""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from search_spaces.errors import InstantiationError, SearchSpaceError
from search_spaces.space.axis import Axis, VirtualAxis, knob_outputs
from search_spaces.space.entity import AnnotateEntity, Entity, OtherOptionEntity, ReorderEntity, SplitEntity

if TYPE_CHECKING:
    from search_spaces.space.config_space import ConfigSpace

__all__ = ["ConfigEntity", "checked_flop"]


class ConfigEntity:
    """One point of a config space: an entity per knob, and its mixed-radix index.

    Inside a template (apply mode) ``cfg[name]`` is the chosen entity and the
    ``define_*`` calls do nothing. :meth:`to_json` / :meth:`from_json` round-trip it.
    """

    code_hash = None  # AutoTVM's hash of the template's code; not kept here

    def __init__(self, index: int, entities: dict[str, Entity], is_fallback: bool = False):
        self.index = int(index)
        self._entities = dict(entities)
        self.is_fallback = is_fallback

    axis = staticmethod(VirtualAxis)
    reduce_axis = axis

    def __getitem__(self, name: str) -> Entity:
        try:
            return self._entities[name]
        except KeyError:
            raise SearchSpaceError(f"unknown knob {name!r}; this config has "
                                   f"{', '.join(self._entities) or 'no knobs'}") from None

    def __contains__(self, name: str) -> bool:
        return name in self._entities

    def keys(self) -> list[str]:
        return list(self._entities)

    def items(self):
        return self._entities.items()

    def knob_values(self) -> dict:
        """``{knob name: JSON value}``, in definition order."""
        return {k: e.value() for k, e in self._entities.items()}

    # Templates call these in apply mode too: the space is already defined, so they only
    # check that the knob belongs to this config, and return what AutoTVM's return in a
    # config: the knob's output axes, with no knob space.
    def _defined(self, name: str) -> None:
        if name not in self._entities:
            raise SearchSpaceError(f"the template defines knob {name!r}, which this config lacks "
                                   f"(it has {', '.join(self._entities) or 'no knobs'}); "
                                   "the config belongs to another space")

    def define_split(self, name: str, axis, policy: str = "factors", num_outputs: int = 2,
                     **kwargs) -> list[Axis]:
        """Checks that this config has split knob ``name``; its ``num_outputs`` output axes."""
        self._defined(name)
        return knob_outputs(None, num_outputs)

    def define_reorder(self, name: str, axes: Sequence, policy: str = "all", **kwargs) -> list[Axis]:
        """Checks that this config has reorder knob ``name``; one output axis per axis."""
        self._defined(name)
        return knob_outputs(None, len(axes))

    def define_annotate(self, name: str, axes: Sequence, policy: str = "try_unroll", **kwargs) -> list[Axis]:
        """Checks that this config has annotate knob ``name``; one output axis per axis."""
        self._defined(name)
        return knob_outputs(None, len(axes))

    def define_knob(self, name: str, candidate: Sequence = (), default=None, absent=None) -> list[Axis]:
        """Checks that this config has knob ``name``; ``[]``."""
        self._defined(name)
        return []

    def add_constraint(self, predicate: Callable, knobs: Sequence[str] | None = None,
                       name: str | None = None) -> None:
        """No-op in apply mode (the space already applied its constraints)."""

    def add_flop(self, flop) -> None:
        """Checks ``flop`` only, in apply mode: the task took the count when it defined the space."""
        checked_flop(flop)

    def raise_error(self, msg: str) -> None:
        """Reject this config from inside the template (AutoTVM's ``cfg.raise_error``): raises
        :class:`InstantiationError` with ``msg``, which fails the config's measurement as an
        instantiation error."""
        raise InstantiationError(msg, config=self)

    def valid(self) -> bool:
        """True: a config whose template called :meth:`raise_error` never got this far."""
        return True

    def get_flatten_feature(self) -> np.ndarray:
        """The knob values as one float32 vector, as AutoTVM's ``get_flatten_feature``: split
        sizes (the outermost as -1), permutations, a one-hot code of each annotation, and
        ``define_knob`` values (which must then be numbers)."""
        out: list[float] = []
        for name, e in self._entities.items():
            if isinstance(e, SplitEntity):
                out += [-1, *e.size[1:]]
            elif isinstance(e, ReorderEntity):
                out += e.perm
            elif isinstance(e, AnnotateEntity):
                for ann in e.anns:
                    hot = [0] * len(_ANN_ONE_HOT)
                    hot[_ANN_ONE_HOT[ann] if isinstance(ann, str) else _ANN_ONE_HOT["none"]] = 1
                    out += hot
            elif isinstance(e, OtherOptionEntity):
                if isinstance(e.val, bool) or not isinstance(e.val, numbers.Real):
                    raise SearchSpaceError(f"get_flatten_feature: knob {name!r} has the value {e.val!r}, "
                                           "not a number")
                out.append(e.val)
        return np.array(out, dtype=np.float32)

    def get_other_option(self) -> dict:
        """``{knob name: value}`` of the ``define_knob`` knobs."""
        return {k: e.val for k, e in self._entities.items() if isinstance(e, OtherOptionEntity)}

    def __str__(self) -> str:
        """AutoTVM's form: ``[('tile_x', [-1, 8]), ('unroll', 1)],None,<index>``."""
        return f"[{', '.join(f'({k!r}, {_autotvm_str(e)})' for k, e in self._entities.items())}]," \
               f"{self.code_hash},{self.index}"

    def to_json(self) -> dict:
        """``{"index": int, "knobs": {name: value}}``; plain JSON data."""
        return {"index": self.index, "knobs": self.knob_values()}

    @classmethod
    def from_json(cls, space: ConfigSpace, data: dict | str) -> ConfigEntity:
        """The config described by ``data`` in ``space``; unknown or missing knobs, values
        outside the space and violated constraints raise :class:`SearchSpaceError`.

        The knob values name the config. A stored ``index`` is only a shorthand for them in
        the space that wrote it; when a template's space has since gained or lost knob values
        the index shifts, so it is recomputed here rather than trusted or checked (a log
        written before the change still applies and resumes). A knob the template has since
        gained takes its ``absent`` choice (``define_knob``) where it has one."""
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise SearchSpaceError(f"config JSON does not parse: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("knobs"), dict):
            raise SearchSpaceError(f"a config is {{'index': int, 'knobs': {{...}}}}, got {data!r}")
        knobs = data["knobs"]
        unknown = [k for k in knobs if k not in space.space_map]
        if unknown:
            raise SearchSpaceError(f"unknown knob {unknown[0]!r} in config; the space has "
                                   f"{', '.join(space.space_map) or 'no knobs'}")
        missing = [k for k in space.space_map if k not in knobs]
        added = {k: space.space_map[k] for k in missing if space.space_map[k].absent is not None}
        if len(added) < len(missing):
            raise SearchSpaceError(f"config lacks knob {next(k for k in missing if k not in added)!r}")
        if added:  # recorded before these knobs existed: the choices that do what it did
            knobs = {**knobs, **{k: knob[knob.absent].value() for k, knob in added.items()}}
        choices = [knob.index_of(knobs[name]) for name, knob in space.space_map.items()]
        index = space.choices_to_index(choices)
        entities = space.entities(choices)
        bad = space.violated_constraint(entities)
        if bad is not None:
            raise SearchSpaceError(f"config {knobs!r} violates constraint {bad.name}")
        return cls(index, entities)

    def __eq__(self, other) -> bool:
        return (isinstance(other, ConfigEntity) and self.index == other.index
                and self.knob_values() == other.knob_values())

    def __hash__(self) -> int:
        return hash((self.index, json.dumps(self.knob_values())))

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={e.value()!r}" for k, e in self._entities.items())
        return f"ConfigEntity(index={self.index}, {body})"


# AutoTVM's one-hot positions of annotations in get_flatten_feature.
_ANN_ONE_HOT = {"none": 0, "vec": 1, "unroll": 2, "blockIdx.x": 3, "blockIdx.y": 4, "blockIdx.z": 5,
                "threadIdx.x": 6, "threadIdx.y": 7, "threadIdx.z": 8, "vthread": 9, "fuse": 10}


def _autotvm_str(entity: Entity) -> str:
    """An entity as AutoTVM prints it inside a config."""
    if isinstance(entity, SplitEntity):
        return str([-1, *entity.size[1:]])
    if isinstance(entity, ReorderEntity):
        return str(list(entity.perm))
    if isinstance(entity, AnnotateEntity):
        return str(list(entity.anns))
    return str(entity.value())


def checked_flop(flop) -> float:
    """``flop`` as a number of operations; SearchSpaceError unless it is a finite number >= 0."""
    if isinstance(flop, bool) or not isinstance(flop, numbers.Real) or not math.isfinite(flop) or flop < 0:
        raise SearchSpaceError(f"add_flop takes a finite number of operations >= 0, got {flop!r}")
    return flop
