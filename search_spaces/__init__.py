"""Search spaces: knobs, config spaces, the template registry, tasks and the templates.

Modules, lowest first: :mod:`~search_spaces.space` (knobs and config spaces),
:mod:`~search_spaces.registry` (template implementations and the task cache),
:mod:`~search_spaces.task` (tasks, ``get_config``), :mod:`~search_spaces.dispatch` (which
config a template call uses), :mod:`~search_spaces.template` (``@template``, callable
templates) and :mod:`~search_spaces.templates` (the built-in ones).

A template is a plain function that defines a computation, declares its knobs and
returns a schedule with its arguments; each comes with a numpy reference. Importing
this package registers the built-in templates; each is also a module attribute::

    import search_spaces
    s, args = search_spaces.matmul(64, 64, 64, "float32", target="llvm")
    task = search_spaces.create_task("matmul", (64, 64, 64, "float32"), "llvm")
    len(task.config_space), task.flop
"""

from search_spaces import registry, templates  # noqa: F401  (templates: registers the built-ins)
from search_spaces.dispatch import ApplyConfig, DispatchContext, FallbackContext, current_context
from search_spaces.errors import InstantiationError, SearchSpaceError
from search_spaces.flops import count_flops
from search_spaces.space import (
    AnnotateEntity,
    AnnotateSpace,
    ConfigEntity,
    ConfigSpace,
    OtherOptionEntity,
    OtherOptionSpace,
    ReorderEntity,
    ReorderSpace,
    SplitEntity,
    SplitSpace,
)
from search_spaces.task import Task, create_task, workload_key
from search_spaces.template import (
    Template,
    get_config,
    get_template,
    list_templates,
    template,
    unregister_template,
)
from search_spaces.templates._epilogue import is_residual_argument

# The built-in templates (each dispatches on the target: "llvm" -> cpu, "cuda" -> cuda).
matmul = get_template("matmul")
dense = get_template("dense")
batch_matmul = get_template("batch_matmul")
conv2d_nchw = get_template("conv2d_nchw")
conv2d_nchwc = get_template("conv2d_nchwc")
conv2d_nchwc_winograd = get_template("conv2d_nchwc_winograd")
conv2d_nhwc = get_template("conv2d_nhwc")
depthwise_conv2d_nchw = get_template("depthwise_conv2d_nchw")
pool2d = get_template("pool2d")
softmax = get_template("softmax")
layer_norm = get_template("layer_norm")
elementwise = get_template("elementwise")

__all__ = [
    "InstantiationError", "SearchSpaceError",
    "ConfigSpace", "ConfigEntity", "SplitSpace", "ReorderSpace", "AnnotateSpace", "OtherOptionSpace",
    "SplitEntity", "ReorderEntity", "AnnotateEntity", "OtherOptionEntity",
    "DispatchContext", "FallbackContext", "ApplyConfig", "current_context",
    "Template", "template", "get_config", "get_template", "list_templates", "unregister_template",
    "Task", "create_task", "workload_key", "count_flops", "is_residual_argument",
    "matmul", "dense", "batch_matmul", "conv2d_nchw", "conv2d_nchwc", "conv2d_nchwc_winograd", "conv2d_nhwc",
    "depthwise_conv2d_nchw", "pool2d", "softmax", "layer_norm", "elementwise",
]


def __getattr__(name: str):
    # User templates are reachable as attributes too: search_spaces.my_template(...).
    if registry.is_registered(name):
        return get_template(name)
    raise AttributeError(f"module 'search_spaces' has no attribute {name!r}")
