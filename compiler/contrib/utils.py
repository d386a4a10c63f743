"""Small file utilities (TVM's ``tvm.contrib.utils``): :func:`tempdir`."""

from __future__ import annotations

import os
import shutil
import tempfile

__all__ = ["TempDirectory", "tempdir"]


class TempDirectory:
    """A temporary directory, removed by :meth:`remove`, at the end of a ``with`` block or when
    the object is garbage collected (as TVM's)."""

    def __init__(self, custom_path: str | None = None):
        if custom_path is not None:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir = os.path.abspath(custom_path)
        else:
            self.temp_dir = tempfile.mkdtemp(prefix="autotune_")

    def relpath(self, name: str) -> str:
        """The path of ``name`` inside this directory."""
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list[str]:
        """The names of the files in this directory."""
        return os.listdir(self.temp_dir)

    def remove(self) -> None:
        """Delete the directory and everything in it."""
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __del__(self) -> None:
        # As TVM's: the directory lives as long as the object does.
        self.remove()

    def __enter__(self) -> TempDirectory:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"TempDirectory({self.temp_dir!r})"


def tempdir(custom_path: str | None = None) -> TempDirectory:
    """A new temporary directory (or ``custom_path``, created if missing), as TVM's ``tempdir``."""
    return TempDirectory(custom_path)
