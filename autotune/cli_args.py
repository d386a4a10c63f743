"""Template arguments on the command line: ``--args 1024,1024,1024,float32``.

The text is a comma-separated list of values, matched to the template's parameters
in order (``autotune templates`` lists them):

* ``1024`` is an int, ``0.5`` a float, ``true``/``false`` a bool, ``none`` None,
  anything else a string (``float32``, ``max``);
* ``'add,mul,relu'`` (or ``"..."``) is a string that may hold commas;
* ``(1,1)`` or ``[1,1]`` is a tuple (a stride or padding pair);
* ``name=value`` sets a parameter by name (``stride=2``), as in Python.

Text that starts with ``[`` is read as a JSON list instead:
``--args '[64, 128, "add,mul,relu", "float32"]'``.

:func:`parse_args_text` turns the text into positional and keyword values;
:func:`bind_template_args` checks them against a template's signature and returns
the full argument list, raising :class:`ArgsError` with a message that names the
parameter. This module imports nothing heavy: the command line parses ``--args``
before it loads the compiler.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from autotune.errors import AutotuneError

__all__ = ["ArgsError", "parse_args_text", "parse_value", "bind_template_args", "format_args",
           "nonpositive_sizes", "signature_text"]

_KEYWORD = re.compile(r"^([A-Za-z_]\w*)=(.*)$", re.S)
_OPEN, _CLOSE = "([{", ")]}"
_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


class ArgsError(AutotuneError, ValueError):
    """``--args`` text that does not parse, or does not fit the template's parameters."""


def _split(text: str) -> list[str]:
    """``text`` split at the commas outside quotes and brackets."""
    parts, depth, quote, start = [], 0, None, 0
    for k, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth < 0:
                raise ArgsError(f"--args {text!r}: unbalanced {ch!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:k])
            start = k + 1
    if quote:
        raise ArgsError(f"--args {text!r}: unclosed quote {quote}")
    if depth:
        raise ArgsError(f"--args {text!r}: unclosed bracket")
    parts.append(text[start:])
    return parts


def parse_value(token: str) -> Any:
    """One value: int, float, bool, None, quoted string, ``(a,b)`` tuple, or a bare string."""
    t = token.strip()
    if not t:
        raise ArgsError("an empty value (two commas in a row, or a trailing comma?)")
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    if t[0] in "([":
        if t[-1] != {"(": ")", "[": "]"}[t[0]]:
            raise ArgsError(f"{t!r}: unclosed bracket")
        inner = t[1:-1].strip()
        return tuple(parse_value(p) for p in _split(inner)) if inner else ()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


def _from_json(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_from_json(v) for v in value)
    if isinstance(value, dict):
        raise ArgsError("--args as JSON is a list of values; objects are not arguments")
    return value


def parse_args_text(text: str) -> tuple[list, dict]:
    """``(positional values, keyword values)`` of an ``--args`` text (see the module doc)."""
    if not isinstance(text, str) or not text.strip():
        raise ArgsError("--args is empty; give the template's arguments, e.g. --args 1024,1024,1024,float32")
    text = text.strip()
    if text.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ArgsError(f"--args starts with '[' but is not a JSON list: {err}") from None
        if not isinstance(data, list):
            raise ArgsError("--args as JSON must be a list")
        return [_from_json(v) for v in data], {}
    positional, keywords = [], {}
    for k, part in enumerate(_split(text), 1):
        m = _KEYWORD.match(part.strip())
        try:
            if m:
                if m.group(1) in keywords:
                    raise ArgsError(f"parameter {m.group(1)!r} is given twice")
                keywords[m.group(1)] = parse_value(m.group(2))
            elif keywords:
                raise ArgsError(f"value {part.strip()!r} comes after a name=value argument")
            else:
                positional.append(parse_value(part))
        except ArgsError as err:
            raise ArgsError(f"--args value {k}: {err}") from None
    return positional, keywords


def _annotation(param: inspect.Parameter) -> type | None:
    ann = param.annotation
    if ann is inspect.Parameter.empty:
        return None
    if isinstance(ann, str):
        return _TYPES.get(ann.strip())
    return ann if ann in _TYPES.values() else None


def _type_name(value: Any) -> str:
    return {bool: "a bool", int: "an int", float: "a float", str: "a string",
            tuple: "a tuple", type(None): "none"}.get(type(value), type(value).__name__)


def _check(template: str, param: inspect.Parameter, value: Any) -> Any:
    want = _annotation(param)
    if want is None:
        return value
    ok = {int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, int | float) and not isinstance(value, bool),
          bool: isinstance(value, bool),
          str: isinstance(value, str)}[want]
    if not ok:
        article = "an" if want is int else "a"
        raise ArgsError(f"template {template!r}: parameter {param.name!r} must be {article} "
                        f"{want.__name__}, got {value!r} ({_type_name(value)})")
    return float(value) if want is float else value


def signature_text(func: Callable) -> str:
    """The parameters of a template function as the command line shows them:
    ``N:int, L:int, M:int, dtype:str='float32'``."""
    out = []
    for p in inspect.signature(func).parameters.values():
        ann = p.annotation
        text = p.name
        if ann is not inspect.Parameter.empty:
            text += f":{ann if isinstance(ann, str) else getattr(ann, '__name__', ann)}"
        if p.default is not inspect.Parameter.empty:
            text += f"={p.default!r}"
        out.append(text)
    return ", ".join(out)


def bind_template_args(template: str, func: Callable, positional: Sequence, keywords: dict) -> list:
    """Every parameter of template function ``func``, in order, defaults filled in.

    Raises :class:`ArgsError` for too many or too few values, unknown names, and
    values whose type does not match the parameter's annotation (``int``, ``float``,
    ``str``, ``bool``).
    """
    sig = inspect.signature(func)
    params = list(sig.parameters.values())
    usage = f"template {template!r} takes ({signature_text(func)})"
    if len(positional) > len(params):
        raise ArgsError(f"{usage}: {len(positional)} values given")
    for name in keywords:
        if name not in sig.parameters:
            raise ArgsError(f"{usage}: it has no parameter {name!r}")
    values = []
    for k, p in enumerate(params):
        if k < len(positional):
            if p.name in keywords:
                raise ArgsError(f"{usage}: parameter {p.name!r} is given twice")
            value = positional[k]
        elif p.name in keywords:
            value = keywords[p.name]
        elif p.default is not inspect.Parameter.empty:
            value = p.default
        else:
            raise ArgsError(f"{usage}: missing a value for parameter {p.name!r}")
        values.append(_check(template, p, value))
    return values


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, list | tuple):
        return "(" + ",".join(_format_value(v) for v in value) + ")"
    if isinstance(value, str):
        plain = value and parse_value(value) == value and not any(c in value for c in ",()[]'\"= ")
        return value if plain else "'" + value + "'"
    return repr(value)


def format_args(args: Sequence) -> str:
    """The ``--args`` text of an argument list (what :func:`parse_args_text` reads back)."""
    return ",".join(_format_value(v) for v in args)


def nonpositive_sizes(func: Callable, values: Sequence) -> list[tuple[str, Any]]:
    """``(name, value)`` of each ``int``-annotated parameter of ``func`` given a value below 1,
    in order: the likely cause when a template fails on its arguments, since such parameters of
    the registered templates are sizes (a dimension, a block, a batch)."""
    out = []
    for param, value in zip(inspect.signature(func).parameters.values(), values):
        if _annotation(param) is int and isinstance(value, int) and not isinstance(value, bool) and value < 1:
            out.append((param.name, value))
    return out
