"""Checking the arguments of a compiled function and packing them for the kernel.

The kernel's C signature is ``void name(void **buffers, int64_t *scalars)``
(see :class:`compiler.tir.Signature`): ``buffers`` holds the data pointers of the
buffer arguments, ``scalars`` one 8-byte slot per scalar variable. An integer or
bool variable's slot holds its value as an int64; a float variable's slot holds
the bits of an IEEE double (the kernel narrows it to the variable's dtype).

Everything is checked here, in Python, before machine code runs: a wrong call
raises :class:`RuntimeArgumentError` naming the function, the argument and the
problem, instead of crashing the interpreter.
"""

from __future__ import annotations

import ast
import ctypes
import functools
import math
import re
import struct
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes
from ..dtypes import INT32_INDEX_LIMIT
from ..errors import CompilerError, RuntimeArgumentError
from .ndarray import ALIGNMENT, NDArray, aligned_empty
from .signature import ArgSpec, Signature

__all__ = ["FunctionInfo", "ArgumentPacker", "PackedArgs", "evaluate_size_text", "UnsupportedSize"]


@dataclass
class FunctionInfo:
    """Plain-data description of one compiled function: how to call it and what it writes.

    ``written`` lists the positions (in ``signature.args``) of the buffer arguments
    that the function stores into; ``scratch_bytes`` is the size of its scratch, the heap
    intermediates its caller may place (:mod:`compiler.codegen.llvm_scratch`; 0: none).
    """

    signature: Signature
    written: list = field(default_factory=list)
    scratch_bytes: int = 0

    @property
    def name(self) -> str:
        return self.signature.name

    def to_json(self) -> dict:
        scratch = {"scratch_bytes": self.scratch_bytes} if self.scratch_bytes else {}
        return {"signature": self.signature.to_json(), "written": list(self.written), **scratch}

    @staticmethod
    def from_json(d: dict) -> FunctionInfo:
        """Read back :meth:`to_json`; malformed data raises CompilerError naming the field."""
        _expect(isinstance(d, dict) and isinstance(d.get("signature"), dict), "a function",
                "an object with a 'signature'", d)
        sig = d["signature"]
        _expect(isinstance(sig.get("name"), str) and _NAME.match(sig["name"]), "a function name",
                "an identifier", sig.get("name"))
        where = f"function {sig['name']!r}"
        _expect(isinstance(sig.get("args"), list), f"{where}: 'args'", "a list", sig.get("args"))
        _expect(isinstance(sig.get("scalar_vars"), list), f"{where}: 'scalar_vars'", "a list",
                sig.get("scalar_vars"))
        for k, a in enumerate(sig["args"]):
            _check_arg_json(f"{where}, argument {k}", a)
        for v in sig["scalar_vars"]:
            _expect(isinstance(v, list | tuple) and len(v) == 2 and isinstance(v[0], str)
                    and _is_dtype(v[1]), f"{where}: scalar variable", "[name, dtype]", v)
        written = d.get("written", [])
        buffers = [k for k, a in enumerate(sig["args"]) if a["kind"] == "buffer"]
        _expect(isinstance(written, list) and all(type(w) is int and w in buffers for w in written),
                f"{where}: 'written'", f"positions of buffer arguments {buffers}", written)
        scratch = d.get("scratch_bytes", 0)
        _expect(type(scratch) is int and scratch >= 0, f"{where}: 'scratch_bytes'", "a count of bytes",
                scratch)
        try:
            return FunctionInfo(Signature.from_json(sig), list(written), scratch)
        except (KeyError, TypeError, ValueError) as e:
            raise CompilerError(f"{where}: malformed signature ({e!r})") from None


@dataclass
class PackedArgs:
    """Kernel-ready arguments; call :meth:`finish` after the kernel to copy results back."""

    buffers: ctypes.Array
    scalars: ctypes.Array
    keep_alive: list
    copy_back: list  # [(aligned temporary, user's numpy array)]

    def finish(self) -> None:
        for tmp, dst in self.copy_back:
            np.copyto(dst, tmp)


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
_WORD = re.compile(r"\b[A-Za-z_][A-Za-z0-9_.]*")
_INT_SUFFIX = re.compile(r"\b(\d+)(?:i64|i8|i16|u8|u16|u32|u64)\b")


class ArgumentPacker:
    """Checks a call's arguments against a :class:`FunctionInfo` and packs them."""

    def __init__(self, info: FunctionInfo):
        self.info = info
        self.sig = info.signature
        self.written = set(info.written)
        self._buffer_pos = [i for i, a in enumerate(self.sig.args) if a.kind == "buffer"]
        # numpy dtypes compare much faster than their names are computed
        self._np_dtype = {i: dtypes.to_numpy(self.sig.args[i].dtype) for i in self._buffer_pos}
        self._var_dtype = {name: dtype for name, dtype in self.sig.scalar_vars}
        self._narrow = {i: names for i in self._buffer_pos if (names := self._narrow_vars(self.sig.args[i]))}
        self._buffers_type = ctypes.c_void_p * max(1, len(self._buffer_pos))
        self._scalars_type = ctypes.c_int64 * max(1, len(self.sig.scalar_vars))

    # ------------------------------------------------------------------ entry point

    def pack(self, args: tuple) -> PackedArgs:
        """Check a call's ``args`` and pack them for the compiled function."""
        arrays, bound = self.check(args)
        self._check_index_range(arrays, bound)
        return self._pack(arrays, bound)

    def check(self, args: tuple) -> tuple[dict, dict[str, tuple[int, str]]]:
        """``(arrays by position, {variable name: (value, where it was bound)})`` once the
        count, every buffer's dtype, shape and strides, the scalars, the sizes derived from
        them and the written arguments' overlaps are checked."""
        sig = self.sig
        if len(args) != len(sig.args):
            names = ", ".join(a.name for a in sig.args)
            raise RuntimeArgumentError(
                f"{sig.name}: expected {len(sig.args)} arguments ({names}), got {len(args)}")
        bound: dict[str, tuple[int, str]] = {}
        arrays: dict = {}
        deferred: list = []
        for i, (spec, value) in enumerate(zip(sig.args, args, strict=True)):
            if spec.kind == "buffer":
                arrays[i] = self._check_buffer(i, spec, value, bound, deferred)
            else:
                self._bind(bound, spec.name, self._scalar_value(i, spec, value), f"argument '{spec.name}'", i)
        for i, what, text, actual in deferred:
            self._check_derived(i, what, text, actual, bound)
        self._check_overlap(arrays)
        return arrays, bound

    # ------------------------------------------------------------------ buffers

    def _err(self, i: int, msg: str) -> RuntimeArgumentError:
        return RuntimeArgumentError(f"{self.sig.name}: argument {i} ('{self.sig.args[i].name}'): {msg}")

    def _check_buffer(self, i: int, spec: ArgSpec, value, bound: dict, deferred: list) -> np.ndarray:
        if isinstance(value, NDArray):
            if value.device.device_type != "cpu":
                raise self._err(i, f"array is on {value.device}, but this function runs on the CPU")
            arr = value.host_array
        elif isinstance(value, np.ndarray):
            arr = value
        else:
            raise self._err(i, f"expected an NDArray or numpy.ndarray, got {type(value).__name__}")
        if arr.dtype != self._np_dtype[i]:
            raise self._err(i, f"dtype {arr.dtype.name} does not match the expected {spec.dtype}")
        shape = spec.shape or []
        if arr.ndim != len(shape):
            raise self._err(i, f"expected {len(shape)} dimensions {tuple(shape)}, got {arr.ndim} {arr.shape}")
        for d, (want, got) in enumerate(zip(shape, arr.shape, strict=True)):
            self._match(i, f"dimension {d}", want, got, bound, deferred)
        if spec.strides is not None:
            self._check_strides(i, spec, arr, bound, deferred)
        elif not arr.flags.c_contiguous:
            raise self._err(i, "array is not C-contiguous; pass np.ascontiguousarray(...) "
                               "or declare the buffer with explicit strides")
        if spec.elem_offset is not None:
            self._match(i, "elem_offset", spec.elem_offset, 0, bound, deferred)
        if i in self.written and not arr.flags.writeable:
            raise self._err(i, "the function writes this argument but the array is read-only")
        return arr

    def _check_strides(self, i: int, spec: ArgSpec, arr: np.ndarray, bound: dict, deferred: list) -> None:
        if len(spec.strides) != arr.ndim:
            raise self._err(i, f"{len(spec.strides)} strides declared for {arr.ndim} dimensions")
        if not arr.flags.aligned:
            raise self._err(i, "array data is not aligned to its element size")
        for d, (want, got) in enumerate(zip(spec.strides, arr.strides, strict=True)):
            if got % arr.itemsize:
                raise self._err(i, f"stride {got} bytes of dimension {d} is not a multiple of the "
                                   "element size")
            self._match(i, f"stride {d} (in elements)", want, got // arr.itemsize, bound, deferred)

    def _match(self, i: int, what: str, want, got: int, bound: dict, deferred: list) -> None:
        if isinstance(want, int):
            if want != got:
                raise self._err(i, f"{what} is {got}, expected {want}")
        elif _NAME.match(want):
            self._bind(bound, want, got, f"{what} of argument '{self.sig.args[i].name}'", i)
        else:
            deferred.append((i, what, want, got))

    def _bind(self, bound: dict, name: str, value, where: str, i: int) -> None:
        if name in bound and bound[name][0] != value:
            raise self._err(i, f"{where} gives {name} = {value}, but {name} = {bound[name][0]} "
                               f"from {bound[name][1]}")
        bound.setdefault(name, (value, where))

    def _check_derived(self, i: int, what: str, text: str, actual: int, bound: dict) -> None:
        try:
            want = evaluate_size_text(text, {k: v for k, (v, _) in bound.items()})
        except UnsupportedSize:
            return  # an expression we cannot evaluate here is checked by nobody; the kernel trusts it
        except KeyError as e:
            raise self._err(i, f"{what} is {text}, but {e.args[0]} is not bound by any argument") from None
        if want != actual:
            raise self._err(i, f"{what} is {actual}, expected {text} = {want}")

    def _check_overlap(self, arrays: dict) -> None:
        for w in self.written:
            for j, other in arrays.items():
                if j != w and self._shares_memory(arrays[w], other):
                    raise self._err(w, f"the function writes this argument, but it shares memory with "
                                       f"argument {j} ('{self.sig.args[j].name}')")

    @staticmethod
    def _shares_memory(a, b) -> bool:
        return np.may_share_memory(a, b)

    # ------------------------------------------------------------------ index range

    def _narrow_vars(self, spec: ArgSpec) -> list[str]:
        """The integer variables narrower than 64 bits that the sizes of ``spec`` mention."""
        dims = (*(spec.shape or []), *(spec.strides or []), spec.elem_offset)
        words = set(_WORD.findall(" ".join(d for d in dims if isinstance(d, str))))
        narrow = [name for name in words if name in self._var_dtype]
        return sorted(name for name in narrow if dtypes.is_int(self._var_dtype[name])
                      and dtypes.bits(self._var_dtype[name]) < 64)

    def _check_index_range(self, arrays: dict[int, np.ndarray], bound: dict) -> None:
        """Refuse values the kernel's integer variables would truncate, and arrays too large
        for index arithmetic over int32 sizes (see :mod:`compiler.tir.indexing`): either
        would make the kernel wrap its indices, silently."""
        for name, (value, where) in bound.items():
            dtype = self._var_dtype.get(name, "")
            lo, hi = _value_range(dtype) if dtypes.is_int(dtype) else (-math.inf, math.inf)
            if not lo <= value <= hi:
                raise RuntimeArgumentError(
                    f"{self.sig.name}: {name} = {value} (from {where}) does not fit its dtype {dtype}; "
                    f"declare it with a wider dtype, e.g. te.var({name!r}, 'int64')")
        for i, names in self._narrow.items():
            arr = arrays[i]
            span = 1 + sum(abs(st) // arr.itemsize * (d - 1) for st, d in zip(arr.strides, arr.shape)) \
                if arr.size else 0
            if max(arr.size, span) >= INT32_INDEX_LIMIT:
                dts = ", ".join(f"{n} is {self._var_dtype[n]}" for n in names)
                raise self._err(i, f"{arr.size} elements (spanning {span}) are too many for the 32-bit index "
                                   f"arithmetic of its sizes ({dts}), which takes fewer than "
                                   f"2**{INT32_INDEX_LIMIT.bit_length() - 1}; declare them int64, "
                                   f"e.g. te.var({names[0]!r}, 'int64')")

    # ------------------------------------------------------------------ scalars

    def _scalar_value(self, i: int, spec: ArgSpec, value):
        dtype = spec.dtype
        if isinstance(value, NDArray | np.ndarray):
            if value.shape != ():
                raise self._err(i, f"expected a scalar of dtype {dtype}, got an array of shape {value.shape}")
            value = np.asarray(value).item()
        if isinstance(value, np.generic):
            value = value.item()
        if dtypes.is_float(dtype):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise self._err(i, f"expected a number for dtype {dtype}, got {type(value).__name__}")
            if isinstance(value, float) and not math.isfinite(value):
                return value  # inf and nan are values of every float dtype
            try:
                number = float(value)
            except OverflowError:  # an int beyond float64's range
                number = math.inf
            if abs(number) > _value_range(dtype)[1]:
                raise self._err(i, f"value {value} is out of range for {dtype}")
            return number
        if dtype == "bool":
            if value in (0, 1) and isinstance(value, int | bool):
                return int(value)
            raise self._err(i, f"expected a bool, got {value!r}")
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._err(i, f"expected an integer for dtype {dtype}, got {type(value).__name__} {value!r}")
        lo, hi = _value_range(dtype)
        if not lo <= value <= hi:
            raise self._err(i, f"value {value} is out of range for {dtype}")
        return value

    # ------------------------------------------------------------------ packing

    def _pack(self, arrays: dict[int, np.ndarray], bound: dict) -> PackedArgs:
        keep: list = []
        copy_back: list = []
        buffers = self._buffers_type()
        for k, i in enumerate(self._buffer_pos):
            arr = arrays[i]
            spec = self.sig.args[i]
            address = arr.ctypes.data  # about a microsecond each time: read once
            if spec.strides is None and address % (spec.align or ALIGNMENT):
                tmp = aligned_empty(arr.shape, arr.dtype)
                np.copyto(tmp, arr)
                if i in self.written:
                    copy_back.append((tmp, arr))
                arr, address = tmp, tmp.ctypes.data
            keep.append(arr)
            buffers[k] = address
        scalars = self._scalars_type()
        for k, (name, dtype) in enumerate(self.sig.scalar_vars):
            if name not in bound:
                raise RuntimeArgumentError(f"{self.sig.name}: cannot determine the value of '{name}' "
                                           "from the arguments")
            scalars[k] = _to_slot(bound[name][0], dtype)
        return PackedArgs(buffers, scalars, keep, copy_back)


def _expect(ok, what: str, expected: str, got) -> None:
    if not ok:
        raise CompilerError(f"{what} should be {expected}, got {got!r}")


def _is_dtype(dtype) -> bool:
    return isinstance(dtype, str) and dtype in dtypes.SUPPORTED


def _is_dim(d) -> bool:
    """A shape, stride or offset entry: an int, or the text of an expression over variables."""
    return type(d) is int or (isinstance(d, str) and bool(d.strip()))


def _check_arg_json(where: str, a) -> None:
    _expect(isinstance(a, dict) and a.get("kind") in ("buffer", "scalar"), where,
            "an object of kind 'buffer' or 'scalar'", a)
    _expect(isinstance(a.get("name"), str), f"{where}: 'name'", "a string", a.get("name"))
    _expect(_is_dtype(a.get("dtype")), f"{where}: 'dtype'", f"one of {dtypes.SUPPORTED}", a.get("dtype"))
    if a["kind"] == "scalar":
        return
    shape, strides, offset = a.get("shape"), a.get("strides"), a.get("elem_offset")
    _expect(isinstance(shape, list) and all(_is_dim(d) for d in shape)
            and all(d >= 0 for d in shape if type(d) is int), f"{where}: 'shape'",
            "a list of sizes", shape)
    _expect(strides is None or (isinstance(strides, list) and len(strides) == len(shape)
                                and all(_is_dim(d) for d in strides)),
            f"{where}: 'strides'", "null or one stride per dimension", strides)
    _expect(offset is None or _is_dim(offset), f"{where}: 'elem_offset'", "null, an int or a name", offset)
    align = a.get("align")
    _expect(align is None or (type(align) is int and align > 0 and align & (align - 1) == 0),
            f"{where}: 'align'", "null or a power of two", align)


def _to_slot(value, dtype: str) -> int:
    if dtypes.is_float(dtype):
        return struct.unpack("<q", struct.pack("<d", float(value)))[0]
    value = int(value)
    if value >= 2**63:  # uint64 values above int64's range travel as their two's complement bits
        value -= 2**64
    return value


class UnsupportedSize(Exception):
    """A size expression :func:`evaluate_size_text` cannot evaluate (its text is the message)."""


_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}


def evaluate_size_text(text: str, env: dict) -> int:
    """Evaluate a size expression printed by the IR printer (``+ - * // %``, names, ints)."""
    try:
        tree = ast.parse(_INT_SUFFIX.sub(r"\1", text), mode="eval")
    except SyntaxError:
        raise UnsupportedSize(text) from None

    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            return (min if node.func.id == "min" else max)(*(ev(a) for a in node.args))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1 \
                and dtypes.is_int(node.func.id) and node.func.id in dtypes.SUPPORTED:  # a cast: int64(n)
            value = ev(node.args[0])
            info = np.iinfo(node.func.id)
            return (value - info.min) % (info.max - info.min + 1) + info.min
        raise UnsupportedSize(text)

    try:
        return ev(tree.body)
    except ZeroDivisionError:
        raise UnsupportedSize(text) from None


@functools.cache
def _value_range(dtype: str) -> tuple[float, float]:
    """The least and greatest value of a numeric dtype (ints exactly; floats up to their largest
    finite value), looked up once per dtype rather than on every call."""
    if dtypes.is_float(dtype):
        top = float(np.finfo("float32" if dtype == "bfloat16" else dtype).max)
        return -top, top
    if dtypes.is_int(dtype):
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    return -math.inf, math.inf
