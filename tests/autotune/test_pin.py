"""Pin files: the chosen config of each workload, written from a log and read back."""

from __future__ import annotations

import json

import pytest

import db
from autotune.pin import PIN_FORMAT, PinError, pin_entries, read_pin, write_pin
from autotune.selection import best, knobs_of


def _rec(key: str, template: str, args: list, target: str, x: int, costs: list, **more) -> db.Record:
    return db.Record(workload_key=key, template=template, args=args, target=target,
                     target_model=target.split("=")[-1] if "=" in target else "",
                     config={"index": x, "knobs": {"tile": [x, 4], "unroll": x % 2}}, costs=costs, **more)


MM = ("mm-1", "matmul", [64, 64, 64, "float32"], "llvm -mcpu=znver4")


@pytest.fixture
def log(tmp_path):
    with db.open(tmp_path / "tuning.db") as opened:
        opened.add([
            _rec(*MM, 1, [3e-3, 3.1e-3]),
            _rec(*MM, 2, [1e-3, 1.2e-3]),
            _rec(*MM, 2, [1.1e-3], kind=db.REMEASURE),
            _rec("mm-2", "matmul", [32, 32, 32, "float32"], "cuda -arch=sm_90", 3, [5e-4]),
            _rec("cv-1", "conv2d", [1, 8, 8, 3, 3], "llvm -mcpu=znver4", 1, [2e-3]),
            _rec("cv-1", "conv2d", [1, 8, 8, 3, 3], "llvm -mcpu=znver4", 4, [1e-3, 4e-3]),
            _rec("bad", "conv2d", [1, 4, 4, 3, 3], "llvm", 1, [], error_kind="build"),  # nothing to pin
        ])
        yield opened


def test_a_pin_file_round_trips_the_chosen_configs(log, tmp_path):
    path = tmp_path / "pinned.json"
    assert write_pin(log, path) == 3
    data = json.loads(path.read_text())
    assert data["format"] == PIN_FORMAT and data["version"] == 1
    entries = read_pin(path)
    assert entries == data["entries"] == pin_entries(log)
    assert [(e["template"], e["args"], e["target"], e["model"]) for e in entries] == [
        ("conv2d", [1, 8, 8, 3, 3], "llvm -mcpu=znver4", "znver4"),
        ("matmul", [32, 32, 32, "float32"], "cuda -arch=sm_90", "sm_90"),
        ("matmul", [64, 64, 64, "float32"], "llvm -mcpu=znver4", "znver4")]
    mm = entries[2]
    assert mm["config"] == {"tile": [2, 4], "unroll": 0}            # the ranking's choice, as knobs
    assert mm["cost"] == pytest.approx(1.1e-3) and mm["records"] == 2  # median of 3 costs in 2 records
    for e, key in zip(entries, ("cv-1", "mm-2", "mm-1")):
        top = best(log, key)[0]
        assert e["config"] == knobs_of(top.config) and e["cost"] == top.median


def test_filters_by_template_and_target(log, tmp_path):
    assert [e["args"] for e in pin_entries(log, template="matmul")] == [[32, 32, 32, "float32"],
                                                                        [64, 64, 64, "float32"]]
    assert [e["template"] for e in pin_entries(log, target="llvm")] == ["conv2d", "matmul"]
    assert [e["args"] for e in pin_entries(log, template="matmul", target="cuda -arch=sm_90")] == [
        [32, 32, 32, "float32"]]
    assert write_pin(log, tmp_path / "none.json", template="dense") == 0
    assert read_pin(tmp_path / "none.json") == []


def test_a_path_or_url_can_be_pinned(log, tmp_path):
    assert write_pin(log.where, tmp_path / "a.json") == 3
    assert read_pin(tmp_path / "a.json") == pin_entries(log)


@pytest.mark.parametrize("text, words", [
    ("not json", "is not JSON"),
    ('{"format": "other"}', "is not an autotune pin file"),
    ('{"format": "autotune-pin", "version": 2, "entries": []}', "version 2"),
    ('{"format": "autotune-pin", "version": 1, "entries": {}}', "entries must be a list"),
    ('{"format": "autotune-pin", "version": 1, "entries": [{"template": "m"}]}', "entry 0 lacks args"),
    ('{"format": "autotune-pin", "version": 1, "entries": [{"template": "m", "args": [], "target": "llvm", '
     '"model": "", "config": {}, "cost": -1, "records": 1}]}', "cost must be a positive"),
    ('{"format": "autotune-pin", "version": 1, "entries": [{"template": "m", "args": [], "target": "llvm", '
     '"model": "", "config": [], "cost": 1, "records": 1}]}', "config must be a dict"),
])
def test_a_bad_pin_file_is_named_with_the_problem(tmp_path, text, words):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(PinError, match=words) as err:
        read_pin(path)
    assert str(path) in str(err.value)
