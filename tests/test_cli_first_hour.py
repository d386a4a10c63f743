"""The ``autotune`` command line on what a new user meets first: pin files for build, bad sizes,
empty spaces, Ray not running, the rerun hint after Ctrl-C, --out directories, template
summaries, ``--json`` output and tab completion.

One module-scoped log is tuned once (matmul 16x16x16, 3 random trials, with ``--json``); the
other commands read it. Commands run in subprocesses, as a user runs them, except where a test
needs to interrupt tuning or register a template of its own.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

import autotune
import db
import search_spaces
from autotune.cli import main
from compiler import te

ROOT = Path(__file__).resolve().parents[1]
ARGS = "16,16,16,float32"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


def _run(*args: str, cwd=None, env=None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env or ENV)


def _one_line_error(p: subprocess.CompletedProcess, code: int) -> str:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


def _main(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A directory holding tuning.db with 3 trials of matmul 16x16x16, and tune's --json output."""
    d = tmp_path_factory.mktemp("cli_first_hour")
    p = _run("tune", "matmul", "--args", ARGS, "--trials", "3", "--tuner", "random", "--batch-size", "3",
             "--seed", "0", "--db", "tuning.db", "--no-progress", "--json", cwd=d, timeout=300)
    assert p.returncode == 0, p.stderr
    return d, p


# ---------------------------------------------------------------------------- --json


def test_tune_json_is_the_only_thing_on_stdout(tuned):
    _, p = tuned
    summary = json.loads(p.stdout)  # the whole of stdout is one JSON document
    assert summary["template"] == "matmul" and summary["args"] == [16, 16, 16, "float32"]
    assert summary["trials"] == 3 and summary["stopped"] == "budget" and summary["errors"] == {}
    assert summary["best_seconds"] > 0 and summary["best_gflops"] > 0
    assert set(summary["best_config"]) >= {"mr", "nr", "kc"}
    assert summary["best_gflops"] == pytest.approx(2 * 16**3 / summary["best_seconds"] / 1e9)
    assert "Tuning matmul(16,16,16,float32)" in p.stderr and "best config:" in p.stderr


def test_best_json_agrees_with_the_tune_summary(tuned):
    d, p = tuned
    q = _run("best", "--db", "tuning.db", "--json", cwd=d)
    assert q.returncode == 0, q.stderr
    data = json.loads(q.stdout)
    (row,) = data["workloads"]
    summary = json.loads(p.stdout)
    assert row["trials"] == 3 and row["errors"] == 0
    assert row["best_config"] == summary["best_config"]
    assert row["best_seconds"] == pytest.approx(summary["best_seconds"])
    assert [r["status"] for r in data["runs"]] == ["budget"]


def test_templates_and_space_json(capsys):
    code, out, err = _main(capsys, "templates", "--json")
    assert code == 0, err
    templates = {t["name"]: t for t in json.loads(out)}
    assert set(templates) == set(search_spaces.list_templates())
    matmul = templates["matmul"]
    assert matmul["targets"][0] == "llvm"
    assert [x["name"] for x in matmul["parameters"]] == ["N", "L", "M", "dtype"]
    assert matmul["parameters"][3] == {"name": "dtype", "type": "str", "default": "float32"}

    code, out, err = _main(capsys, "space", "matmul", "--args", ARGS, "--json")
    assert code == 0, err
    space = json.loads(out)
    expected = search_spaces.create_task("matmul", [16, 16, 16, "float32"], "llvm").config_space
    assert space["size"] == expected.size and space["raw_size"] == expected.raw_size
    assert [k["name"] for k in space["knobs"]] == [k.name for k in expected.knobs]
    assert space["flop"] == 2 * 16**3


def test_templates_text_shows_whole_first_sentences(capsys):
    code, out, err = _main(capsys, "templates")
    assert code == 0, err
    docs = [line.strip() for line in out.splitlines() if line.startswith("    ")]
    assert docs  # the built-in templates have docstrings
    for doc in docs:
        assert doc.endswith((".", "!", "?")), doc  # a sentence, never cut at a line break
    # Other tests in this process may have registered templates without a docstring: every
    # template is listed, and the text shows exactly the summaries that exist.
    listed = json.loads(_main(capsys, "templates", "--json")[1])
    assert len(listed) == len(search_spaces.list_templates())
    assert docs == [t["summary"] for t in listed if t["summary"]]


# ---------------------------------------------------------------------------- fixes


def test_build_accepts_a_pin_file(tuned):
    d, _ = tuned
    p = _run("pin", "--db", "tuning.db", "-o", "pins.json", cwd=d)
    assert p.returncode == 0, p.stderr
    p = _run("build", "matmul", "--args", ARGS, "--db", "pins.json", "-o", "pinned.so", cwd=d)
    assert p.returncode == 0, p.stderr
    assert "the best config of pins.json" in p.stdout
    code = ("import numpy as np, compiler\n"
            "m = compiler.runtime.load_module('pinned.so')\n"
            "rng = np.random.default_rng(0)\n"
            "a = rng.random((16, 16), dtype='float32'); b = rng.random((16, 16), dtype='float32')\n"
            "c = np.full((16, 16), np.nan, 'float32'); m(a, b, c)\n"
            "np.testing.assert_allclose(c, a @ b, rtol=1e-5)\n")
    q = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=d,
                       env=ENV)
    assert q.returncode == 0, q.stderr
    missing = _run("build", "matmul", "--args", ARGS, "--db", "missing.json", "-o", "k.so", cwd=d)
    line = _one_line_error(missing, 1)
    assert "no pin file at missing.json" in line


@pytest.mark.parametrize("template, args, bad", [
    ("matmul", "0,512,512,float32", "N=0"),
    ("dense", "4,-8,16,float32", "in_dim=-8"),
])
def test_non_positive_sizes_are_one_line_naming_the_value(capsys, template, args, bad):
    code, out, err = _main(capsys, "space", template, "--args", args)
    assert code == 2 and not out and err.count("\n") == 1, (code, out, err)
    line = err.strip()
    assert bad in line and "sizes must be 1 or more" in line
    assert "max()" not in line


def test_report_creates_the_out_directory(tuned):
    d, _ = tuned
    p = _run("report", "--db", "tuning.db", "--out", "new/sub/report.html", cwd=d)
    assert p.returncode == 0, p.stderr
    assert (d / "new" / "sub" / "report.html").stat().st_size > 0
    (d / "afile").write_text("")
    line = _one_line_error(_run("report", "--db", "tuning.db", "--out", "afile/report.html", cwd=d), 1)
    assert "cannot create the directory" in line and "afile" in line and "Errno" not in line


def _ray_gcs_processes() -> list[str]:
    """The pids of the Ray GCS servers running on this machine (``--cluster auto`` finds them)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == "gcs_server":
                found.append(entry.name)
        except OSError:  # the process ended meanwhile
            continue
    return found


@pytest.mark.xdist_group("ray")  # after the Ray tests have stopped their clusters, not beside them
def test_cluster_auto_without_ray_names_what_to_do(tmp_path):
    deadline = time.monotonic() + 60  # a cluster stopped just before may take a moment to go
    while _ray_gcs_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    if _ray_gcs_processes():
        pytest.skip("a Ray cluster runs on this machine")
    env = {k: v for k, v in ENV.items() if k != "RAY_ADDRESS"}
    p = _run("tune", "matmul", "--args", ARGS, "--trials", "1", "--tuner", "random", "--cluster", "auto",
             "--db", "t.db", "--no-progress", cwd=tmp_path, env=env)
    if p.returncode == 0:
        pytest.skip("a Ray cluster runs on this machine")
    line = _one_line_error(p, 1)
    assert "--address" not in line
    assert "ray start --head" in line and "--cluster local" in line


def test_cluster_error_drops_ray_s_advice():
    import argparse

    from autotune.commands import cluster_error

    ns = argparse.Namespace(cluster="head:6379")
    text = str(cluster_error(ns, ConnectionError("Failed to connect to GCS at head:6379. Please specify "
                                                 "the one to connect to by setting `--address` flag.")))
    assert "Failed to connect to GCS at head:6379." in text and "--address" not in text
    assert text.startswith("--cluster head:6379:")


# ---------------------------------------------------------------------------- in-process commands


def test_rerun_hint_after_ctrl_c_finishes_the_budget(tmp_path, capsys, monkeypatch):
    log = str(tmp_path / "t.db")
    common = ["--tuner", "random", "--batch-size", "2", "--db", log, "--no-progress"]
    real_tune = autotune.tune

    def quick_tune(*args, **kwargs):  # the end-of-run re-measurements play no part here
        return real_tune(*args, **{**kwargs, "remeasure": False})

    monkeypatch.setattr(autotune, "tune", quick_tune)
    code, _, err = _main(capsys, "tune", "matmul", "--args", ARGS, "--trials", "2", "--seed", "0", *common)
    assert code == 0, err

    def interrupted_tune(*args, **kwargs):
        seen = []

        def ctrl_c(inp, res):
            seen.append(res)
            if len(seen) == 2:
                raise KeyboardInterrupt

        return quick_tune(*args, **{**kwargs, "callbacks": [ctrl_c]})

    monkeypatch.setattr(autotune, "tune", interrupted_tune)
    code, out, err = _main(capsys, "tune", "matmul", "--args", ARGS, "--trials", "6", "--seed", "1", *common)
    assert code == 130, err
    assert "stopped: interrupted" in out
    text = " ".join(out.split())
    # The two results seen before Ctrl-C are kept, and so is any result of the same batch that
    # was already in flight: how many depends on timing, so it is read from the summary.
    done = int(re.search(r"trials (\d+) this run \(\+2 earlier\)", text).group(1))
    assert 2 <= done < 6, text
    hint = re.search(rf"to make only the {6 - done} trials this run has left: (autotune tune .*?--db \S+)",
                     text)
    assert hint, text
    command = shlex.split(hint.group(1))
    assert command[command.index("--trials") + 1] == "8" and "--total" in command

    monkeypatch.setattr(autotune, "tune", quick_tune)
    code, out, err = _main(capsys, *command[1:], "--no-progress", "--batch-size", "2", "--seed", "2")
    assert code == 0, err
    assert f"trials {6 - done} this run (+{2 + done} earlier)" in " ".join(out.split())
    task = search_spaces.create_task("matmul", [16, 16, 16, "float32"], "llvm")
    with db.open(log) as opened:
        assert opened.count(task, kind=db.TRIAL) == 8
    code, out, err = _main(capsys, *command[1:], "--no-progress")  # run again: the budget is spent
    assert code == 0 and "trials 0 this run (+8 earlier)" in " ".join(out.split()), out


@pytest.fixture
def nothing_fits():
    @search_spaces.template("cli_nothing_fits")
    def nothing_fits(n: int):
        """A split no config of which passes the constraint."""
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
        s = te.create_schedule(B.op)
        cfg = search_spaces.get_config()
        cfg.define_split("tile", B.op.axis[0], num_outputs=2)
        cfg.add_constraint(lambda c: c["tile"].size[-1] > 1000, knobs=["tile"], name="wider_than_1000")
        cfg["tile"].apply(s, B, B.op.axis[0])
        return s, [A, B]

    yield "cli_nothing_fits"
    search_spaces.unregister_template("cli_nothing_fits")


@pytest.mark.parametrize("command", ["space", "tune", "build"])
def test_a_constraint_that_rejects_everything_is_named(nothing_fits, tmp_path, capsys, command):
    extra = {"tune": ["--trials", "2", "--db", str(tmp_path / "t.db"), "--no-progress"],
             "build": ["-o", str(tmp_path / "k.so")]}.get(command, [])
    code, out, err = _main(capsys, command, nothing_fits, "--args", "16", *extra)
    assert code == 2, (out, err)
    assert err.count("\n") == 1, err
    assert "cli_nothing_fits(16)" in err and "'wider_than_1000'" in err and "reject every one" in err
    assert not (tmp_path / "t.db").exists()


# ---------------------------------------------------------------------------- tab completion


def _complete(line: str, tmp_path: Path) -> list[str]:
    """What tab completion offers after ``line`` (argcomplete's protocol, as bash drives it)."""
    out = tmp_path / "completions.txt"
    env = {**ENV, "_ARGCOMPLETE": "1", "COMP_LINE": line, "COMP_POINT": str(len(line)),
           "_ARGCOMPLETE_STDOUT_FILENAME": str(out), "_ARGCOMPLETE_IFS": "\n"}
    p = subprocess.run([sys.executable, "-m", "autotune"], capture_output=True, text=True, timeout=60,
                       env=env)
    assert p.returncode == 0, p.stderr
    return [w.strip() for w in out.read_text().splitlines() if w.strip()]


def test_tab_completion_is_wired(tmp_path):
    pytest.importorskip("argcomplete")
    assert _complete("autotune tem", tmp_path) == ["templates"]
    assert set(_complete("autotune t", tmp_path)) == {"tune", "tune-model", "templates"}
    assert _complete("autotune space matm", tmp_path) == ["matmul"]
    assert "--json" in _complete("autotune best --", tmp_path)


def test_help_says_how_to_enable_completion():
    p = _run("--help")
    assert p.returncode == 0, p.stderr
    assert 'eval "$(register-python-argcomplete autotune)"' in p.stdout
