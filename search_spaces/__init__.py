"""Search spaces: knobs, config spaces, the template registry, tasks and the templates.

A template is a plain function that defines a computation, declares its knobs and
returns a schedule with its arguments; each comes with a numpy reference. The
contents arrive with the tuner; for now the package holds its error types.
"""

from search_spaces.errors import InstantiationError, SearchSpaceError

__all__ = ["InstantiationError", "SearchSpaceError"]
