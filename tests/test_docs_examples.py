"""Every Python example of README.md and docs/*.md runs as written.

The convention, which the README states too:

- every block fenced as ```` ```python ```` is run; the blocks of one file run in order in one
  fresh interpreter, in an empty temporary directory, sharing one namespace (``__name__`` is
  ``"__main__"``), so a block may use what an earlier block of its file defined or wrote
  (``tuning.db``, say);
- a block that cannot run here (it needs a GPU, a cluster, a model file, or it is an excerpt
  rather than a program) is marked by an HTML comment on the line right before its fence,
  ``<!-- not run: REASON -->``; the reason is required;
- examples that tune read their trial count from ``AUTOTUNE_DOCS_TRIALS`` (this test sets it
  to 4 unless it is set already), so a long run shrinks here and keeps its size for a reader.

Each block is one test, ``FILE:LINE``; a block after a failed one of the same file is skipped.
Each file runs once per pytest run, also under pytest-xdist (the workers share the results).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TRIALS_ENV = "AUTOTUNE_DOCS_TRIALS"
DOCS_TRIALS = "4"
TIMEOUT_S = 900

FENCE = re.compile(r"^```(\S*)\s*$")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One ```` ```python ```` block: where it starts, its text, and why it is not run (if it isn't)."""

    path: Path
    line: int          # 1-based line of the opening fence
    source: str
    not_run: str | None


def parse_blocks(path: Path) -> list[Block]:
    """The Python blocks of a Markdown file, in order. A ``<!-- not run: -->`` mark with no
    reason, or one that is not right before a Python fence, is an error."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    fence_open, body, start, lang, pending = False, [], 0, "", None
    for no, text in enumerate(lines, 1):
        m = FENCE.match(text)
        if fence_open:
            if text.startswith("```") and m and not m.group(1):
                if lang == "python":
                    blocks.append(Block(path, start, "\n".join(body) + "\n", pending))
                elif pending is not None:
                    raise ValueError(f"{path.name}:{start}: 'not run' mark before a {lang or 'plain'} block")
                fence_open, pending = False, None
            else:
                body.append(text)
            continue
        if m:
            fence_open, body, start, lang = True, [], no, m.group(1)
            continue
        if pending is not None:
            raise ValueError(f"{path.name}:{no - 1}: a 'not run' mark must be right before a ```python fence")
        mark = NOT_RUN.match(text)
        if mark:
            if not mark.group(1):
                raise ValueError(f"{path.name}:{no}: a 'not run' mark needs a reason")
            pending = mark.group(1)
    if fence_open:
        raise ValueError(f"{path.name}:{start}: unclosed code fence")
    return blocks


# Runs in the fresh interpreter: each block is written to a file of its own (so that
# inspect.getsource, and the pickling of templates defined in __main__, find its text) and
# executed in one shared namespace; stops at the first failure.
RUNNER = r"""
import json, sys, traceback
spec, out = sys.argv[1], sys.argv[2]
blocks = json.load(open(spec))
ns = {"__name__": "__main__", "__builtins__": __builtins__}
results = {}
for b in blocks:
    fname = "doc_block_%d.py" % b["line"]
    with open(fname, "w") as f:
        f.write(b["source"])
    try:
        exec(compile(b["source"], fname, "exec"), ns)
        results[str(b["line"])] = None
    except BaseException:
        results[str(b["line"])] = traceback.format_exc()
        break
    finally:
        json.dump(results, open(out, "w"))
"""


@cache
def run_file(path: Path, tmp_root: str) -> dict[str, str | None]:
    """Run the runnable blocks of ``path`` in one fresh interpreter; block line -> None when it
    ran, the traceback when it failed; blocks after a failure are absent. Under pytest-xdist the
    workers share ``tmp_root``, and a lock makes the first one to ask run the file for all."""
    work = Path(tmp_root) / path.stem
    work.mkdir(parents=True, exist_ok=True)
    with open(work.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = work.with_suffix(".done.json")
        if not done.exists():
            done.write_text(json.dumps(_run_blocks(path, work)))
        return json.loads(done.read_text())


def _run_blocks(path: Path, work: Path) -> dict[str, str | None]:
    blocks = [b for b in parse_blocks(path) if b.not_run is None]
    spec, out = work / "_blocks.json", work / "_results.json"
    spec.write_text(json.dumps([{"line": b.line, "source": b.source} for b in blocks]))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault(TRIALS_ENV, DOCS_TRIALS)
    env.setdefault("MPLBACKEND", "Agg")
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(spec), str(out)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    results = json.loads(out.read_text()) if out.exists() else {}
    if not results and blocks:
        first = str(blocks[0].line)
        results[first] = f"the interpreter exited with {proc.returncode}:\n{proc.stderr[-4000:]}"
    return results


def _all_blocks() -> list[Block]:
    return [b for path in DOC_FILES for b in parse_blocks(path)]


@pytest.fixture(scope="session")
def docs_tmp(tmp_path_factory) -> str:
    """One temporary directory for the session's doc runs (a subdirectory per file), shared by
    the pytest-xdist workers of one run."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent                  # each worker's basetemp is a child of the run's
    root = base / "docs-examples"
    root.mkdir(exist_ok=True)
    return str(root)


@pytest.mark.parametrize("block", _all_blocks(), ids=lambda b: f"{b.path.name}:{b.line}")
def test_docs_example_runs(block: Block, docs_tmp: str) -> None:
    """The block runs without an exception after the blocks before it in its file."""
    if block.not_run is not None:
        pytest.skip(f"not run: {block.not_run}")
    results = run_file(block.path, docs_tmp)
    key = str(block.line)
    if key not in results:
        pytest.skip("an earlier block of this file failed")
    if results[key] is not None:
        pytest.fail(f"{block.path.name}:{block.line} failed:\n{results[key]}", pytrace=False)


def test_parse_blocks_marks_and_order(tmp_path: Path) -> None:
    """Python fences are found in order, other languages are not, and a mark applies to the
    block right after it only."""
    md = tmp_path / "x.md"
    md.write_text("text\n```python\na = 1\n```\n```bash\nls\n```\n<!-- not run: needs a GPU -->\n"
                  "```python\nimport pycuda\n```\n```python\nb = a + 1\n```\n")
    blocks = parse_blocks(md)
    assert [(b.line, b.source, b.not_run) for b in blocks] == [
        (2, "a = 1\n", None), (9, "import pycuda\n", "needs a GPU"), (12, "b = a + 1\n", None)]


@pytest.mark.parametrize("text, problem", [
    ("<!-- not run: -->\n```python\nx\n```\n", "needs a reason"),
    ("<!-- not run: why -->\n\ntext\n```python\nx\n```\n", "right before"),
    ("<!-- not run: why -->\n```bash\nls\n```\n", "before a bash block"),
    ("```python\nx\n", "unclosed"),
])
def test_parse_blocks_rejects_bad_marks(tmp_path: Path, text: str, problem: str) -> None:
    """A mark without a reason, away from its block or before a non-Python block is an error."""
    md = tmp_path / "x.md"
    md.write_text(text)
    with pytest.raises(ValueError, match=problem):
        parse_blocks(md)


def test_every_doc_file_parses() -> None:
    """The README and every guide follow the convention (marks have reasons and sit right
    before a Python block)."""
    assert any(b.not_run is None for b in _all_blocks())


def test_blocks_share_state_and_failures_are_reported(tmp_path: Path) -> None:
    """Blocks of a file see what earlier ones defined and wrote; the first failure is reported
    with its traceback, and the blocks after it are not run."""
    md = tmp_path / "x.md"
    md.write_text("```python\nopen('f.txt', 'w').write('1')\nv = 41\n```\n"
                  "```python\nassert open('f.txt').read() == '1'\nv += 1\n```\n"
                  "```python\nraise RuntimeError(f'v is {v}')\n```\n```python\npass\n```\n")
    results = run_file(md, str(tmp_path / "run"))
    assert results["1"] is None and results["5"] is None
    assert "RuntimeError: v is 42" in results["9"]
    assert "13" not in results


def test_tuning_examples_read_the_trial_count() -> None:
    """A runnable example that tunes takes its trial count from AUTOTUNE_DOCS_TRIALS, so that
    this test stays short: no literal ``trials=N`` and no ``time_budget=`` in a block that runs."""
    for b in _all_blocks():
        if b.not_run is None:
            assert not re.search(r"\btrials\s*=\s*\d|\btime_budget\s*=", b.source), (
                f"{b.path.name}:{b.line}: read the trial count from {TRIALS_ENV}")
