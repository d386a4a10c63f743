"""The project installs as a library: an Apache-2.0 LICENSE, one version, ``py.typed`` in every
package, and a wheel that holds every file the packages read at run time."""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import autotune
import compiler

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compiler", "search_spaces", "measure", "autotune", "db")
# sha256 of the Apache License 2.0 as published (https://www.apache.org/licenses/LICENSE-2.0.txt)
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _package_files() -> list[Path]:
    """Every file of the five packages, relative to the root, but bytecode."""
    return sorted(p.relative_to(ROOT) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def _is_package_data(path: Path, package_data: dict[str, list[str]]) -> bool:
    """Whether setuptools' ``package-data`` patterns put non-module file ``path`` into the wheel."""
    for depth in range(1, len(path.parts)):  # the file under each package that contains it
        package, rel = ".".join(path.parts[:depth]), "/".join(path.parts[depth:])
        patterns = [*package_data.get(package, []), *package_data.get("*", [])]
        if any(fnmatch.fnmatchcase(rel, pattern) for pattern in patterns):
            return True
    return False


def test_the_license_is_apache_2():
    text = (ROOT / "LICENSE").read_bytes()
    assert b"Apache License\n                           Version 2.0, January 2004" in text
    assert hashlib.sha256(text).hexdigest() == APACHE_2_SHA256, "LICENSE is not the Apache 2.0 text"
    project = _pyproject()["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]


def test_the_version_is_written_once():
    config = _pyproject()
    assert "version" not in config["project"] and "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "compiler.__version__"}
    # setuptools reads the attribute without importing the package: a literal in compiler/__init__.py
    tree = ast.parse((ROOT / "compiler" / "__init__.py").read_text())
    literals = [node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
                and isinstance(node.value, ast.Constant)]
    assert literals == [compiler.__version__]
    assert re.fullmatch(r"\d+\.\d+\.\d+", compiler.__version__)
    assert autotune.__version__ == compiler.__version__
    # no other module writes a version of its own
    writers = [str(p) for p in _package_files() if p.suffix == ".py"
               and re.search(r"^\s*__version__\s*=\s*['\"]", (ROOT / p).read_text(), re.M)]
    assert writers == ["compiler/__init__.py"]


def test_the_changelog_has_an_entry_for_this_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert headings[0] == "Unreleased"
    assert compiler.__version__ in headings


def test_every_package_is_typed_and_ships_its_data_files():
    for pkg in PACKAGES:
        assert (ROOT / pkg / "py.typed").is_file(), f"{pkg}/py.typed is missing"
    setuptools = _pyproject()["tool"]["setuptools"]
    assert setuptools.get("include-package-data", True)
    package_data = setuptools["package-data"]
    assert "py.typed" in package_data["*"]
    data_files = [p for p in _package_files() if p.suffix != ".py"]
    assert Path("db/migrations/script.py.mako") in data_files
    missing = [str(p) for p in data_files if not _is_package_data(p, package_data)]
    assert not missing, f"not in [tool.setuptools.package-data], so not in the wheel: {missing}"


def test_the_quick_start_is_part_of_the_package(capsys):
    from autotune import quickstart

    with pytest.raises(SystemExit) as exit_info:
        quickstart.main(["--help"])
    assert exit_info.value.code == 0
    assert "--size" in capsys.readouterr().out
    script = (ROOT / "scripts" / "examples" / "quickstart.py").read_text()
    assert "from autotune.quickstart import main" in script


@pytest.mark.slow
def test_the_wheel_holds_every_file_of_the_packages(tmp_path):
    # Built from a copy of what the build reads: a build/ left in the checkout could add stale files.
    src = tmp_path / "src"
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / "dist"),
                        str(src)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    wheel, = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = Parser().parsestr(zf.read(f"autotune_compiler-{compiler.__version__}.dist-info/METADATA")
                                     .decode())
    assert metadata["Version"] == compiler.__version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert f"autotune_compiler-{compiler.__version__}.dist-info/licenses/LICENSE" in names
    for pkg in PACKAGES:
        assert f"{pkg}/py.typed" in names
    for must in ("db/migrations/env.py", "db/migrations/script.py.mako", "autotune/quickstart.py",
                 "search_spaces/templates/cpu_matmul.py"):
        assert must in names
    assert any(n.startswith("db/migrations/versions/v1_") for n in names)
    missing = [str(p) for p in _package_files() if p.as_posix() not in names]
    assert not missing, f"not in the wheel: {missing}"
