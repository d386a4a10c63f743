"""The ``autotune`` command line, run as a user runs it: in subprocesses, on a tiny task.

One module-scoped log is tuned once (matmul 16x16x16, 4 random trials); best, report,
export, import and build then read it. Error cases must print one line on stderr,
no traceback, and exit non-zero.
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune import __version__
from autotune.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[1]
ARGS = "16,16,16,float32"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


def _run(*args: str, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=ENV)


def _one_line_error(p: subprocess.CompletedProcess, code: int | None = None) -> str:
    assert p.returncode != 0, p.stdout
    if code is not None:
        assert p.returncode == code, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A directory holding tuning.db with 4 trials of matmul 16x16x16, and the tune output."""
    d = tmp_path_factory.mktemp("cli")
    p = _run("tune", "matmul", "--args", ARGS, "--trials", "4", "--tuner", "random", "--batch-size", "4",
             "--seed", "0", "--db", "tuning.db", "--no-progress", cwd=d, timeout=300)
    assert p.returncode == 0, p.stderr
    return d, p.stdout


# ---------------------------------------------------------------------------- basics


def test_version():
    p = _run("--version")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"autotune {__version__}"
    assert __version__ == "0.1.0"


def test_help_describes_tool_and_subcommands():
    p = _run("--help")
    assert p.returncode == 0, p.stderr
    assert "usage: autotune" in p.stdout
    assert "tuner" in p.stdout
    for name in COMMANDS:
        assert name in p.stdout


def test_help_is_fast_and_imports_nothing_heavy():
    code = ("import sys; from autotune.cli import main; import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()): main(['--help'])\n"
            "print(sorted(m for m in ('compiler', 'search_spaces', 'measure', 'db', 'numpy', 'sqlalchemy')"
            " if m in sys.modules))")
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=ENV)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    p = _run(command, "--help")
    assert p.returncode == 0, p.stderr
    assert f"usage: autotune {command}" in p.stdout


def test_no_arguments_prints_help():
    p = _run()
    assert p.returncode == 0, p.stderr
    assert "usage: autotune" in p.stdout


def test_unknown_subcommand_is_one_line_and_exit_2():
    p = _run("frobnicate")
    assert p.stdout == ""
    assert "frobnicate" in _one_line_error(p, 2)


def test_main_returns_codes(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "autotune 0.1.0"
    assert main([]) == 0
    assert main(["nope"]) == 2


def test_console_script_installed():
    exe = shutil.which("autotune")
    assert exe is not None, "the `autotune` console script is not on PATH; run `pip install -e '.[dev]'`"
    p = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"autotune {__version__}"


# ---------------------------------------------------------------------------- templates, space


def test_templates_lists_every_template_with_targets_and_arguments():
    # The built-in templates, as a fresh process sees them (tests register templates of their own).
    code = "import search_spaces; print(' '.join(search_spaces.list_templates()))"
    builtin = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    p = _run("templates")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    for name in builtin.stdout.split():
        row = next(line for line in lines if line.split() and line.split()[0] == name)
        assert "llvm" in row
    matmul = next(line for line in lines if line.startswith("matmul "))
    assert "N:int, L:int, M:int, dtype:str='float32'" in matmul


def test_space_shows_knobs_and_size():
    import autotune

    p = _run("space", "matmul", "--args", "64,64,64,float32")
    assert p.returncode == 0, p.stderr
    space = autotune.create_task("matmul", (64, 64, 64, "float32"), "llvm").config_space
    for knob in space.knobs:
        assert any(line.split()[:1] == [knob.name] for line in p.stdout.splitlines()), knob.name
    assert f"{space.size:,} valid configs" in p.stdout


@pytest.mark.parametrize("args", [
    "64,128,'add,mul,relu',float32",
    '[64, 128, "add,mul,relu", "float32"]',
    "64,128,ops='add,mul,relu'",
])
def test_space_accepts_quoted_commas_json_and_names(args):
    p = _run("space", "elementwise", "--args", args)
    assert p.returncode == 0, p.stderr
    assert "elementwise(64,128,add,mul,relu,float32)" in p.stdout


def test_space_accepts_pairs_and_keywords():
    p = _run("space", "conv2d_nchw", "--args", "1,8,14,14,8,3,3,stride=(1,1),padding=1")
    assert p.returncode == 0, p.stderr
    assert "conv2d_nchw(1,8,14,14,8,3,3,(1,1),1,1,float32)" in p.stdout


# ---------------------------------------------------------------------------- tune and the log


def test_tune_prints_a_summary(tuned):
    d, out = tuned
    assert (d / "tuning.db").exists()
    assert "matmul(16,16,16,float32)" in out
    assert "4 this run" in out
    for word in ("best ", "GFLOPS", "speedup", "best config:", "tile_y", "autotune build matmul"):
        assert word in out, word


def test_best_prints_a_table(tuned):
    d, _ = tuned
    p = _run("best", "--db", "tuning.db", "--configs", cwd=d)
    assert p.returncode == 0, p.stderr
    header, row = p.stdout.splitlines()[:2]
    assert header.split() == ["workload", "target", "best", "ms", "GFLOPS", "trials", "errors"]
    cells = row.split()
    assert cells[0] == "matmul(16,16,16,float32)" and cells[1] == "llvm"
    assert float(cells[-4]) > 0 and float(cells[-3]) > 0
    assert int(cells[-2]) >= 4 and int(cells[-1]) == 0
    assert "tile_y" in p.stdout


def test_report_html_holds_images_and_the_table(tuned):
    d, _ = tuned
    p = _run("report", "--db", "tuning.db", "--out", "report.html", cwd=d)
    assert p.returncode == 0, p.stderr
    page = (d / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert '<img alt="tuning curve' in page and 'src="data:image/png;base64,' in page
    assert "<table>" in page and "<th>GFLOPS</th>" in page and "matmul(16,16,16,float32)" in page
    data = page.split('src="data:image/png;base64,', 1)[1].split('"', 1)[0]
    assert base64.b64decode(data).startswith(b"\x89PNG")


def test_report_png_writes_one_plot(tuned):
    d, _ = tuned
    p = _run("report", "--db", "tuning.db", "--out", "curve.png", cwd=d)
    assert p.returncode == 0, p.stderr
    assert (d / "curve.png").read_bytes().startswith(b"\x89PNG")


def test_export_then_import_round_trips(tuned):
    d, _ = tuned
    p = _run("export", "--db", "tuning.db", "-o", "log.jsonl", cwd=d)
    assert p.returncode == 0, p.stderr
    lines = (d / "log.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if '"run"' not in line[:8]]
    assert len(records) >= 4 and all(r["template"] == "matmul" for r in records)
    p = _run("import", "log.jsonl", "--db", "copy.db", cwd=d)
    assert p.returncode == 0, p.stderr
    assert f"imported {len(records)} new records" in p.stdout
    p = _run("import", "log.jsonl", "--db", "copy.db", cwd=d)
    assert "imported 0 new records" in p.stdout
    best = [_run("best", "--db", name, cwd=d).stdout for name in ("tuning.db", "copy.db")]
    assert best[0] == best[1]


def test_build_writes_a_loadable_kernel(tuned):
    d, _ = tuned
    p = _run("build", "matmul", "--args", ARGS, "--db", "tuning.db", "-o", "kernel.so", cwd=d)
    assert p.returncode == 0, p.stderr
    assert "best config of tuning.db" in p.stdout
    code = ("import sys, numpy as np, compiler\n"
            "m = compiler.runtime.load_module('kernel.so')\n"
            "a = np.random.rand(16, 16).astype('float32'); b = np.random.rand(16, 16).astype('float32')\n"
            "c = np.zeros((16, 16), 'float32'); m(a, b, c)\n"
            "np.testing.assert_allclose(c, a @ b, rtol=1e-5)\n"
            "print(sorted(x for x in ('autotune', 'db', 'search_spaces', 'measure') if x in sys.modules))")
    q = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=d,
                       env=ENV)
    assert q.returncode == 0, q.stderr
    assert q.stdout.strip() == "[]"


def test_build_without_a_record_uses_the_default_config(tmp_path):
    p = _run("build", "matmul", "--args", ARGS, "-o", "k.so", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "untuned default config" in p.stdout
    assert (tmp_path / "k.so").exists()


def test_cluster_flag_builds_ray_options():
    pytest.importorskip("measure.ray")
    import argparse

    from autotune.cli import _measure_options
    from measure.ray import RayBuilder, RayRunner

    ns = argparse.Namespace(cluster="ray://head:10001", timeout=5.0, target="llvm")
    options = _measure_options(ns)  # constructing connects to nothing
    assert isinstance(options.builder, RayBuilder) and isinstance(options.runner, RayRunner)
    assert options.builder.address == options.runner.address == "ray://head:10001"


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize("argv, code, words", [
    (["tune", "nosuch", "--args", "1,2"], 2, ["unknown template 'nosuch'", "matmul"]),
    (["space", "matmul", "--args", "16,16"], 2, ["missing a value for parameter 'M'"]),
    (["space", "matmul", "--args", "16,x,16,float32"], 2, ["parameter 'L' must be an int"]),
    (["space", "matmul", "--args", "16,16,16,float32,9"], 2, ["5 values given"]),
    (["space", "matmul", "--args", "16,16,16,flaot32"], 2, ["flaot32"]),
    (["space", "elementwise", "--args", "64,128,add,mul"], 2, ["must be quoted"]),
    (["space", "matmul", "--args", "16,(16,16"], 2, ["unclosed"]),
    (["tune", "matmul", "--args", ARGS, "--target", "tpu", "--trials", "1"], 2,
     ["unknown target kind 'tpu'"]),
    (["tune", "matmul", "--args", ARGS, "--trials", "0"], 2, ["--trials"]),
    (["tune", "matmul", "--args", ARGS, "--tuner", "magic"], 2, ["magic"]),
    (["tune", "matmul", "--args", ARGS, "--trials", "1", "--db", "postgresql://u:p@127.0.0.1:1/x"], 1,
     ["cannot open tuning log", "127.0.0.1"]),
    (["best", "--db", "postgresql://u:secret@127.0.0.1:1/x"], 1, ["cannot open tuning log"]),
    (["best", "--db", "missing.db"], 1, ["no tuning log at missing.db"]),
    (["report", "--db", "missing.db", "--out", "r.txt"], 2, [".html"]),
    (["import", "missing.jsonl", "--db", "x.db"], 1, ["missing.jsonl"]),
    (["build", "matmul", "--args", ARGS, "-o", "no/such/dir/k.so"], 1, ["no/such/dir"]),
])
def test_user_errors_are_one_line(tmp_path, argv, code, words):
    p = _run(*argv, cwd=tmp_path)
    line = _one_line_error(p, code)
    for w in words:
        assert w in line, line
    assert "secret" not in line


def test_bad_jsonl_import_names_the_line(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"template": "matmul"}\n')
    line = _one_line_error(_run("import", "bad.jsonl", "--db", "x.db", cwd=tmp_path), 1)
    assert "bad.jsonl:1" in line


# ---------------------------------------------------------------------------- dependencies and errors


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("db", ("compiler", "search_spaces", "measure", "autotune")),
        ("compiler", ("search_spaces", "measure", "autotune", "db")),
    ],
)
def test_dependencies_point_one_way(package, forbidden):
    # compiler <- search_spaces <- measure <- autotune, and db <- autotune.
    code = f"import sys, {package}; print(sorted(m for m in {forbidden!r} if m in sys.modules))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "module, names",
    [
        ("search_spaces.errors", ["SearchSpaceError", "InstantiationError"]),
        ("measure.errors", ["MeasureError"]),
        ("db.errors", ["TuningLogError"]),
        ("autotune.errors", ["AutotuneError"]),
    ],
)
def test_error_types(module, names):
    import importlib

    mod = importlib.import_module(module)
    for name in names:
        cls = getattr(mod, name)
        assert issubclass(cls, Exception) and name in mod.__all__


# ---------------------------------------------------------------------------- the quick start


@pytest.mark.slow
def test_quickstart_runs_to_the_end_in_three_minutes(tmp_path):
    start = time.perf_counter()
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "quickstart.py")], capture_output=True,
                       text=True, timeout=180, cwd=tmp_path, env=ENV)
    assert p.returncode == 0, p.stderr[-2000:]
    assert time.perf_counter() - start < 180
    assert "results match numpy" in p.stdout
    assert "over the default config" in p.stdout and "over numpy" in p.stdout
    assert (tmp_path / "tuning.db").exists()
