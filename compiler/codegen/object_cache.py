"""Compiled object code kept on disk, so that code compiled once is not compiled again.

Each entry is one file, named by the SHA-256 of everything that decides the code (the caller's
key: for the CPU backend the LLVM IR before O3, the target machine, LLVM's version and the O3
settings). Building a model again, resuming a tuning run, or a measure worker building a
config another process already built then skips LLVM, which is most of a build's time.

``COMPILER_CACHE_DIR`` names the directory (default: ``$XDG_CACHE_HOME/autotune-compiler``,
i.e. ``~/.cache/autotune-compiler``); ``COMPILER_CACHE_DIR=off`` turns the cache off. The
directory is kept under ``COMPILER_CACHE_MB`` megabytes (default 1024): past it, the entries
used longest ago are removed.

Processes share the directory safely: an entry is written under a temporary name and renamed
into place, and it carries the digest of its bytes, so a file cut short or altered is
recompiled, never loaded. A directory that cannot be written leaves the cache off for the
process, with one warning.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["cache_directory", "cached", "cache_key", "trim"]

logger = logging.getLogger(__name__)

DIRECTORY_ENV = "COMPILER_CACHE_DIR"
LIMIT_ENV = "COMPILER_CACHE_MB"
_DEFAULT_LIMIT_MB = 1024
_OFF = ("off", "0", "none", "false", "no")
_DIGEST = 32  # bytes of SHA-256 ahead of each entry's data
_TRIM_EVERY = 64  # writes of this process between two checks of the directory's size
_TEMPORARY = ".tmp-"  # the name of an entry being written starts so
_STALE_TEMPORARY_S = 3600

_state = {"writes": 0, "failed": None}


def cache_directory() -> Path | None:
    """The cache's directory, or None where ``COMPILER_CACHE_DIR`` turns it off."""
    value = os.environ.get(DIRECTORY_ENV)
    if value is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "autotune-compiler"
    if value.strip().lower() in _OFF or not value.strip():
        return None
    return Path(value).expanduser()


def cache_key(parts: Iterable[str]) -> str:
    """The key (hex SHA-256) of ``parts``, each told apart from the next however they read."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode()
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def cached(key: str, make: Callable[[], bytes]) -> bytes:
    """The bytes stored under ``key``, or ``make()``'s, stored under it for the next call."""
    directory = cache_directory()
    if directory is None or _state["failed"] == directory:
        return make()
    path = directory / key[:2] / key
    data = _read(path)
    if data is not None:
        return data
    data = make()
    _write(directory, path, data)
    return data


def _read(path: Path) -> bytes | None:
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    data = raw[_DIGEST:]
    if len(raw) < _DIGEST or hashlib.sha256(data).digest() != raw[:_DIGEST]:
        logger.debug("compile cache entry %s is damaged: compiling again", path)
        return None
    try:
        os.utime(path)  # the entries used longest ago go first when the directory is trimmed
    except OSError:
        pass
    return data


def _write(directory: Path, path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=_TEMPORARY)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(hashlib.sha256(data).digest())
                f.write(data)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError as err:
        _state["failed"] = directory
        logger.warning("compiled code is not cached: cannot write to %s (%s); set %s to another "
                       "directory, or to 'off'", directory, err, DIRECTORY_ENV)
        return
    _state["writes"] += 1
    if _state["writes"] % _TRIM_EVERY == 1:
        trim(directory)


def _limit_bytes() -> int:
    value = os.environ.get(LIMIT_ENV, "")
    try:
        megabytes = float(value) if value.strip() else _DEFAULT_LIMIT_MB
    except ValueError:
        logger.warning("%s=%r is not a number of megabytes: using %d", LIMIT_ENV, value, _DEFAULT_LIMIT_MB)
        megabytes = _DEFAULT_LIMIT_MB
    return int(megabytes * 2**20)


def trim(directory: Path, limit: int | None = None) -> None:
    """Remove ``directory``'s entries used longest ago until the rest fit in ``limit`` bytes
    (default: ``COMPILER_CACHE_MB``)."""
    limit = _limit_bytes() if limit is None else limit
    entries = []
    stale = time.time() - _STALE_TEMPORARY_S
    for path in directory.glob("??/*"):
        try:
            stat = path.stat()
        except OSError:  # removed by another process meanwhile
            continue
        # another process's entry being written, unless one killed mid-write left it long ago
        if path.name.startswith(_TEMPORARY) and stat.st_mtime > stale:
            continue
        entries.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        try:
            path.unlink()
        except OSError:
            continue
        total -= size
