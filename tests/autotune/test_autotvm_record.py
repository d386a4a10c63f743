"""AutoTVM's JSON-lines logs: import into the tuning log, what is reported, apply_history_best on them."""

from __future__ import annotations

import json
import logging

import pytest
from autotvm_templates import elementwise_template

import autotune
import compiler
import db
from autotune import autotvm

TARGET = "llvm -mcpu=znver4"  # pinned: the records name this CPU, whatever machine reads them


@pytest.fixture(scope="module")
def task():
    with elementwise_template("test_record/add", lambda a: a + 1.0):
        yield autotvm.task.create("test_record/add", args=(32, "float32"), target=TARGET)


AUTOTVM_TARGET = TARGET + " -keys=cpu -link-params=0"  # with options AutoTVM writes and we have no use for


def _line(inner: int, unroll: int, costs, error_no: int = 0, target: str = AUTOTVM_TARGET,
          name: str = "test_record/add", args=(32, "float32"), stamp: float = 1.7e9) -> str:
    """A record as AutoTVM v0.8 writes it (the outer split size left as -1)."""
    return json.dumps({"input": [target, name, list(args), {}],
                       "config": {"index": 999, "code_hash": None,
                                  "entity": [["tile", "sp", [-1, inner]], ["unroll", "ot", unroll]]},
                       "result": [costs, error_no, 0.5, stamp], "version": 0.2, "tvm_version": "0.8.0"})


def test_import_reads_autotvm_records(task, tmp_path, caplog):
    path = tmp_path / "tuned.log"
    path.write_text("\n".join([
        "# a comment line",
        _line(8, 0, [2e-6, 2.2e-6]),
        _line(4, 1, [1e-6, 1.1e-6], stamp=1.7e9 + 1),
        _line(2, 0, [1e9], error_no=4, stamp=1.7e9 + 2),
        json.dumps({"i": [TARGET, "test_record/add", [32, "float32"], {}, None,
                          {"index": 3, "code_hash": None,
                           "entity": [["tile", "sp", [16, 2]], ["unroll", "ot", 1]]}],
                    "r": [[3e-6], 0, 0.1, 1.7e9 + 3], "v": 0.1}),  # AutoTVM before v0.7
    ]) + "\n")
    with db.open(":memory:") as log, caplog.at_level(logging.WARNING, logger="autotune.autotvm.record"):
        assert autotvm.import_log(log, path) == 4
        records = log.records(task)
        assert len(records) == 4 and {r.workload_key for r in records} == {task.workload_key}
        by_tile = {tuple(r.config["knobs"]["tile"]): r for r in records}
        assert set(by_tile) == {(4, 8), (8, 4), (16, 2)}  # the outer size filled in from the space
        fast = by_tile[(8, 4)]
        assert fast.config["knobs"]["unroll"] == 1 and fast.costs == [1e-6, 1.1e-6]
        assert fast.config_index == task.config_space.from_json(fast.config).index  # our index, not 999
        assert fast.target_model == "znver4" and fast.kind == db.TRIAL and fast.error_kind is None
        failed = [r for r in records if r.error_kind is not None]
        assert len(failed) == 1 and failed[0].error_kind == "runtime_error" and failed[0].costs == []
        assert "RUNTIME_DEVICE" in failed[0].error_msg
        # Importing the same file again adds nothing.
        assert autotvm.import_log(log, path) == 0
    text = caplog.text
    assert "all_cost (4)" in text and "target option -keys (3)" in text and "-link-params (3)" in text


def test_records_that_cannot_be_used_are_skipped_and_reported(task, tmp_path, caplog):
    path = tmp_path / "mixed.json"
    path.write_text("\n".join([
        _line(8, 0, [2e-6]),
        _line(8, 0, [2e-6], name="conv2d_nchw.x86"),
        _line(8, 0, [2e-6], target="opencl -device=mali"),
        _line(3, 0, [2e-6]),  # no split of 32 has an inner size of 3
        json.dumps({"input": [TARGET, "test_record/add", [32, "float32"], {}],
                    "config": {"index": 0, "code_hash": None, "entity": [["nope", "ot", 1]]},
                    "result": [[1e-6], 0, 0.1, 1.7e9]}),
        "not json at all",
    ]) + "\n")
    with db.open(":memory:") as log, caplog.at_level(logging.WARNING, logger="autotune.autotvm.record"):
        assert autotvm.import_log(log, path) == 1
    text = caplog.text
    assert "template 'conv2d_nchw.x86' is not registered here" in text and "first at line 2" in text
    assert "target kind 'opencl' is not supported" in text
    assert "split [-1, 3] of knob 'tile' is not in its space" in text
    assert "knob 'nope' is not in the space" in text
    assert "not JSON" in text and "line 6" in text

    only_bad = tmp_path / "bad.log"
    only_bad.write_text(_line(8, 0, [2e-6], name="conv2d_nchw.x86") + "\n")
    with db.open(":memory:") as log, pytest.raises(autotune.AutotuneError, match="conv2d_nchw.x86"):
        autotvm.import_log(log, only_bad)


def test_apply_history_best_on_an_autotvm_log_picks_the_fastest(task, tmp_path):
    path = tmp_path / "best.log"
    path.write_text("\n".join([_line(8, 0, [5e-6] * 3), _line(4, 1, [1e-6] * 3), _line(2, 0, [9e-6] * 3),
                               _line(1, 0, [1e9], error_no=2)]) + "\n")
    with autotvm.apply_history_best(str(path)) as ctx:
        cfg = ctx.query(compiler.Target(TARGET), task)
        assert ctx.query(TARGET, task.workload) == cfg  # AutoTVM asks with the workload
    assert cfg.knob_values() == {"tile": [8, 4], "unroll": 1}
    with pytest.raises(FileNotFoundError, match="no such AutoTVM log"):
        autotvm.apply_history_best(str(tmp_path / "missing.log"))


def test_written_records_read_back_the_same(task, tmp_path):
    from autotune.autotvm.record import encode
    from measure import ErrorKind, MeasureInput, MeasureResult

    space = task.config_space
    good = MeasureInput(task, space.from_json({"knobs": {"tile": [8, 4], "unroll": 1}}))
    bad = MeasureInput(task, space.from_json({"knobs": {"tile": [4, 8], "unroll": 0}}))
    path = tmp_path / "out.log"
    wrong = MeasureResult((), ErrorKind.WRONG_ANSWER, "B differs", 0.1, 0.2, 1.7e9, "w")
    path.write_text(encode(good, MeasureResult((1e-6, 2e-6), None, "", 0.25, 0.5, 1.7e9, "w")) + "\n"
                    + encode(bad, wrong) + "\n")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows[0]["input"] == [TARGET, "test_record/add", [32, "float32"], {}]
    assert rows[0]["config"]["entity"] == [["tile", "sp", [8, 4]], ["unroll", "ot", 1]]
    assert rows[0]["result"] == [[1e-6, 2e-6], 0, 0.75, 1.7e9]
    assert rows[1]["result"][:2] == [[1e9], 5]
    with db.open(":memory:") as log:
        assert autotvm.import_log(log, path) == 2
        got = {r.config_index: r for r in log.records(task)}
        assert got[good.config.index].costs == [1e-6, 2e-6]
        assert got[bad.config.index].error_kind == "wrong_answer"


def test_which_files_are_autotvm_logs(task, tmp_path):
    from autotune.autotvm.callback import LogToFile, LogToTuningLog, is_autotvm_log

    assert is_autotvm_log(tmp_path / "new.log") and is_autotvm_log(str(tmp_path / "new.json"))
    assert not is_autotvm_log(tmp_path / "tuning.db") and not is_autotvm_log("sqlite:///x.log")
    records = tmp_path / "records.log"
    records.write_text("# comment\n" + _line(8, 0, [1e-6]) + "\n")
    assert is_autotvm_log(records)
    pin = tmp_path / "pin.json"
    pin.write_text(json.dumps({"format": "autotune-pin", "version": 1, "entries": []}, indent=1))
    assert not is_autotvm_log(pin)
    # A tuning log (SQLite) named like an AutoTVM log stays a tuning log.
    sql = tmp_path / "tuned.log"
    with db.open(sql) as log:
        autotvm.import_log(log, records)
    assert not is_autotvm_log(sql)
    assert isinstance(autotvm.callback.log_to_file(str(sql)), LogToTuningLog)
    assert isinstance(autotvm.callback.log_to_file(str(records)), LogToFile)
    with autotvm.apply_history_best(str(sql)) as ctx:
        assert ctx.query(TARGET, task).knob_values() == {"tile": [4, 8], "unroll": 0}


def test_load_from_file_gives_autotvm_pairs(task, tmp_path):
    path = tmp_path / "pairs.log"
    path.write_text("\n".join([_line(8, 0, [2e-6, 3e-6]), _line(4, 1, [1e9], error_no=6),
                               _line(8, 0, [2e-6], name="conv2d_nchw.x86")]) + "\n")
    pairs = list(autotvm.record.load_from_file(path))
    assert len(pairs) == 2
    (inp, res), (bad_inp, bad) = pairs
    assert inp.task is task and inp.target == task.target
    assert inp.config.knob_values() == {"tile": [4, 8], "unroll": 0}
    assert res.costs == (2e-6, 3e-6) and res.error_no == 0 and res.timestamp == 1.7e9
    assert bad.error_no == autotvm.MeasureErrorNo.BUILD_TIMEOUT and bad.costs == (1e9,)  # as in the file
    assert bad_inp.config.knob_values() == {"tile": [8, 4], "unroll": 1}


def test_log_to_file_writes_to_an_open_file(task):
    import io

    from autotune.autotvm.measure import MeasureInput as InputView
    from autotune.autotvm.measure import MeasureResult as ResultView
    from measure import MeasureInput, MeasureResult

    inp = MeasureInput(task, task.config_space.default_config)
    res = MeasureResult((1e-6,), None, "", 0.1, 0.2, 1.7e9, "w")
    out = io.StringIO()
    autotvm.callback.log_to_file(out)(None, [InputView.of(inp)], [ResultView.of(res)])
    [row] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert row["input"][1:3] == ["test_record/add", [32, "float32"]]
    assert row["config"]["index"] == inp.config.index and row["result"][:2] == [[1e-6], 0]
