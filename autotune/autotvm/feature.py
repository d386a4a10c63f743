"""AutoTVM's ``autotvm.feature``: features of a schedule's loops, computed by this project's
feature code (:mod:`autotune.tuner.features`) on the loop IR of ``compiler.lower(sch, args,
simple_mode=True)``.

* :func:`get_itervar_feature`: one row per loop, AutoTVM's layout
  ``[[name, var], ["_attr_", ...], ["_arith_", ...], [buffer, ...], ...]``;
* :func:`get_itervar_feature_flatten`: those rows' numbers as one float32 vector, whose
  length depends on the loop structure (as AutoTVM's), not on the config's sizes;
* :func:`get_buffer_curve_sample_flatten` (also :func:`get_curve_sample_feature_flatten`):
  a float32 vector of one length for every schedule (AutoTVM's "curve" feature).

The numbers are this project's, not AutoTVM's: a loop's ``_attr_`` is ``[extent, nest
level, top-down iterations, bottom-up iterations, is_serial, is_parallel, is_vectorized,
is_unrolled]`` (AutoTVM adds the thread and other annotations); its ``_arith_`` is ``[adds,
multiplies, divides]`` run under one entry to the loop (of stored values and the indices of
their reads); a buffer's is ``[stride, bytes touched, reuse]`` (AutoTVM's has ``[stride, mod,
count, reuse, thread count, thread reuse]``). The cost model of this project's XGBTuner uses
:func:`autotune.tuner.features.itervar_features` instead, of one length for every schedule.
"""

from __future__ import annotations

import numpy as np

import compiler
from autotune.tuner import features

__all__ = ["get_itervar_feature", "flatten_itervar_feature", "get_itervar_feature_flatten",
           "get_flatten_name", "get_buffer_curve_sample_flatten", "get_curve_sample_feature_flatten",
           "ana_lower"]

_ATTR_NAMES = ["length", "nest_level", "topdown", "bottomup", "is_serial", "is_parallel", "is_vectorized",
               "is_unrolled"]
_ARITH_NAMES = ["add", "mul", "div"]
_TOUCH_NAMES = ["stride", "bytes", "reuse"]


def ana_lower(sch, args, binds=None, simple_mode: bool = True):
    """The loop IR that features are read from: ``compiler.lower`` with ``simple_mode=True``
    (loops keep their kinds: a vectorized loop is still a loop)."""
    if not simple_mode:
        raise ValueError("ana_lower: features are read from simple_mode=True lowering only")
    return compiler.lower(sch, args, binds=binds, simple_mode=True)


def get_itervar_feature(sch, args, take_log: bool = False) -> list:
    """Features of every loop of schedule ``sch`` on ``args``, one row per loop in the order
    loops are entered: ``[[name, var], ["_attr_", ...], ["_arith_", adds, multiplies,
    divides], [buffer name, stride, bytes, reuse], ...]`` (see the module's doc); with
    ``take_log``, sizes are ``log2(1 + x)``."""
    return features.loop_rows(ana_lower(sch, args), take_log=take_log)


def flatten_itervar_feature(fea: list) -> np.ndarray:
    """The numbers of :func:`get_itervar_feature`'s rows as one float32 vector, row by row."""
    flat = [value for row in fea for item in row[1:] for value in item[1:]]
    return np.asarray(flat, dtype=np.float32)


def get_itervar_feature_flatten(sch, args, take_log: bool = True) -> np.ndarray:
    """:func:`get_itervar_feature` flattened (:func:`flatten_itervar_feature`): a float32
    vector whose length is fixed by the loop structure and the buffers under each loop."""
    return flatten_itervar_feature(get_itervar_feature(sch, args, take_log=take_log))


def get_flatten_name(fea: list) -> list[str]:
    """The names of the entries of :func:`flatten_itervar_feature`'s vector for rows ``fea``,
    as ``f<index>.<loop>.<group>.<name>``. (AutoTVM's also takes a line of a log: decode it
    with :func:`autotune.autotvm.record.decode` and instantiate its config first.)"""
    if isinstance(fea, str):
        raise TypeError("get_flatten_name: takes get_itervar_feature's rows; decode a log line with "
                        "autotvm.record.decode and instantiate its config for them")
    names, count = [], 0
    for row in fea:
        loop = str(row[0][0])
        for item in row[1:]:
            labels = {"_attr_": _ATTR_NAMES, "_arith_": _ARITH_NAMES}.get(item[0], _TOUCH_NAMES)
            for label in labels[:len(item) - 1]:
                names.append(f"f{count}.{loop}.{item[0]}.{label}")
                count += 1
    return names


def get_buffer_curve_sample_flatten(sch, args, sample_n: int = 30) -> np.ndarray:
    """AutoTVM's curve (relation) feature: for each buffer the statements of the schedule
    touch, the bytes touched and their reuse as the loop nest grows outwards, sampled at
    ``sample_n`` points (:func:`autotune.tuner.features.curve_features`). One length for
    every schedule: ``4 statements * 4 buffers * 2 curves * sample_n``."""
    return features.curve_features(ana_lower(sch, args), sample_n=sample_n)


def get_curve_sample_feature_flatten(sch, args, sample_n: int = 30) -> np.ndarray:
    """The same as :func:`get_buffer_curve_sample_flatten`."""
    return get_buffer_curve_sample_flatten(sch, args, sample_n=sample_n)
