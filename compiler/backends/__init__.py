"""Backends: one module per target kind, each a :class:`Backend` record that it registers.

``get(target)`` is the backend that builds a target; :func:`compiler.build` runs its
pipeline, then its code generator. A new backend is one module that calls
:func:`register`; see ``docs/architecture.md``.
"""

from . import cuda, llvm  # the built-in backends register themselves
from .base import Artifact, Backend, for_artifact, get, register, registered, unregister

__all__ = ["Artifact", "Backend", "register", "unregister", "get", "registered", "for_artifact", "llvm",
           "cuda"]
