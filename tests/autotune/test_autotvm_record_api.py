"""autotvm.record (encode, decode, load_from_file, pick_best, split_workload, measure_str_key) and
autotvm.database, written as AutoTVM's own tests are, with a line of AutoTVM v0.8's format."""

from __future__ import annotations

import json
import time

import pytest
from autotvm_templates import matmul_template

from autotune import autotvm
from autotune.autotvm import database
from autotune.autotvm.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autotune.autotvm.record import decode, encode, load_from_file, measure_str_key, pick_best, split_workload
from autotune.errors import AutotuneError

NAME = "test_record_api/matmul"
ARGS = [16, 16, 16, "float32"]


def _line(tile_y, tile_x, costs, error_no=0, args=ARGS, target="llvm -keys=cpu -link-params=0"):
    """A record as AutoTVM v0.8 writes it."""
    return json.dumps({
        "input": [target, NAME, args, {}],
        "config": {"index": 7, "code_hash": None,
                   "entity": [["tile_y", "sp", [-1, tile_y]], ["tile_x", "sp", [-1, tile_x]]]},
        "result": [costs, error_no, 0.28, 1.6e9], "version": 0.2, "tvm_version": "0.8.0"})


@pytest.fixture(scope="module")
def task():
    with matmul_template(NAME):
        yield autotvm.task.create(NAME, args=ARGS, target="llvm")


def get_sample_records(task, n):
    return [(MeasureInput("llvm", task, task.config_space.get(i % len(task.config_space))),
             MeasureResult((i + 1.0,), 0, float(i), time.time())) for i in range(n)]


def test_decode_an_autotvm_line_and_encode_it_back(task):
    inp, res = decode(_line(4, 2, [0.05, 0.06]))
    assert inp.task.name == NAME and list(inp.task.args) == ARGS and inp.target.kind.name == "llvm"
    assert inp.config.knob_values() == {"tile_y": [4, 4], "tile_x": [8, 2]}
    assert res == MeasureResult((0.05, 0.06), 0, 0.28, 1.6e9)
    row = json.loads(encode(inp, res))
    assert row["input"][1:] == [NAME, ARGS, {}] and row["input"][0].startswith("llvm")
    assert row["config"]["entity"] == [["tile_y", "sp", [4, 4]], ["tile_x", "sp", [8, 2]]]
    assert row["result"] == [[0.05, 0.06], 0, 0.28, 1.6e9] and row["version"] == 0.2
    inp2, res2 = decode(encode(inp, res))
    assert measure_str_key(inp) == measure_str_key(inp2) and res2 == res
    failed = decode(_line(4, 2, [1e9], error_no=MeasureErrorNo.RUN_TIMEOUT))[1]
    assert failed.error_no == MeasureErrorNo.RUN_TIMEOUT and failed.costs == (1e9,)


def test_load_dump(task):
    inp = MeasureInput("llvm", task, task.config_space.get(0))
    result = MeasureResult((2.0, 2.23, 0.23, 0.123, 0.234, 0.123), MeasureErrorNo.NO_ERROR, 2.3, time.time())
    row = encode(inp, result, protocol="json")
    inp_2, result_2 = decode(row, protocol="json")
    assert measure_str_key(inp) == measure_str_key(inp_2)
    assert measure_str_key(inp, False) != measure_str_key(inp_2)  # without the config
    assert result.costs == result_2.costs and result.error_no == result_2.error_no
    assert result.timestamp == result_2.timestamp and result.all_cost == result_2.all_cost
    with pytest.raises(ValueError, match="protocol 'pickle' is not supported"):
        encode(inp, result, protocol="pickle")
    failed = MeasureResult((RuntimeError("boom"),), MeasureErrorNo.COMPILE_HOST, 0.1, 1.0)
    assert json.loads(encode(inp, failed))["result"] == [[1e9], 2, 0.1, 1.0]  # as AutoTVM writes it


def test_decode_says_why_a_line_is_unusable(task, caplog):
    assert decode(_line(4, 2, [0.05]).replace(NAME, "not/registered")) is None
    assert decode(_line(3, 2, [0.05])) is None  # 3 does not divide 16
    assert decode("{not json") is None
    text = caplog.text
    assert "'not/registered' is not registered" in text and "not JSON" in text and "tile_y" in text


def test_file_io(task, tmp_path):
    file_path = tmp_path / "temp.log"
    inputs = [MeasureInput("llvm", task, task.config_space.get(i)) for i in range(0, 10)]
    results = [MeasureResult((i + 1.0,), 0, 0, 0) for i in range(0, 10)]
    with open(file_path, "w") as fo:
        cb = autotvm.callback.log_to_file(fo)
        cb(None, inputs, results)
    for x, y in zip(zip(inputs, results), load_from_file(file_path)):
        assert x[1] == y[1] and x[0].config.index == y[0].config.index
    with autotvm.apply_history_best(str(file_path)) as best:
        assert best.query("llvm", task.workload).index == inputs[0].config.index
    # Never entered, a context still falls through to the fallback for a workload it lacks.
    best = autotvm.apply_history_best(str(file_path), transfer=False)
    unknown = (task.workload[0], 8, *task.workload[2:])
    assert best.query("llvm", task.workload).index == inputs[0].config.index
    assert best.query("llvm", unknown).is_fallback and best.lookup("llvm", unknown) is None
    assert not best.query("llvm", task.workload).is_fallback


def test_pick_best_and_split_workload(task, tmp_path):
    other = [8, 16, 16, "float32"]
    lines = [_line(4, 2, [0.05]), _line(2, 2, [0.01, 0.03]), _line(8, 8, [1e9], error_no=4),
             _line(4, 4, [0.04], args=other), _line(4, 4, [0.02], args=other), _line(2, 2, [0.01, 0.03]),
             _line(2, 4, [0.02], target="cuda")]
    log = tmp_path / "tvm.log"
    log.write_text("\n".join(lines) + "\n")
    out = tmp_path / "best.log"
    assert pick_best(str(log), str(out)) == 3
    assert out.read_text().splitlines() == [lines[1], lines[4], lines[6]]  # one per workload
    out_pairs = tmp_path / "best_pairs.log"
    assert pick_best(load_from_file(str(log)), str(out_pairs)) == 3  # from (inp, res) pairs
    assert [r.costs for _, r in load_from_file(out_pairs)] == [(0.01, 0.03), (0.02,), (0.02,)]
    paths = split_workload(str(log))
    assert paths == [f"{log}.{i:03d}.wkl" for i in range(3)]
    with open(paths[0]) as f:  # failures and a repeated config left out
        assert f.read().splitlines() == [lines[0], lines[1]]
    with open(split_workload(str(log), clean=False)[0]) as f:
        assert f.read().splitlines() == [lines[0], lines[1], lines[2], lines[5]]


def test_save_load(task):
    records = get_sample_records(task, 3)
    inp1, res1 = records[0]
    inp2, res2 = records[1]
    inp3, _ = records[2]
    _db = database.DummyDatabase()
    _db.flush()
    _db.save(inp1, res1)
    _db.save(inp2, res2)
    load1 = _db.load(inp1)
    load2 = _db.load(inp2)
    load3 = _db.load(inp3)
    assert load1 == res1
    assert load2 == res2
    assert load3 is None
    assert load1 != load2
    assert _db.log.count() == 2  # the records are in the tuning log


def test_db_hash(task):
    inp1, res1 = get_sample_records(task, 1)[0]
    lst_inp = [MeasureInput(inp1.target, task, task.config_space.get(0)) for _ in range(2)]
    assert measure_str_key(lst_inp[0]) == measure_str_key(lst_inp[1])
    _db = database.MemoryDatabase()
    _db.save(lst_inp[0], res1)
    assert _db.load(lst_inp[1]) == res1


def test_db_latest_all_and_filter(task):
    inp1, _ = get_sample_records(task, 1)[0]
    res1 = MeasureResult((1.0,), 0, 0.0, 1000.0)
    res2 = MeasureResult((2.0,), 0, 0.0, 2000.0)
    res3 = MeasureResult(("too slow",), MeasureErrorNo.RUN_TIMEOUT, 0.0, 3000.0)
    _db = database.MemoryDatabase()
    _db.save(inp1, res1, extend=True)
    _db.save(inp1, res2, extend=True)
    _db.save(inp1, res3, extend=True)
    assert _db.load(inp1) == MeasureResult(("AutoTVM RUN_TIMEOUT: too slow",), 7, 0.0, 3000.0)
    assert _db.load(inp1, get_all=True)[:2] == [res1, res2]
    _db.save(inp1, res2)  # without extend: replaces the saved results
    assert _db.load(inp1, get_all=True) == [res2]
    inp2 = MeasureInput("llvm", task, task.config_space.get(1))
    _db.save(inp2, res3)
    failed = _db.filter(lambda inp, results: any(r.error_no != 0 for r in results))
    assert [(inp.config.index, res.error_no) for inp, res in failed] == [(1, 7)]
    inp3 = MeasureInput("llvm", task, task.config_space.get(2))
    partial, unsaved = database.filter_inputs(_db, [inp1, inp2, inp3], retry=True)
    assert partial == [res2, None, None] and [i.config.index for i in unsaved] == [1, 2]
    _db.flush()
    assert _db.load(inp1) is None


def test_redis_database_is_refused():
    with pytest.raises(AutotuneError, match="RedisDatabase is not supported.*MemoryDatabase"):
        database.RedisDatabase()
