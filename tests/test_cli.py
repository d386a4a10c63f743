"""The ``autotune`` command line, run as a user runs it: in subprocesses, on a tiny task.

One module-scoped log is tuned once (matmul 16x16x16, 4 random trials); best, report,
export, import and build then read it. Error cases must print one line on stderr,
no traceback, and exit non-zero.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

import db
import measure
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


def test_help_imports_nothing_heavy():
    code = ("import sys; from autotune.cli import main; import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()): main(['--help'])\n"
            "print(sorted(m for m in ('compiler', 'search_spaces', 'measure', 'db', 'numpy', 'sqlalchemy')"
            " if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=ENV)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


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


def _first_knob() -> str:
    """The name of the first knob of the tuned task's space (a best config lists it)."""
    import autotune

    return autotune.create_task("matmul", (16, 16, 16, "float32"), "llvm").config_space.knobs[0].name


def test_tune_prints_a_summary(tuned):
    d, out = tuned
    assert (d / "tuning.db").exists()
    assert "matmul(16,16,16,float32)" in out
    assert "4 this run" in out
    assert "re-measurements of the best configs (not trials)" in out
    for word in ("best ", "GFLOPS", "speedup", "best config:", _first_knob(), "autotune build matmul"):
        assert word in out, word


def test_tune_help_says_what_a_rerun_does():
    p = _run("tune", "--help")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "A rerun (after Ctrl-C or a kill, too) makes --trials new trials on top of the log's" in text
    assert "--total" in text and "finishes the budget" in text


def test_tune_total_counts_the_log_s_trials(tuned, tmp_path):
    d, out = tuned
    assert "rerun the same command makes 4 more trials on top of these 4" in " ".join(out.split())
    shutil.copyfile(d / "tuning.db", tmp_path / "tuning.db")
    tune = ("tune", "matmul", "--args", ARGS, "--trials", "6", "--total", "--tuner", "random", "--batch-size",
            "2", "--seed", "1", "--db", "tuning.db", "--no-progress")
    p = _run(*tune, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "6 trials in all (4 in the log already)" in p.stdout
    assert "trials    2 this run (+4 earlier)" in p.stdout, p.stdout
    assert "rerun     the same command makes no trial: the log holds 6 of --trials 6" in p.stdout
    p = _run(*tune, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "trials    0 this run (+6 earlier)" in p.stdout and "re-measurements" not in p.stdout, p.stdout
    row = _run("best", "--db", "tuning.db", cwd=tmp_path).stdout.splitlines()[1]
    assert row.split()[-2] == "6", row


def test_best_prints_a_table(tuned):
    d, _ = tuned
    p = _run("best", "--db", "tuning.db", "--configs", cwd=d)
    assert p.returncode == 0, p.stderr
    header, row = p.stdout.splitlines()[:2]
    assert header.split() == ["workload", "target", "best", "ms", "GFLOPS", "trials", "errors"]
    cells = row.split()
    assert cells[0] == "matmul(16,16,16,float32)" and cells[1] == "llvm"
    assert float(cells[-4]) > 0 and float(cells[-3]) > 0
    assert int(cells[-2]) == 4 and int(cells[-1]) == 0  # --trials 4: re-measurements are no trials
    assert "runs: 1 (1 budget)" in p.stdout
    assert _first_knob() in p.stdout


def test_best_says_which_figures_older_code_measured(tuned, tmp_path):
    d, _ = tuned
    listed = _run("best", "--db", "tuning.db", "--json", cwd=d)
    assert listed.returncode == 0, listed.stderr
    (workload,) = json.loads(listed.stdout)["workloads"]
    assert workload["code_version"] == measure.code_version()
    assert "other code" not in _run("best", "--db", "tuning.db", cwd=d).stdout
    with db.open(d / "tuning.db") as log:  # its measurements, as an earlier version of the code made them
        older = [db.Record(**{**r.to_dict(), "code_version": "0.0.9+older"}) for r in log.records()]
    with db.open(tmp_path / "older.db") as log:
        log.add(older)
    p = _run("best", "--db", "older.db", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    today = measure.code_version()
    assert f"1 of these figures were measured with other code than today's ({today})" in p.stdout
    # the report says it too, and only of such a log
    for log, says in (("older.db", True), (str(d / "tuning.db"), False)):
        p = _run("report", "--db", log, "--out", "report.html", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        page = (tmp_path / "report.html").read_text()
        assert ("measured with other code than today&#x27;s" in page) == says


def test_report_html_holds_plots_and_the_table(tuned):
    d, _ = tuned
    p = _run("report", "--db", "tuning.db", "--out", "report.html", "--peak-gflops", "100", cwd=d)
    assert p.returncode == 0, p.stderr
    page = (d / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "Plotly.newPlot" in page and "Optimisation history: matmul(16,16,16,float32)" in page
    assert "peak 100 GFLOPS" in page
    assert "<table>" in page and "<th>GFLOPS</th>" in page and "matmul(16,16,16,float32)" in page


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
    import argparse

    from autotune.commands import measure_options
    from measure.ray import RayBuilder, RayRunner

    ns = argparse.Namespace(cluster="head:6379", timeout=5.0, target="llvm")
    options = measure_options(ns)  # constructing connects to nothing
    assert isinstance(options.builder, RayBuilder) and isinstance(options.runner, RayRunner)
    assert options.builder.address == options.runner.address == "head:6379"


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize("argv, code, words", [
    (["tune", "nosuch", "--args", "1,2"], 2, ["unknown template 'nosuch'", "matmul"]),
    (["space", "matmul", "--args", "16,16"], 2, ["missing a value for parameter 'M'"]),
    (["space", "matmul", "--args", "16,x,16,float32"], 2, ["parameter 'L' must be an int"]),
    (["space", "matmul", "--args", "16,16,16,float32,9"], 2, ["5 values given"]),
    (["space", "matmul", "--args", "16,16,16,flaot32"], 2, ["flaot32"]),
    (["space", "elementwise", "--args", "64,128,add,mul"], 2, ["must be quoted"]),
    (["space", "matmul", "--args", "16,(16,16"], 2, ["unclosed"]),
    (["space", "matmul", "--args", "-64,128,128,float32"], 2, ["'matmul'", "-64"]),
    (["space", "matmul", "--args=-64,128,128,float32"], 2, ["'matmul'", "-64"]),
    (["tune", "matmul", "--args", "-16,16,16,float32", "--trials", "1"], 2, ["'matmul'", "-16"]),
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


@pytest.mark.parametrize("flag, value", [
    ("--timeout", "0"), ("--timeout", "-1"), ("--timeout", "nan"), ("--timeout", "inf"),
    ("--seed", "-1"), ("--seed", str(2**32)), ("--seed", "1.5"),
    ("--trials", "-1"), ("--early-stopping", "0"), ("--batch-size", "0"),
])
def test_bad_numbers_are_rejected_before_anything_runs(tmp_path, flag, value):
    p = _run("tune", "matmul", "--args", ARGS, "--db", "t.db", flag, value, cwd=tmp_path)
    line = _one_line_error(p, 2)
    assert f"argument {flag}:" in line and repr(value) in line, line
    assert p.stdout == ""  # not even the header
    assert not (tmp_path / "t.db").exists()


@pytest.mark.parametrize("argv", [
    ["tune", "matmul", "--args", "-64,128,128,float32"],
    ["build", "matmul", "--args", "-64,128,128,float32", "-o", "k.so"],
    ["tune", "matmul", "--args", "-.5,1,1", "--seed", "7", "--timeout", "2.5"],
])
def test_values_that_start_with_a_minus_are_values(argv):
    from autotune.cli import _build_parser

    ns = _build_parser().parse_args(argv)
    assert ns.args == argv[argv.index("--args") + 1]


def test_an_unknown_cpu_stops_tune_before_any_worker(tmp_path):
    # "zen4" is a typo of "znver4": LLVM would kill the process that compiles for it.
    p = _run("tune", "matmul", "--args", "64,64,64,float32", "--target", "llvm -mcpu=zen4",
             "--trials", "2", "--db", "t.db", cwd=tmp_path)
    line = _one_line_error(p, 2)
    assert "zen4" in line, line
    assert p.stdout == ""  # the header comes before the workers start
    if (tmp_path / "t.db").exists():
        import db

        with db.open(str(tmp_path / "t.db")) as log:
            assert log.count() == 0


@pytest.mark.parametrize("error", ["TargetError", "CompilerError"])
def test_a_target_the_compiler_refuses_is_one_usage_line(tmp_path, error):
    # Whatever the compiler says about a target, on however many lines, the CLI prints one line.
    code = ("import sys, compiler.target, compiler.errors as e\n"
            "def refuse(self, spec):\n"
            f"    raise e.{error}('unknown CPU zen4 in ' + repr(spec) + ';\\nvalid: znver4, haswell')\n"
            "compiler.target.Target.__init__ = refuse\n"
            "from autotune.cli import main\n"
            "sys.exit(main(['tune', 'matmul', '--args', '16,16,16,float32', '--target', 'llvm -mcpu=zen4',"
            " '--db', 't.db']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path, env=ENV)
    line = _one_line_error(p, 2)
    assert "--target" in line and "zen4" in line and "valid: znver4" in line, line
    assert p.stdout == "" and not (tmp_path / "t.db").exists()


# ---------------------------------------------------------------------------- passwords

PASSWORD = "Zq9-not-shown"  # distinctive: any output that holds it leaks the password
UNREACHABLE = f"postgresql://alice:{PASSWORD}@127.0.0.1:1/x"


@pytest.mark.parametrize("argv", [
    ["tune", "matmul", "--args", ARGS, "--trials", "1", "--db", UNREACHABLE],
    ["best", "--db", UNREACHABLE],
    ["best", "--db", UNREACHABLE, "--debug"],
    ["best", "--db", f"postgresql://alice@127.0.0.1:1/x?password={PASSWORD}"],
    ["report", "--db", UNREACHABLE, "--out", "r.html"],
    ["export", "--db", UNREACHABLE, "-o", "log.jsonl"],
    ["import", "log.jsonl", "--db", UNREACHABLE],
    ["build", "matmul", "--args", ARGS, "--db", UNREACHABLE, "-o", "k.so"],
])
def test_an_unreachable_database_hides_its_password(tmp_path, argv):
    (tmp_path / "log.jsonl").write_text("")
    p = _run(*argv, cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    assert "cannot open tuning log" in p.stderr
    assert PASSWORD not in p.stdout + p.stderr
    assert "***" in p.stderr
    if "--debug" not in argv:
        _one_line_error(p, 1)


@pytest.fixture(scope="module")
def postgres_log():
    """The URL (password included) of a fresh schema in the test PostgreSQL database, dropped
    afterwards. Without a usable server it skips, or fails when CI=true."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    def unusable(reason: str):
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL: {reason}")
        pytest.skip(f"PostgreSQL: {reason}")

    raw = os.environ.get("AUTOTUNE_TEST_POSTGRES_URL")
    if not raw:
        unusable("AUTOTUNE_TEST_POSTGRES_URL is unset")
    url = make_url(raw)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    if not url.password:
        unusable("AUTOTUNE_TEST_POSTGRES_URL has no password to hide")
    engine = create_engine(url, connect_args={"connect_timeout": 3})
    schema = f"cli_{uuid.uuid4().hex[:12]}"
    try:
        with engine.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    except Exception as err:  # noqa: BLE001 - an unreachable server or a refused login
        engine.dispose()
        unusable(f"cannot create a schema: {type(err).__name__}: {' '.join(str(err).split())[:200]}")
    try:
        yield url.update_query_dict({"options": f"-csearch_path={schema}"})
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


def test_postgres_passwords_never_print(tuned, postgres_log):
    d, _ = tuned
    where = postgres_log.render_as_string(hide_password=False)
    clear = f"{postgres_log.username}:{postgres_log.password}@"
    hidden = f"{postgres_log.username}:***@"
    assert _run("export", "--db", "tuning.db", "-o", "pg.jsonl", cwd=d).returncode == 0
    runs = {
        "import": _run("import", "pg.jsonl", "--db", where, cwd=d),
        "tune": _run("tune", "matmul", "--args", ARGS, "--trials", "1", "--tuner", "random", "--db", where,
                     "--no-progress", cwd=d, timeout=300),
        "best": _run("best", "--db", where, "--workload", "nosuch", cwd=d),
        "export": _run("export", "--db", where, "-o", "pg2.jsonl", cwd=d),
        "build": _run("build", "matmul", "--args", ARGS, "--db", where, "-o", "pg.so", cwd=d),
        "build, no record": _run("build", "matmul", "--args", "8,8,8,float32", "--db", where, "-o", "pg.so",
                                 cwd=d),
        "report": _run("report", "--db", where, "--out", "pg.html", cwd=d),
    }
    for name, p in runs.items():
        assert p.returncode == 0, (name, p.stderr)
        assert clear not in p.stdout + p.stderr, name
        if name != "report":  # which names the log in the page it writes
            assert hidden in p.stdout, (name, p.stdout)
    page = (d / "pg.html").read_text()
    assert hidden in page and clear not in page
    hints = [line for line in runs["tune"].stdout.splitlines() if "--db" in line]
    assert len(hints) == 2 and all(hidden in line for line in hints), hints


# ---------------------------------------------------------------------------- pin, warm start, AutoTVM logs


def test_pin_writes_the_configs_best_shows(tuned):
    d, _ = tuned
    p = _run("pin", "--db", "tuning.db", "-o", "pinned.json", "--template", "matmul", "--target", "llvm",
             cwd=d)
    assert p.returncode == 0, p.stderr
    assert "pinned the chosen config of 1 workload of matmul on llvm" in p.stdout
    (entry,) = json.loads((d / "pinned.json").read_text())["entries"]
    assert (entry["template"], entry["args"], entry["target"]) == ("matmul", [16, 16, 16, "float32"], "llvm")
    best = _run("best", "--db", "tuning.db", "--configs", cwd=d).stdout
    for knob, value in entry["config"].items():
        assert f"{knob}  {value!r}" in " ".join(best.split()) or f"{knob} {value!r}" in " ".join(best.split())
    assert float(best.splitlines()[1].split()[-4]) == pytest.approx(entry["cost"] * 1e3, rel=1e-3)
    p = _run("pin", "--db", "tuning.db", "-o", "none.json", "--template", "conv2d", cwd=d)
    assert p.returncode == 0 and "no workload" in p.stdout
    assert json.loads((d / "none.json").read_text())["entries"] == []
    _one_line_error(_run("pin", "--db", "missing.db", "-o", "x.json", cwd=d), 1)


def test_tune_warm_start_measures_borrowed_configs_first(tuned, tmp_path):
    import autotune
    import db
    from autotune.transfer import warm_start_configs

    d, _ = tuned
    shutil.copyfile(d / "tuning.db", tmp_path / "tuning.db")
    task = autotune.create_task("matmul", (16, 16, 32, "float32"), "llvm")
    with db.open(tmp_path / "tuning.db") as log:
        borrowed = [c.knob_values() for c in warm_start_configs(log, task, 2)]
    assert borrowed  # the log's 16x16x16 workload lends its configs
    p = _run("tune", "matmul", "--args", "16,16,32,float32", "--trials", "3", "--tuner", "random",
             "--batch-size", "3", "--seed", "0", "--warm-start", "2", "--db", "tuning.db", "--no-progress",
             cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "3 this run" in p.stdout
    with db.open(tmp_path / "tuning.db") as log:
        trials = [r.config["knobs"] for r in log.records(task, kind=db.TRIAL)]
    assert len(trials) == 3 and all(knobs in trials for knobs in borrowed)  # measured in one batch
    assert _run("tune", "--warm-start", "-1", "matmul", "--args", ARGS, cwd=tmp_path).returncode == 2


def test_import_reads_an_autotvm_log(tuned, tmp_path):
    import autotune
    from autotune.autotvm.record import encode

    task = autotune.create_task("matmul", (16, 16, 16, "float32"), "llvm")
    lines = []
    for i, cost in ((0, 3e-6), (1, 2e-6)):
        config = task.config_space.get(i)
        result = type("R", (), dict(error_kind=None, costs=[cost], build_time=0.1, run_time=0.1,
                                    timestamp=1.7e9 + i))()
        lines.append(encode(type("I", (), dict(task=task, config=config))(), result))
    (tmp_path / "tvm.log").write_text("\n".join(lines) + "\n")
    p = _run("import", "--format", "autotvm", "tvm.log", "--db", "from_tvm.db", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "imported 2 new records from tvm.log" in p.stdout
    p = _run("import", "--format", "autotvm", "tvm.log", "--db", "from_tvm.db", cwd=tmp_path)
    assert "imported 0 new records" in p.stdout
    row = _run("best", "--db", "from_tvm.db", cwd=tmp_path).stdout.splitlines()[1]
    assert row.split()[-2] == "2" and float(row.split()[-4]) == pytest.approx(2e-3)
    p = _run("import", "--format", "tvm", "tvm.log", cwd=tmp_path)
    assert "--format" in _one_line_error(p, 2)


# ---------------------------------------------------------------------------- models


@pytest.fixture(scope="module")
def onnx_model(tmp_path_factory):
    """A small ONNX network (conv-relu, dense) in a file, and its input."""
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    # 6 filters: no whole vector on any CPU, so the network stays in NCHW and the tasks are the same
    w = rng.uniform(-0.5, 0.5, (6, 3, 3, 3)).astype("float32")
    fc = rng.uniform(-0.5, 0.5, (4, 6 * 6 * 6)).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "tiny",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, 6, 6])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(w, "w"),
                                           numpy_helper.from_array(fc, "fc")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    d = tmp_path_factory.mktemp("model")
    onnx.save(model, d / "tiny.onnx")
    return d, model


def test_tune_model_then_build_model(onnx_model):
    ort = pytest.importorskip("onnxruntime")
    d, model = onnx_model
    p = _run("tune-model", "tiny.onnx", "--shape", "x=1,3,6,6", "--trials", "2", "--tuner", "random",
             "--seed", "0", "--db", "m.db", "--no-progress", cwd=d, timeout=600)
    assert p.returncode == 0, p.stderr
    assert ("2 kernels: 2 run 2 tuning tasks, 0 have no template (default schedule); 1 reshape is a view"
            in p.stdout)
    assert "conv2d_nchw(1,3,6,6,6,3,3,1,1,1,float32,(relu))" in p.stdout
    assert "dense_pack(1,216,4," in p.stdout  # the weight packed in micro-panels at build time
    assert "4 trials in all" in p.stdout and p.stdout.count("     2 trials  budget") == 2
    assert "estimated latency" in p.stdout
    assert "deployed model: " in p.stdout and "estimated from the tuning log" in p.stdout
    # the flatten is a view of the convolution's output: every kernel of the model has a template
    assert "Inside the model: the kernels with a template " in p.stdout and "without one" not in p.stdout
    assert "the executor " in p.stdout
    assert "next: autotune build-model tiny.onnx --shape x=1,3,6,6 --db m.db -o model.so" in p.stdout
    p = _run("build-model", "tiny.onnx", "--shape", "x=1,3,6,6", "--db", "m.db", "-o", "tiny.so",
             "--measure-algorithms", cwd=d)
    assert p.returncode == 0, p.stderr
    assert "none can run both direct and by Winograd; nothing to choose" in p.stdout  # 3 input channels
    assert "2 templated ones tuned" in p.stdout
    assert "wrote tiny.so: entry run(x float32[1, 3, 6, 6]" in p.stdout
    assert "next: autotune run-model tiny.so --profile" in p.stdout
    import compiler

    lib = compiler.runtime.load_module(d / "tiny.so")
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 6, 6)).astype("float32")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})
    np.testing.assert_allclose(compiler.graph.run(lib, x)[0], want[0], rtol=1e-4, atol=1e-5)


def test_tune_model_stops_at_its_time_budget(onnx_model):
    d, _ = onnx_model
    p = _run("tune-model", "tiny.onnx", "--shape", "x=1,3,6,6", "--time-budget", "6s", "--tuner", "random",
             "--db", "budget.db", "--no-progress", "--no-deployed", cwd=d, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "Tuning 2 tasks: 6 s, scheduler gradient" in p.stdout
    assert ("candidates timed with weights evicted from the caches and the input written by the threads "
            "before each call") in p.stdout
    assert "deployed model" not in p.stdout
    # the log was timed as in the model: timing it hot now would pool figures that do not compare
    hot = _run("tune-model", "tiny.onnx", "--shape", "x=1,3,6,6", "--trials", "1", "--db", "budget.db",
               "--no-cache-flush", "--no-progress", cwd=d, timeout=600)
    error = _one_line_error(hot)
    assert "do not compare" in error and "without --no-cache-flush" in error
    assert _one_line_error(_run("tune-model", "tiny.onnx", "--time-budget", "soon", cwd=d), 2).count("90s")


@pytest.mark.slow  # tunes, times the layers inside the model, tunes again: about a minute
def test_tune_model_can_tune_the_plan_of_3x3_layers_that_ran_faster(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    # 16 channels at 16x16 after a stem of 3: the second layer can run direct or by Winograd on
    # any CPU's vectors (8 or 16 lanes)
    w1 = rng.uniform(-0.5, 0.5, (16, 3, 3, 3)).astype("float32")
    w2 = rng.uniform(-0.2, 0.2, (16, 16, 3, 3)).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                              name="two"),
             helper.make_node("Relu", ["c2"], ["y"])]
    graph = helper.make_graph(nodes, "two_layers",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(w1, "w1"),
                                           numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, tmp_path / "two.onnx")
    args = ("tune-model", "two.onnx", "--tuner", "random", "--seed", "0", "--db", "two.db", "--no-progress")
    # with no log yet there are no tuned layers to compare
    assert "tune the model once without it first" in _one_line_error(
        _run(*args, "--measure-algorithms", "--no-deployed", cwd=tmp_path), 2)
    first = _run(*args, "--trials", "1", "--no-deployed", cwd=tmp_path, timeout=600)
    assert first.returncode == 0, first.stderr
    assert "conv2d_nchwc_winograd(" in first.stdout  # the rule's plan: F(4x4) for the second layer
    # two a task: the log's earlier trials count, and a task new to the plan gets its share
    p = _run(*args, "--measure-algorithms", "--trials", "2", cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "timing each 3x3 layer direct and by Winograd inside the model..." in p.stdout
    report = p.stdout.split("timing each 3x3 layer direct and by Winograd inside the model...")[1]
    assert report.lstrip().startswith("3x3 layers: ")
    # the tasks tuned and deployed are those of the plan that the timing kept
    moved = re.search(r"  two: (\S+) in place of F\(4x4,3x3\)", report)
    kept = moved is not None and "(kept)" in report
    tasks = report.split("Tuning ")[0]
    if kept and moved.group(1) == "direct":
        assert "conv2d_nchwc_winograd(" not in tasks and "conv2d_nchwc(1,16,16,16,16,3,3," in tasks
    else:
        tile = moved.group(1)[2] if kept else "4"
        assert f"conv2d_nchwc_winograd(1,16,16,16,16,1,{tile}," in tasks
    assert "deployed model: " in p.stdout, p.stdout


@pytest.mark.parametrize("args, message", [
    (("build-model", "missing.onnx", "-o", "m.so"), "missing.onnx"),
    (("build-model", "tiny.onnx", "-o", "m.so"), "--shape x=D0,D1,D2,D3"),  # the batch is symbolic
    (("build-model", "tiny.onnx", "--shape", "x=1,3,x", "-o", "m.so"), "--shape"),
    (("build-model", "tiny.onnx", "--shape", "x=1,3,6,6", "-o", "nodir/m.so"), "no directory"),
    (("build-model", "tiny.onnx", "--shape", "x=1,3,6,6", "--db", "none.db", "-o", "m.so"), "no tuning log"),
])
def test_model_commands_refuse_bad_input_in_one_line(onnx_model, args, message):
    d, _ = onnx_model
    line = _one_line_error(_run(*args, cwd=d))
    assert message in line
    assert not (d / "m.so").exists()


@pytest.fixture(scope="module")
def model_library(onnx_model):
    """The tiny model built (default configs) into a library, and its input."""
    import autotune
    from compiler.frontend import from_onnx

    d, model = onnx_model
    autotune.build_model(from_onnx(model, shape={"x": (1, 3, 6, 6)}), "llvm").export_library(d / "run.so")
    return d, model


def _ort(model, x):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def test_run_model_runs_a_library_on_given_inputs_writes_its_outputs_and_times_it(model_library):
    d, model = model_library
    x = np.random.default_rng(5).uniform(-1, 1, (1, 3, 6, 6)).astype("float32")
    np.savez(d / "in.npz", x)  # one array under numpy's own name: a model of one input takes it
    p = _run("run-model", "run.so", "--inputs", "in.npz", "--outputs", "out.npz", "--repeat", "3",
             "--profile", cwd=d)
    assert p.returncode == 0, p.stderr
    with np.load(d / "out.npz") as out:
        assert out.files == ["y"]
        np.testing.assert_allclose(out["y"], _ort(model, x), rtol=1e-4, atol=1e-5)
    assert "entry run(x float32[1, 3, 6, 6] -> y float32[1, 4]), 2 kernel calls" in p.stdout
    assert "inputs: from in.npz" in p.stdout and "wrote out.npz" in p.stdout
    assert re.search(r"y float32\[1, 4\]: min -?[\d.]+, max -?[\d.]+, mean", p.stdout)
    assert re.search(r"latency: median [\d.]+ (us|ms) .*3 timings, each the mean of calls over 50 ms",
                     p.stdout)
    table = p.stdout.split("each kernel inside the model")[1]
    assert re.search(r"k0_conv2d_relu_0 +1 +[\d.]+ (us|ms) .*conv2d_nchw: default config", table), table
    assert re.search(r"k1_dense_pack_\d+ +1 +[\d.]+ (us|ms) .*dense_pack: default config", table), table


def test_run_model_without_inputs_runs_on_seeded_random_ones(model_library):
    d, model = model_library
    p = _run("run-model", "run.so", "--outputs", "random", "--number", "5", "--repeat", "1", cwd=d)
    assert p.returncode == 0, p.stderr
    assert "inputs: random (seed 0" in p.stdout and "each the mean of 5 calls" in p.stdout
    assert "wrote random.npz" in p.stdout  # numpy's name for the file
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 6, 6)).astype("float32")
    with np.load(d / "random.npz") as out:
        np.testing.assert_allclose(out["y"], _ort(model, x), rtol=1e-4, atol=1e-5)


def test_run_model_json_is_one_document_of_what_the_text_says(model_library):
    d, model = model_library
    p = _run("run-model", "run.so", "--json", "--profile", "--repeat", "2", cwd=d)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)  # stdout holds the document alone; the text went to stderr
    assert "latency: median" in p.stderr and doc["inputs_from"] == "random"
    want = _ort(model, np.random.default_rng(0).uniform(-1, 1, (1, 3, 6, 6)).astype("float32"))
    (y,) = doc["outputs"]
    assert (y["name"], y["shape"], y["dtype"], y["not_finite"]) == ("y", [1, 4], "float32", 0)
    assert y["min"] == pytest.approx(want.min(), rel=1e-4, abs=1e-5)
    assert y["max"] == pytest.approx(want.max(), rel=1e-4, abs=1e-5)
    latency = doc["latency"]
    assert len(latency["timings"]) == 2 and latency["min"] <= latency["median"] <= latency["max"]
    assert (latency["number"], latency["min_repeat_ms"]) == (None, 50)
    assert [k["name"] for k in doc["kernels"]] == ["k0_conv2d_relu_0", doc["kernels"][1]["name"]]
    assert sum(k["share"] for k in doc["kernels"]) == pytest.approx(1.0)


@pytest.mark.parametrize("inputs, message, code", [
    ({"x": np.ones((1, 3, 6, 6))}, "x is float64[1, 3, 6, 6]; the model takes float32[1, 3, 6, 6] (numpy's "
     "default is float64: save it as .astype('float32'))", 2),
    ({"x": np.ones((1, 3, 7, 6), "float32")}, "x is float32[1, 3, 7, 6]; the model takes float32[1, 3, 6, 6]",
     2),
    ({"a": np.ones(1, "float32"), "b": np.ones(1, "float32")}, "holds ['a', 'b']; the model takes x "
     "float32[1, 3, 6, 6] (missing: x) (not the model's: a, b)", 2),
    ("not an npz", "not an .npz file of arrays", 2),
    (None, "no file absent.npz", 1),
])
def test_run_model_refuses_inputs_that_are_not_the_model_s_in_one_line(model_library, inputs, message, code):
    d, _ = model_library
    path = d / "absent.npz"
    if isinstance(inputs, dict):
        path = d / "bad.npz"
        np.savez(path, **inputs)
    elif isinstance(inputs, str):
        path = d / "text.npz"
        path.write_text(inputs)
    p = _run("run-model", "run.so", "--inputs", path.name, "--outputs", "no.npz", cwd=d)
    assert message in _one_line_error(p, code)
    assert not (d / "no.npz").exists()


def test_run_model_refuses_what_is_not_a_model_library(model_library):
    d, _ = model_library
    assert "no model library at missing.so" in _one_line_error(_run("run-model", "missing.so", cwd=d), 1)
    line = _one_line_error(_run("run-model", "run.so", "--outputs", "nodir/out.npz", cwd=d), 1)
    assert "cannot write nodir/out.npz: no directory" in line
    import compiler
    from compiler import te

    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    compiler.build(te.create_schedule(B.op), [A, B], name="add_one").export_library(d / "kernel.so")
    line = _one_line_error(_run("run-model", "kernel.so", cwd=d), 2)
    assert "kernel.so holds kernels, not a model" in line and "build-model" in line
