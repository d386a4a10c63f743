"""Our own ``exp``, ``log``, ``tanh``, ``sigmoid`` and ``erf`` in LLVM IR, for scalars and vectors.

LLVM has no vector form of ``exp`` it can lower by itself: ``llvm.exp.v16f32`` becomes
sixteen calls of libm's ``expf``. So the code generator calls these instead -- for
vectors, where they are many times faster, and for scalars too, so that a vectorized
and a scalar schedule of the same computation give bit-identical results (and so that
LLVM's own loop vectorizer can vectorize a loop that calls them).

Each is an internal ``alwaysinline`` function per LLVM type (``__autotune_exp_v16f32``),
defined on first use; O3 inlines it into the loop. The bodies are strict IEEE code (no
fast-math flags whatever the target says), polynomials evaluated with ``llvm.fma``:

``exp``
    Cody-Waite reduction ``x = n*ln2 + r``, ``n = rint(x*log2(e))``, ``|r| <= ln2/2``;
    ``e^r`` by a polynomial (Cephes' minimax for float32, Taylor to degree 13 for float64);
    then ``e^r * 2^(n//2) * 2^(n - n//2)``, two exact scalings by powers of two built in
    the exponent bits, so that overflow gives ``inf`` and underflow rounds once into the
    subnormals and then to 0, as a correctly rounded ``exp`` would. NaN stays NaN.
``log``
    ``x = 2^e * m`` with ``m`` in ``[sqrt(1/2), sqrt(2))`` from the exponent bits
    (subnormals scaled into the normal range first); ``log(m)`` by Cephes' polynomial in
    ``m - 1`` (float32) or fdlibm's series in ``s = f/(2 + f)`` (float64); ``e*ln2`` added in
    two parts. ``log(0) = -inf``, ``log(x < 0) = NaN``, ``log(inf) = inf``.
``tanh``
    Odd: computed on ``|x|`` and given ``x``'s sign. For ``|x| < 0.625`` Cephes' polynomial
    (float32) or rational function (float64), above it ``1 - 2/(e^(2|x|) + 1)``.
``sigmoid``
    ``t = e^-|x|``, then ``1/(1 + t)`` for ``x >= 0`` and ``t/(1 + t)`` below: no overflow,
    and full relative accuracy far into the negative tail (where ``1/(1 + e^-x)`` gives 0);
    the sum and the quotient (a product by ``1/(1 + t)``) are corrected for their rounding
    errors.
``erf`` (float32 only)
    Odd: computed on ``|x|`` and given ``x``'s sign. For ``|x| < 0.875``,
    ``|x| + |x| * S(x^2)``; up to 4, ``1 - e^L(|x|)``, ``L`` fitting ``log(erfc)``; beyond, 1
    (``erfc(3.92)`` is already under half an ulp of 1). ``S`` and ``L`` are our own fits (weighted
    least squares in the Chebyshev basis, iterated towards minimax). Libm's ``erff``, one call
    per lane, ran 15x slower than ``tanh`` here, and GELU's erf form is in every BERT layer.
    Float64 ``erf`` stays a libm call.

Float32 and float64 results are within 1.5 ulp of the correctly rounded value over the
whole range (``tests/compiler/codegen/test_vector_math.py`` holds them to 2).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from llvmlite import ir

from .llvm_types import type_suffix

__all__ = ["VECTOR_MATH_OPS", "supports", "VectorMath"]

VECTOR_MATH_OPS = frozenset({"exp", "log", "tanh", "sigmoid", "erf"})
_FLOAT32_ONLY = frozenset({"erf"})
_PREFIX = "__autotune_"


def supports(op: str, t: ir.Type) -> bool:
    """Whether :class:`VectorMath` implements ``op`` on the float type ``t`` (scalar or vector)."""
    elem = t.element if isinstance(t, ir.VectorType) else t
    if op in _FLOAT32_ONLY:
        return isinstance(elem, ir.FloatType)
    return op in VECTOR_MATH_OPS and isinstance(elem, (ir.FloatType, ir.DoubleType))


class VectorMath:
    """Defines (once per module) and calls the math functions of this module."""

    def __init__(self, module: ir.Module):
        self.module = module

    def call(self, b: ir.IRBuilder, op: str, x: ir.Value) -> ir.Value:
        """``op(x)`` for a float32/float64 scalar or vector ``x`` (see :func:`supports`)."""
        return b.call(self.function(op, x.type), [x])

    def function(self, op: str, t: ir.Type) -> ir.Function:
        name = f"{_PREFIX}{op}_{type_suffix(t)}"
        existing = self.module.globals.get(name)
        if existing is not None:
            return existing
        fn = ir.Function(self.module, ir.FunctionType(t, [t]), name)
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        fn.attributes.add("nounwind")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        lanes = _Lanes(self, b, t)
        b.ret(_BODIES[op](lanes, fn.args[0]))
        return fn


class _Lanes:
    """Lane-wise arithmetic on one float type (scalar or vector) and its same-width integers."""

    def __init__(self, vm: VectorMath, b: ir.IRBuilder, t: ir.Type):
        self.vm, self.b, self.t = vm, b, t
        elem = t.element if isinstance(t, ir.VectorType) else t
        self.f64 = isinstance(elem, ir.DoubleType)
        self.bits = 64 if self.f64 else 32
        self.mant = 52 if self.f64 else 23  # explicit mantissa bits
        self.bias = 1023 if self.f64 else 127
        ielem = ir.IntType(self.bits)
        self.it = ir.VectorType(ielem, t.count) if isinstance(t, ir.VectorType) else ielem
        self.mt = ir.VectorType(ir.IntType(1), t.count) if isinstance(t, ir.VectorType) else ir.IntType(1)

    # constants
    def f(self, v: float) -> ir.Constant:
        return _splat(self.t, float(v))

    def i(self, v: int) -> ir.Constant:
        return _splat(self.it, int(v))

    # float arithmetic (strict IEEE: no fast-math flags)
    def add(self, a, c):
        return self.b.fadd(a, c)

    def sub(self, a, c):
        return self.b.fsub(a, c)

    def mul(self, a, c):
        return self.b.fmul(a, c)

    def div(self, a, c):
        return self.b.fdiv(a, c)

    def _intrinsic(self, name: str, args: list) -> ir.Value:
        full = f"llvm.{name}.{type_suffix(self.t)}"
        fn = self.vm.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.vm.module, ir.FunctionType(self.t, [self.t] * len(args)), full)
        return self.b.call(fn, args)

    def fma(self, a, c, d):
        return self._intrinsic("fma", [a, c, d])

    def rint(self, a):
        return self._intrinsic("rint", [a])

    def fabs(self, a):
        return self._intrinsic("fabs", [a])

    def copysign(self, mag, sign):
        return self._intrinsic("copysign", [mag, sign])

    def poly(self, x, coeffs: tuple) -> ir.Value:
        """``sum(c * x**k)`` by Horner's rule with FMAs; ``coeffs`` from the highest power down."""
        acc = self.f(coeffs[0])
        for c in coeffs[1:]:
            acc = self.fma(acc, x, self.f(c))
        return acc

    # comparisons and choice
    def lt(self, a, c):
        return self.b.fcmp_ordered("<", a, c)

    def gt(self, a, c):
        return self.b.fcmp_ordered(">", a, c)

    def eq(self, a, c):
        return self.b.fcmp_ordered("==", a, c)

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def select(self, cond, a, c):
        return self.b.select(cond, a, c)

    # bits
    def to_bits(self, a):
        return self.b.bitcast(a, self.it)

    def from_bits(self, n):
        return self.b.bitcast(n, self.t)

    def to_int(self, a):
        return self.b.fptosi(a, self.it)

    def to_float(self, n):
        return self.b.sitofp(n, self.t)

    def pow2(self, n):
        """``2.0**n`` for integer lanes ``n`` in the normal exponent range."""
        return self.from_bits(self.b.shl(self.b.add(n, self.i(self.bias)), self.i(self.mant)))


def _splat(t: ir.Type, v) -> ir.Constant:
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [ir.Constant(t.element, v)] * t.count)
    return ir.Constant(t, v)


# ---------------------------------------------------------------------- exp

_LN2 = math.log(2.0)
# Cephes expf: e^r = 1 + r + r^2 * P(r) on [-ln2/2, ln2/2], relative error ~1e-7.
_EXP_F32 = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
            5.0000001201e-1)
# float64: Taylor series to r^13 (truncation < 1e-17 for |r| <= ln2/2).
_EXP_F64 = tuple(1.0 / math.factorial(k) for k in range(13, 1, -1))
_LN2_HI_F32, _LN2_LO_F32 = 0.693359375, -2.12194440e-4  # ln2_hi has 9 bits: n*ln2_hi is exact
_LN2_HI_F64, _LN2_LO_F64 = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # fdlibm


def _exp(m: _Lanes, x: ir.Value) -> ir.Value:
    b = m.b
    # Beyond these e^x is 0 or inf in every case; clamping keeps n in range. NaN passes
    # through (each select keeps x when the comparison is false) and stays NaN to the end.
    lo, hi = (-746.0, 710.0) if m.f64 else (-104.0, 89.0)
    xc = m.select(m.lt(x, m.f(lo)), m.f(lo), x)
    xc = m.select(m.gt(xc, m.f(hi)), m.f(hi), xc)
    # n = rint(x / ln2) by adding 1.5 * 2^mant: the sum's low bits hold n (two's complement).
    shifter = 1.5 * 2.0 ** m.mant
    nf = m.fma(xc, m.f(1.0 / _LN2), m.f(shifter))
    n = m.sub(nf, m.f(shifter))
    ln2_hi, ln2_lo = (_LN2_HI_F64, _LN2_LO_F64) if m.f64 else (_LN2_HI_F32, _LN2_LO_F32)
    r = m.fma(n, m.f(-ln2_hi), xc)
    r = m.fma(n, m.f(-ln2_lo), r)
    p = m.poly(r, _EXP_F64 if m.f64 else _EXP_F32)
    er = m.add(m.fma(p, m.mul(r, r), r), m.f(1.0))  # e^r in [0.70, 1.42]
    # times 2^n in two steps, each by a normal power of two: e^r * 2^(n >> 1) is exact, and
    # times 2^(n - (n >> 1)) rounds once: overflow gives inf, underflow rounds gradually
    # through the subnormals to 0. (Multiplying keeps NaN NaN, whatever n's bits are then.)
    ni = b.sub(m.to_bits(nf), m.to_bits(m.f(shifter)))
    n1 = b.ashr(ni, m.i(1))
    return m.mul(m.mul(er, m.pow2(n1)), m.pow2(b.sub(ni, n1)))


# ---------------------------------------------------------------------- log

# Cephes logf: log(1+f) = f - f^2/2 + f^3 * P(f), f in [sqrt(1/2) - 1, sqrt(2) - 1].
_LOG_F32 = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
            -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
# fdlibm e_log.c: log(1+f) = 2s + s*R(s^2), s = f/(2+f); Lg7 ... Lg1.
_LOG_F64 = (1.479819860511658591e-01, 1.531383769920937332e-01, 1.818357216161805012e-01,
            2.222219843214978396e-01, 2.857142874366239149e-01, 3.999999999940941908e-01,
            6.666666666666735130e-01)


def _log(m: _Lanes, x: ir.Value) -> ir.Value:
    b = m.b
    # Subnormals: scale into the normal range first (and take the scale back out of e).
    tiny = m.lt(x, m.f(2.0 ** (-1022 if m.f64 else -126)))
    shift = 54 if m.f64 else 25
    xs = m.select(tiny, m.mul(x, m.f(2.0 ** shift)), x)
    bits = m.to_bits(xs)
    e = b.sub(b.lshr(bits, m.i(m.mant)), m.i(m.bias - 1))  # xs = 2^e * mant, mant in [0.5, 1)
    e = b.sub(e, b.select(tiny, m.i(shift), m.i(0)))
    mant_mask = (1 << m.mant) - 1
    half_bits = (m.bias - 1) << m.mant
    mant = m.from_bits(b.or_(b.and_(bits, m.i(mant_mask)), m.i(half_bits)))
    small = m.lt(mant, m.f(math.sqrt(0.5)))
    e = b.sub(e, b.select(small, m.i(1), m.i(0)))
    f = m.sub(m.select(small, m.add(mant, mant), mant), m.f(1.0))  # exact; in [-0.293, 0.414]
    k = m.to_float(e)
    if m.f64:
        s = m.div(f, m.add(f, m.f(2.0)))
        z = m.mul(s, s)
        r = m.mul(z, m.poly(z, _LOG_F64))
        hfsq = m.mul(m.mul(f, f), m.f(0.5))
        # k*ln2_hi - ((hfsq - (s*(hfsq + R) + k*ln2_lo)) - f)
        inner = m.fma(s, m.add(hfsq, r), m.mul(k, m.f(_LN2_LO_F64)))
        y = m.fma(k, m.f(_LN2_HI_F64), m.sub(f, m.sub(hfsq, inner)))
    else:
        z = m.mul(f, f)
        y = m.mul(m.mul(f, z), m.poly(f, _LOG_F32))
        y = m.fma(k, m.f(_LN2_LO_F32), y)
        y = m.fma(z, m.f(-0.5), y)
        y = m.fma(k, m.f(_LN2_HI_F32), m.add(f, y))
    y = m.select(m.eq(x, m.f(math.inf)), x, y)
    y = m.select(m.eq(x, m.f(0.0)), m.f(-math.inf), y)
    invalid = b.or_(m.lt(x, m.f(0.0)), m.isnan(x))
    return m.select(invalid, m.f(math.nan), y)


# ---------------------------------------------------------------------- tanh

# Cephes tanhf: tanh(x) = x + x^3 * P(x^2) for |x| < 0.625.
_TANH_F32 = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)
# Cephes tanh: tanh(x) = x + x^3 * P(x^2) / Q(x^2), Q monic.
_TANH_P64 = (-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3)
_TANH_Q64 = (1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3)


def _tanh(m: _Lanes, x: ir.Value) -> ir.Value:
    ax = m.fabs(x)
    z = m.mul(ax, ax)
    if m.f64:
        ratio = m.div(m.poly(z, _TANH_P64), m.poly(z, _TANH_Q64))
    else:
        ratio = m.poly(z, _TANH_F32)
    near0 = m.fma(m.mul(ax, z), ratio, ax)
    e = m.vm.call(m.b, "exp", m.add(ax, ax))
    far = m.sub(m.f(1.0), m.div(m.f(2.0), m.add(e, m.f(1.0))))  # inf -> 1; NaN stays NaN
    return m.copysign(m.select(m.lt(ax, m.f(0.625)), near0, far), x)


# ---------------------------------------------------------------------- sigmoid


def _sigmoid(m: _Lanes, x: ir.Value) -> ir.Value:
    t = m.vm.call(m.b, "exp", m.b.fneg(m.fabs(x)))  # in [0, 1]; NaN for NaN
    numerator = m.select(m.lt(x, m.f(0.0)), t, m.f(1.0))
    # numerator / (1 + t), with the rounding errors of the sum and of the quotient taken back
    # (Fast2Sum, then one Newton step on the residual): only exp's own error is left. One
    # division, for 1 / (1 + t), which both the quotient and its correction multiply by: a second
    # division cost a fifth of the whole.
    d = m.add(m.f(1.0), t)
    d_err = m.add(m.sub(m.f(1.0), d), t)  # exactly (1 + t) - d
    r = m.div(m.f(1.0), d)
    q = m.mul(numerator, r)
    residual = m.sub(m.fma(m.b.fneg(q), d, numerator), m.mul(q, d_err))
    return m.fma(residual, r, q)


# ---------------------------------------------------------------------- erf

_ERF_SPLIT = 0.875
_ERF_CLAMP = 4.0  # L is fitted up to here; erf(x) rounds to 1 in float32 from 3.92 on
# erf(x) = x + x * S(x^2) on [0, 0.875]: S fits erf(x)/x - 1, absolute error under 1e-8.
_ERF_SMALL_F32 = (-6.222390444e-4, 5.0358451056e-3, -2.6793918805e-2, 1.1282522482e-1, -3.7612556861e-1,
                  1.2837915842e-1)
# erfc(x) = e^L(x) on [0.875, 4]: L fits log(erfc(x)), absolute error under 2e-8.
_ERF_LARGE_F32 = (1.602644288e-6, -4.5357556554e-5, 5.9073963273e-4, -4.7303928312e-3, 2.6335844595e-2,
                  -1.0992570103e-1, -6.3199479932e-1, -1.1301317931, 2.9434489253e-4)


def _erf(m: _Lanes, x: ir.Value) -> ir.Value:
    ax = m.fabs(x)
    near0 = m.fma(ax, m.poly(m.mul(ax, ax), _ERF_SMALL_F32), ax)  # the leading x exact
    clamped = m.select(m.gt(ax, m.f(_ERF_CLAMP)), m.f(_ERF_CLAMP), ax)  # inf -> 1; NaN stays NaN
    far = m.sub(m.f(1.0), m.vm.call(m.b, "exp", m.poly(clamped, _ERF_LARGE_F32)))
    return m.copysign(m.select(m.lt(ax, m.f(_ERF_SPLIT)), near0, far), x)


_BODIES: dict[str, Callable[[_Lanes, ir.Value], ir.Value]] = {
    "exp": _exp, "log": _log, "tanh": _tanh, "sigmoid": _sigmoid, "erf": _erf,
}
