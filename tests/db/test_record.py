"""Records as plain data: checks on construction, JSON round trips, costs and fingerprints."""

from __future__ import annotations

import json

import pytest

import db


def _record(**fields: object) -> db.Record:
    values: dict[str, object] = dict(workload_key="k", template="matmul", args=[8, 8, 8, "float32"],
                                     target="llvm", config={"tile": [2, 4]}, costs=[1.0, 2.0, 6.0])
    values.update(fields)
    return db.Record(**values)


def test_json_round_trip_keeps_every_field() -> None:
    record = _record(args=(8, (1, 2), {"b": 1, "a": [None, True]}), target="cuda -arch=sm_90",
                     target_model="sm_90", config={"z": 1, "a": [[1, 2], "x"]}, config_index=2**40,
                     costs=[1.5e-3, 1.25e-3], error_kind=None, error_msg="", build_time=0.5, run_time=0.25,
                     host="node-1", device="NVIDIA H100", timestamp=1.7e9 + 0.123456, run_id="ab" * 16,
                     gflops=123.5, kind=db.REMEASURE)
    assert record.args == [8, [1, 2], {"a": [None, True], "b": 1}]  # tuples become lists
    back = db.Record.from_json(record.to_json())
    assert back == record
    assert back.uid == record.uid
    assert db.Record.from_dict(json.loads(record.to_json())) == record


def test_mean_median_and_errors() -> None:
    record = _record(costs=[1.0, 2.0, 6.0])
    assert record.mean_cost == 3.0 and record.median_cost == 2.0 and not record.is_error
    failed = _record(costs=[], error_kind="build", error_msg="LLVM said no\nsecond line")
    assert failed.is_error and failed.mean_cost is None and failed.median_cost is None
    assert db.Record.from_json(failed.to_json()) == failed


def test_numpy_scalars_become_python_numbers() -> None:
    np = pytest.importorskip("numpy")
    record = _record(config={"n": np.int64(4)}, config_index=np.int32(3), costs=[np.float32(0.5)])
    assert type(record.config["n"]) is int and type(record.config_index) is int
    assert record.costs == [0.5] and type(record.costs[0]) is float


def test_uid_is_a_fingerprint_of_the_content() -> None:
    assert _record(timestamp=1.0).uid == _record(timestamp=1.0).uid
    assert _record(timestamp=1.0).uid != _record(timestamp=2.0).uid
    ab, ba = _record(timestamp=1.0, config={"a": 1, "b": 2}), _record(timestamp=1.0, config={"b": 2, "a": 1})
    assert ab.uid == ba.uid


def test_the_kind_is_no_part_of_the_fingerprint() -> None:
    # records written before kinds existed keep their uid, so importing them again adds nothing
    trial = _record(timestamp=1.0)
    assert trial.kind == db.TRIAL
    assert _record(timestamp=1.0, kind=db.REMEASURE).uid == trial.uid
    data = trial.to_dict()
    del data["kind"]
    assert db.Record.from_dict(data) == trial


@pytest.mark.parametrize("fields, message", [
    ({"workload_key": ""}, "workload_key"),
    ({"template": 3}, "template"),
    ({"args": "8,8"}, "args"),
    ({"config": {"f": object()}}, "config"),
    ({"config": {1: 2}}, "config"),
    ({"config_index": 1.5}, "config_index"),
    ({"costs": ["fast"]}, "costs"),
    ({"costs": []}, "neither costs nor an error"),
    ({"costs": [float("inf")]}, "finite"),
    ({"costs": [-1.0]}, "finite"),
    ({"gflops": "many"}, "gflops"),
    ({"timestamp": None}, "timestamp"),
    ({"error_kind": ""}, "error_kind"),
    ({"kind": "guess"}, "kind.*trial, remeasure"),
])
def test_bad_fields_raise_record_error_naming_them(fields: dict, message: str) -> None:
    with pytest.raises(db.RecordError, match=message):
        _record(**fields)


def test_from_json_rejects_garbage_clearly() -> None:
    with pytest.raises(db.RecordError, match="not valid JSON"):
        db.Record.from_json("{nope")
    with pytest.raises(db.RecordError, match="JSON object"):
        db.Record.from_json("[1, 2]")
    with pytest.raises(db.RecordError, match="lacks field.*config"):
        db.Record.from_json('{"workload_key": "k", "template": "t", "args": [], "target": "llvm"}')
    newer = json.loads(_record().to_json()) | {"field_from_the_future": 1}
    assert db.Record.from_dict(newer) == db.Record.from_dict(json.loads(_record(timestamp=newer["timestamp"])
                                                                          .to_json()))


def test_target_kind() -> None:
    assert db.target_kind("llvm -mcpu=znver4") == "llvm"
    assert db.Workload("k", "t", [], "cuda -arch=sm_90", "sm_90").target_kind == "cuda"
