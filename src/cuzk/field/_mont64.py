"""Inline numba helpers for Fr arithmetic on four 64-bit Montgomery limbs.

Every helper is ``@njit(inline="always")`` so that a kernel calling it compiles to straight-line code
with no call overhead: this is what lets a Montgomery multiplication run in ~20 ns (docs/dependencies.md §4).
Elements travel as four scalar ``uint64`` values (limb 0 least significant) rather than small arrays,
because numba keeps scalars in registers but would allocate for a temporary array.

numba turns ``uint64 op <Python int>`` into ``float64``, so every constant here is an ``np.uint64`` and
every literal in arithmetic is one of the ``U*`` names below.

The 64x64->128-bit products come from a tiny LLVM intrinsic working on ``i128``; LLVM lowers it to
``mulx``/``adc`` on x86-64.

Caveat: numba's on-disk cache (``cache=True``) is keyed on the file that defines a kernel, not on the
helpers it inlines. After editing this file, delete the ``__pycache__/*.nbi``/``*.nbc`` files of the
modules that use it (``limbs``, ``fr_vec``, ``ntt``), or they keep running the old code.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from cuzk.field.constants import FR_MONT_R, R_MODULUS

_MASK64 = (1 << 64) - 1


def _limb(x: int, i: int) -> np.uint64:
    """Limb ``i`` of ``x`` as an ``np.uint64`` (so numba sees an integer constant, never a float)."""
    return np.uint64((x >> (64 * i)) & _MASK64)


U0 = np.uint64(0)
U1 = np.uint64(1)
U63 = np.uint64(63)

# The modulus r, limb by limb.
N0, N1, N2, N3 = (_limb(R_MODULUS, i) for i in range(4))
# -r^-1 mod 2^64, the Montgomery reduction factor.
NPRIME = np.uint64((-pow(R_MODULUS, -1, 1 << 64)) & _MASK64)
# R = 2^256 mod r: the Montgomery form of 1.
ONE0, ONE1, ONE2, ONE3 = (_limb(FR_MONT_R, i) for i in range(4))
# R^2 mod r: multiplying a canonical value by it (Montgomery product) yields its Montgomery form.
_R2 = FR_MONT_R * FR_MONT_R % R_MODULUS
RR0, RR1, RR2, RR3 = (_limb(_R2, i) for i in range(4))
# r - 2, the Fermat exponent of inversion.
_RM2 = R_MODULUS - 2
RM2_0, RM2_1, RM2_2, RM2_3 = (_limb(_RM2, i) for i in range(4))

# The "no-carry" CIOS multiplication below needs the top limb of r to leave one spare bit.
assert int(N3) < (_MASK64 >> 1) - 1


@intrinsic
def mac(typingctx, a, b, c, d):  # type: ignore[no-untyped-def]
    """``(lo, hi) = a * b + c + d`` on uint64 inputs; the sum always fits in 128 bits."""
    sig = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64, types.uint64, types.uint64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        i128, i64 = ir.IntType(128), ir.IntType(64)
        a_, b_, c_, d_ = (builder.zext(x, i128) for x in args)
        p = builder.add(builder.add(builder.mul(a_, b_), c_), d_)
        lo = builder.trunc(p, i64)
        hi = builder.trunc(builder.lshr(p, ir.Constant(i128, 64)), i64)
        return context.make_tuple(builder, signature.return_type, [lo, hi])

    return sig, codegen


def _with_carry(builder, op, x, y, carry):  # type: ignore[no-untyped-def]
    """``x op y op carry`` through LLVM's overflow intrinsics, returning (result, carry_out as i64).

    Written this way (rather than in i128) the x86 backend recognises the carry chain and emits
    plain ``adc``/``sbb`` with ``cmov`` selects: about 1.6x faster add/sub mod r.
    """
    first = op(x, y)
    partial, o1 = builder.extract_value(first, 0), builder.extract_value(first, 1)
    second = op(partial, carry)
    result, o2 = builder.extract_value(second, 0), builder.extract_value(second, 1)
    return result, builder.zext(builder.or_(o1, o2), ir.IntType(64))


@intrinsic
def adc(typingctx, a, b, carry):  # type: ignore[no-untyped-def]
    """``(sum, carry_out) = a + b + carry`` with ``carry`` and ``carry_out`` in {0, 1}."""
    sig = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64, types.uint64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        out = _with_carry(builder, builder.uadd_with_overflow, *args)
        return context.make_tuple(builder, signature.return_type, list(out))

    return sig, codegen


@intrinsic
def sbb(typingctx, a, b, borrow):  # type: ignore[no-untyped-def]
    """``(diff, borrow_out) = a - b - borrow`` with ``borrow`` and ``borrow_out`` in {0, 1}."""
    sig = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64, types.uint64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        out = _with_carry(builder, builder.usub_with_overflow, *args)
        return context.make_tuple(builder, signature.return_type, list(out))

    return sig, codegen


@njit(inline="always", cache=True)
def sub_r_if_ge(t0, t1, t2, t3):  # type: ignore[no-untyped-def]
    """Reduce a value in [0, 2r) to [0, r) without a data-dependent branch."""
    d0, b = sbb(t0, N0, U0)
    d1, b = sbb(t1, N1, b)
    d2, b = sbb(t2, N2, b)
    d3, b = sbb(t3, N3, b)
    # b == 1 means t < r: keep t. The mask is all ones exactly then.
    keep = U0 - b
    drop = ~keep
    return (
        (t0 & keep) | (d0 & drop),
        (t1 & keep) | (d1 & drop),
        (t2 & keep) | (d2 & drop),
        (t3 & keep) | (d3 & drop),
    )


@njit(inline="always", cache=True)
def add_mod(a0, a1, a2, a3, b0, b1, b2, b3):  # type: ignore[no-untyped-def]
    """(a + b) mod r for a, b < r. r < 2^255, so the sum fits in four limbs before reduction."""
    s0, c = adc(a0, b0, U0)
    s1, c = adc(a1, b1, c)
    s2, c = adc(a2, b2, c)
    s3, c = adc(a3, b3, c)
    return sub_r_if_ge(s0, s1, s2, s3)


@njit(inline="always", cache=True)
def sub_mod(a0, a1, a2, a3, b0, b1, b2, b3):  # type: ignore[no-untyped-def]
    """(a - b) mod r for a, b < r: subtract, then add r back under a mask if it borrowed."""
    d0, b = sbb(a0, b0, U0)
    d1, b = sbb(a1, b1, b)
    d2, b = sbb(a2, b2, b)
    d3, b = sbb(a3, b3, b)
    m = U0 - b
    d0, c = adc(d0, N0 & m, U0)
    d1, c = adc(d1, N1 & m, c)
    d2, c = adc(d2, N2 & m, c)
    d3, c = adc(d3, N3 & m, c)
    return d0, d1, d2, d3


@njit(inline="always", cache=True)
def neg_mod(a0, a1, a2, a3):  # type: ignore[no-untyped-def]
    """(-a) mod r, mapping 0 to 0."""
    return sub_mod(U0, U0, U0, U0, a0, a1, a2, a3)


@njit(inline="always", cache=True)
def _cios_step(t0, t1, t2, t3, a0, a1, a2, a3, bi):  # type: ignore[no-untyped-def]
    """One outer iteration of "no-carry" CIOS: t = (t + a * bi + m * r) / 2^64."""
    t0, A = mac(a0, bi, t0, U0)
    m = t0 * NPRIME
    _, C = mac(m, N0, t0, U0)
    t1, A = mac(a1, bi, t1, A)
    t0, C = mac(m, N1, t1, C)
    t2, A = mac(a2, bi, t2, A)
    t1, C = mac(m, N2, t2, C)
    t3, A = mac(a3, bi, t3, A)
    t2, C = mac(m, N3, t3, C)
    t3 = C + A
    return t0, t1, t2, t3


@njit(inline="always", cache=True)
def mont_mul(a0, a1, a2, a3, b0, b1, b2, b3):  # type: ignore[no-untyped-def]
    """Montgomery product a * b * 2^-256 mod r of two values < r, result < r."""
    t0, t1, t2, t3 = _cios_step(U0, U0, U0, U0, a0, a1, a2, a3, b0)
    t0, t1, t2, t3 = _cios_step(t0, t1, t2, t3, a0, a1, a2, a3, b1)
    t0, t1, t2, t3 = _cios_step(t0, t1, t2, t3, a0, a1, a2, a3, b2)
    t0, t1, t2, t3 = _cios_step(t0, t1, t2, t3, a0, a1, a2, a3, b3)
    return sub_r_if_ge(t0, t1, t2, t3)


@njit(inline="always", cache=True)
def mont_pow(a0, a1, a2, a3, e0, e1, e2, e3):  # type: ignore[no-untyped-def]
    """a^e in Montgomery form (a in Montgomery form, e a plain 256-bit exponent given as limbs).

    Left-to-right square and multiply. Not constant time, which is fine here: exponents are public
    (r - 2, domain indices).
    """
    x0, x1, x2, x3 = ONE0, ONE1, ONE2, ONE3
    for limb_index in range(3, -1, -1):
        if limb_index == 3:
            e = e3
        elif limb_index == 2:
            e = e2
        elif limb_index == 1:
            e = e1
        else:
            e = e0
        for bit in range(63, -1, -1):
            x0, x1, x2, x3 = mont_mul(x0, x1, x2, x3, x0, x1, x2, x3)
            if (e >> np.uint64(bit)) & U1:
                x0, x1, x2, x3 = mont_mul(x0, x1, x2, x3, a0, a1, a2, a3)
    return x0, x1, x2, x3


@njit(inline="always", cache=True)
def mont_inv(a0, a1, a2, a3):  # type: ignore[no-untyped-def]
    """Inverse in Montgomery form by Fermat (a^(r-2)); 0 maps to 0."""
    return mont_pow(a0, a1, a2, a3, RM2_0, RM2_1, RM2_2, RM2_3)


@njit(inline="always", cache=True)
def is_zero(a0, a1, a2, a3):  # type: ignore[no-untyped-def]
    """True when all four limbs are zero (zero is zero in both canonical and Montgomery form)."""
    return (a0 | a1 | a2 | a3) == U0


@njit(inline="always", cache=True)
def geq_r(a0, a1, a2, a3):  # type: ignore[no-untyped-def]
    """True when the 256-bit value is >= r, i.e. not a canonical field element."""
    _, b = sbb(a0, N0, U0)
    _, b = sbb(a1, N1, b)
    _, b = sbb(a2, N2, b)
    _, b = sbb(a3, N3, b)
    return b == U0
