"""The front door of tuning: tuners, ``tune()``, dispatch contexts and the CLI.

The tuner arrives in later work; for now the package provides its version, its error
types and the ``autotune`` command line.
"""

from importlib import metadata as _metadata

from autotune.errors import AutotuneError

try:
    __version__ = _metadata.version("autotune-compiler")
except _metadata.PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.1.0"

__all__ = ["AutotuneError", "__version__"]
