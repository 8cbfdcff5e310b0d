"""Vectorised limb arithmetic for decoding snarkjs files (private to `cuzk.groth16`).

snarkjs stores field elements as little-endian Montgomery limbs (Fq coordinates of points, Fr
coefficients times R^2). A proving key holds millions of them, so converting one Python int at a time
would take minutes; these numba kernels work on whole arrays instead (L = 6 limbs for Fq, 4 for Fr) and
split the rows over the available threads. The point decoders read the raw bytes of a memory-mapped
section directly (any alignment) and write the blstrs encoding in one pass, with no temporaries.

The kernels use word-by-word Montgomery multiplication (CIOS) with a 64x64->128-bit multiply-accumulate
built from an LLVM i128 intrinsic (the trick of python-deps.md Appendix A). They are generic in L, and
the helpers are left to LLVM to inline: numba-level `inline="always"` made the G2 kernel take minutes
to compile. Measured on the 2-core dev machine (under load): ~0.25 µs per G1 point and ~0.8 µs per G2
point for the conversion, ~0.8 / ~4 µs with the on-curve check; first compile ~10 s, then cached.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from cuzk.field.constants import P_MODULUS

__all__ = [
    "FQ_LIMBS",
    "decode_g1_points",
    "decode_g2_points",
    "first_not_below",
    "int_to_limbs",
    "mont_reduce",
]

FQ_LIMBS = 6
_U64 = np.uint64


@intrinsic
def _mac(typingctx, a, b, c, d):
    """(lo, hi) = a*b + c + d for uint64 inputs, via one LLVM i128 multiply (compiles to mulx)."""
    sig = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64, types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        i128, i64 = ir.IntType(128), ir.IntType(64)
        a_, b_, c_, d_ = (builder.zext(x, i128) for x in args)
        p = builder.add(builder.add(builder.mul(a_, b_), c_), d_)
        lo = builder.trunc(p, i64)
        hi = builder.trunc(builder.lshr(p, ir.Constant(i128, 64)), i64)
        return context.make_tuple(builder, signature.return_type, [lo, hi])

    return sig, codegen


def int_to_limbs(value: int, n_limbs: int) -> np.ndarray:
    """Little-endian uint64 limbs of a non-negative int (for moduli and constants)."""
    return np.frombuffer(value.to_bytes(8 * n_limbs, "little"), dtype="<u8").astype(_U64)


def _neg_inv64(modulus: int) -> np.uint64:
    """-modulus^-1 mod 2^64, the per-word Montgomery factor."""
    return _U64((-pow(modulus, -1, 1 << 64)) % (1 << 64))


@njit(cache=True)
def _geq(a, m):
    """a >= m for little-endian limb vectors of equal length."""
    for j in range(a.shape[0] - 1, -1, -1):
        if a[j] != m[j]:
            return a[j] > m[j]
    return True


@njit(cache=True)
def _sub_into(a, m, out):
    """out = a - m (mod 2^(64L)); callers ensure a >= m or rely on the wrap-around."""
    borrow = _U64(0)
    for j in range(a.shape[0]):
        d = a[j] - m[j]
        b1 = a[j] < m[j]
        d2 = d - borrow
        b2 = d < borrow
        out[j] = d2
        borrow = _U64(1) if (b1 or b2) else _U64(0)


@njit(cache=True)
def _add_mod(a, b, m, out, t):
    """out = a + b mod m for a, b < m (t: scratch of length L + 2)."""
    n = a.shape[0]
    carry = _U64(0)
    for j in range(n):
        s = a[j] + b[j]
        c1 = s < a[j]
        s2 = s + carry
        c2 = s2 < s
        t[j] = s2
        carry = _U64(1) if (c1 or c2) else _U64(0)
    if carry != 0 or _geq(t[:n], m):
        _sub_into(t[:n], m, out)
    else:
        for j in range(n):
            out[j] = t[j]


@njit(cache=True)
def _sub_mod(a, b, m, out, t):
    """out = a - b mod m for a, b < m (t: scratch of length L + 2)."""
    n = a.shape[0]
    if _geq(a, b):
        _sub_into(a, b, out)
    else:
        # a - b + m, computed as m - (b - a) to stay within L limbs.
        _sub_into(b, a, t[:n])
        _sub_into(m, t[:n], out)


@njit(cache=True)
def _mont_mul(a, b, m, nprime, out, t):
    """out = a * b * 2^(-64L) mod m (CIOS), for a, b < m; t is scratch of length L + 2."""
    n = a.shape[0]
    for k in range(n + 2):
        t[k] = 0
    for i in range(n):
        c = _U64(0)
        for j in range(n):
            t[j], c = _mac(a[j], b[i], t[j], c)
        s = t[n] + c
        t[n] = s
        t[n + 1] = _U64(1) if s < c else _U64(0)
        q = t[0] * nprime
        _, c = _mac(q, m[0], t[0], _U64(0))
        for j in range(1, n):
            t[j - 1], c = _mac(q, m[j], t[j], c)
        s = t[n] + c
        t[n - 1] = s
        t[n] = t[n + 1] + (_U64(1) if s < c else _U64(0))
    if t[n] != 0 or _geq(t[:n], m):
        _sub_into(t[:n], m, out)
    else:
        for j in range(n):
            out[j] = t[j]


@njit(cache=True)
def _redc(a, m, nprime, out, t):
    """out = a * 2^(-64L) mod m for a < m: Montgomery multiplication by 1, with the zero products skipped.

    t is scratch of length L + 1.
    """
    n = a.shape[0]
    for j in range(n):
        t[j] = a[j]
    t[n] = 0
    for _ in range(n):
        q = t[0] * nprime
        _, c = _mac(q, m[0], t[0], _U64(0))
        for j in range(1, n):
            t[j - 1], c = _mac(q, m[j], t[j], c)
        s = t[n] + c
        t[n - 1] = s
        t[n] = _U64(1) if s < c else _U64(0)
    if t[n] != 0 or _geq(t[:n], m):
        _sub_into(t[:n], m, out)
    else:
        for j in range(n):
            out[j] = t[j]


@njit(parallel=True, cache=True)
def _mont_reduce_kernel(x, m, nprime, times, out, n_chunks):
    """out[i] = x[i] * 2^(-64L*times) mod m; returns the first row with x[i] >= m, or -1."""
    n, L = x.shape
    first_bad = np.full(n_chunks, -1, dtype=np.int64)
    chunk = (n + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        t = np.empty(L + 1, dtype=np.uint64)
        acc = np.empty(L, dtype=np.uint64)
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            if _geq(x[i], m):
                if first_bad[c] < 0:
                    first_bad[c] = i
                for j in range(L):
                    out[i, j] = 0
                continue
            for j in range(L):
                acc[j] = x[i, j]
            for _ in range(times):
                _redc(acc, m, nprime, acc, t)
            for j in range(L):
                out[i, j] = acc[j]
    for c in range(n_chunks):
        if first_bad[c] >= 0:
            return first_bad[c]
    return -1


def _n_chunks(n: int) -> int:
    """Enough chunks to keep every numba thread busy, but not so many that per-chunk setup shows."""
    from numba import get_num_threads

    return max(1, min(n, 8 * get_num_threads()))


def mont_reduce(x: np.ndarray, modulus: int, times: int = 1) -> tuple[np.ndarray, int]:
    """Canonical values of Montgomery limbs: x * R^(-times) mod modulus, R = 2^(64L).

    `x` is an `(n, L)` little-endian uint64 array (any memory layout; it is not modified). Returns the
    `(n, L)` result and the index of the first row that is not below the modulus (a non-canonical
    encoding, which the caller reports as a format error), or -1. Such rows are zeroed in the result.
    """
    if x.ndim != 2:
        raise ValueError("expected an (n, L) limb array")
    n, n_limbs = x.shape
    out = np.empty((n, n_limbs), dtype=_U64)
    if n == 0:
        return out, -1
    xs = np.require(x, dtype=_U64, requirements=["C", "A"])
    bad = _mont_reduce_kernel(xs, int_to_limbs(modulus, n_limbs), _neg_inv64(modulus), times, out,
                              _n_chunks(n))
    return out, int(bad)


# --- point sections: Montgomery little-endian -> blstrs uncompressed big-endian -------------------

_FQ_M = int_to_limbs(P_MODULUS, FQ_LIMBS)
_FQ_NPRIME = _neg_inv64(P_MODULUS)
_FQ_R = 1 << (64 * FQ_LIMBS)
# b = 4 for G1 (y^2 = x^3 + 4) and b' = 4(1 + u) for G2, in Montgomery form.
_FQ_B_MONT = int_to_limbs(4 * _FQ_R % P_MODULUS, FQ_LIMBS)
_FQ_BYTES = 8 * FQ_LIMBS
_INFINITY_FLAG = 0x40


@njit(cache=True)
def _load_le(row, off, dst):
    """dst = the little-endian limbs stored in bytes row[off : off + 8L] (no alignment needed)."""
    for j in range(dst.shape[0]):
        v = _U64(0)
        for b in range(8):
            v |= _U64(row[off + 8 * j + b]) << _U64(8 * b)
        dst[j] = v


@njit(cache=True)
def _store_be(src, row, off):
    """row[off : off + 8L] = big-endian bytes of the integer with little-endian limbs src."""
    n = src.shape[0]
    for j in range(n):
        v = src[j]
        base = off + 8 * (n - 1 - j)
        for b in range(8):
            row[base + 7 - b] = np.uint8((v >> _U64(8 * b)) & _U64(0xFF))


@njit(cache=True)
def _is_zero(v):
    for j in range(v.shape[0]):  # noqa: SIM110 - numba compiles loops, not all() over generators
        if v[j] != 0:
            return False
    return True


@njit(cache=True)
def _set_infinity(row):
    for k in range(row.shape[0]):
        row[k] = 0
    row[0] = _INFINITY_FLAG


@njit(cache=True)
def _chunk_first(first_bad):
    for c in range(first_bad.shape[0]):
        if first_bad[c] >= 0:
            return first_bad[c]
    return -1


@njit(parallel=True, cache=True)
def _g1_decode_kernel(raw, out, m, nprime, b_mont, check_curve, n_chunks):
    """Rows of 96 snarkjs bytes (x, y Montgomery LE) -> 96 blstrs bytes (x, y standard BE).

    Returns the first row with a coordinate >= q or, if check_curve, not on y^2 = x^3 + 4, else -1.
    All-zero input rows are snarkjs's infinity and become the flagged blstrs infinity.
    """
    n = raw.shape[0]
    L = m.shape[0]
    first_bad = np.full(n_chunks, -1, dtype=np.int64)
    chunk = (n + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        t = np.empty(L + 2, dtype=np.uint64)
        x = np.empty(L, dtype=np.uint64)
        y = np.empty(L, dtype=np.uint64)
        lhs = np.empty(L, dtype=np.uint64)
        rhs = np.empty(L, dtype=np.uint64)
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            _load_le(raw[i], 0, x)
            _load_le(raw[i], 8 * L, y)
            if _is_zero(x) and _is_zero(y):
                _set_infinity(out[i])
                continue
            ok = not (_geq(x, m) or _geq(y, m))
            if ok and check_curve:
                _mont_mul(y, y, m, nprime, lhs, t)
                _mont_mul(x, x, m, nprime, rhs, t)
                _mont_mul(rhs, x, m, nprime, rhs, t)
                _add_mod(rhs, b_mont, m, rhs, t)
                for j in range(L):
                    if lhs[j] != rhs[j]:
                        ok = False
            if not ok:
                if first_bad[c] < 0:
                    first_bad[c] = i
                _set_infinity(out[i])
                continue
            _redc(x, m, nprime, x, t)
            _redc(y, m, nprime, y, t)
            _store_be(x, out[i], 0)
            _store_be(y, out[i], 8 * L)
    return _chunk_first(first_bad)


@njit(cache=True)
def _fp2_mul(a0, a1, b0, b1, m, nprime, o0, o1, s0, s1, t):
    """(o0 + o1 u) = (a0 + a1 u)(b0 + b1 u) with u^2 = -1; s0, s1 scratch; o may alias a (not b)."""
    _mont_mul(a0, b0, m, nprime, s0, t)
    _mont_mul(a1, b1, m, nprime, s1, t)
    _sub_mod(s0, s1, m, s0, t)  # real part, kept in s0 until the cross terms are done
    _mont_mul(a0, b1, m, nprime, s1, t)
    _mont_mul(a1, b0, m, nprime, o1, t)
    _add_mod(s1, o1, m, o1, t)
    for j in range(m.shape[0]):
        o0[j] = s0[j]


@njit(parallel=True, cache=True)
def _g2_decode_kernel(raw, out, m, nprime, b_mont, check_curve, n_chunks):
    """Rows of 192 snarkjs bytes (x.c0, x.c1, y.c0, y.c1) -> blstrs (x.c1, x.c0, y.c1, y.c0 standard BE).

    Same contract as the G1 kernel, with the curve y^2 = x^3 + 4(1 + u).
    """
    n = raw.shape[0]
    L = m.shape[0]
    first_bad = np.full(n_chunks, -1, dtype=np.int64)
    chunk = (n + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        t = np.empty(L + 2, dtype=np.uint64)
        x0 = np.empty(L, dtype=np.uint64)
        x1 = np.empty(L, dtype=np.uint64)
        y0 = np.empty(L, dtype=np.uint64)
        y1 = np.empty(L, dtype=np.uint64)
        s0 = np.empty(L, dtype=np.uint64)
        s1 = np.empty(L, dtype=np.uint64)
        l0 = np.empty(L, dtype=np.uint64)
        l1 = np.empty(L, dtype=np.uint64)
        r0 = np.empty(L, dtype=np.uint64)
        r1 = np.empty(L, dtype=np.uint64)
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            _load_le(raw[i], 0, x0)
            _load_le(raw[i], 8 * L, x1)
            _load_le(raw[i], 16 * L, y0)
            _load_le(raw[i], 24 * L, y1)
            if _is_zero(x0) and _is_zero(x1) and _is_zero(y0) and _is_zero(y1):
                _set_infinity(out[i])
                continue
            ok = not (_geq(x0, m) or _geq(x1, m) or _geq(y0, m) or _geq(y1, m))
            if ok and check_curve:
                _fp2_mul(y0, y1, y0, y1, m, nprime, l0, l1, s0, s1, t)
                _fp2_mul(x0, x1, x0, x1, m, nprime, r0, r1, s0, s1, t)
                _fp2_mul(r0, r1, x0, x1, m, nprime, r0, r1, s0, s1, t)
                _add_mod(r0, b_mont, m, r0, t)
                _add_mod(r1, b_mont, m, r1, t)
                for j in range(L):
                    if l0[j] != r0[j] or l1[j] != r1[j]:
                        ok = False
            if not ok:
                if first_bad[c] < 0:
                    first_bad[c] = i
                _set_infinity(out[i])
                continue
            for v in (x0, x1, y0, y1):
                _redc(v, m, nprime, v, t)
            _store_be(x1, out[i], 0)
            _store_be(x0, out[i], 8 * L)
            _store_be(y1, out[i], 16 * L)
            _store_be(y0, out[i], 24 * L)
    return _chunk_first(first_bad)


def decode_g1_points(raw: np.ndarray, *, check_curve: bool = True) -> tuple[np.ndarray, int]:
    """snarkjs G1 points `(n, 96)` uint8 -> blstrs uncompressed `(n, 96)` uint8, plus the first bad index.

    The input may be any uint8 view (for example straight from a memory map, at any alignment). The
    bad index (or -1) is the first point with a coordinate >= q or, with `check_curve`, off the curve;
    subgroup membership is not checked (a scalar multiplication per point would dominate load time).
    """
    if raw.ndim != 2 or raw.shape[1] != 2 * _FQ_BYTES or raw.dtype != np.uint8:
        raise ValueError("expected an (n, 96) uint8 array")
    out = np.empty(raw.shape, dtype=np.uint8)
    if raw.shape[0] == 0:
        return out, -1
    bad = _g1_decode_kernel(raw, out, _FQ_M, _FQ_NPRIME, _FQ_B_MONT, check_curve, _n_chunks(raw.shape[0]))
    return out, int(bad)


def decode_g2_points(raw: np.ndarray, *, check_curve: bool = True) -> tuple[np.ndarray, int]:
    """snarkjs G2 points `(n, 192)` uint8 -> blstrs uncompressed `(n, 192)` uint8, and the first bad index."""
    if raw.ndim != 2 or raw.shape[1] != 4 * _FQ_BYTES or raw.dtype != np.uint8:
        raise ValueError("expected an (n, 192) uint8 array")
    out = np.empty(raw.shape, dtype=np.uint8)
    if raw.shape[0] == 0:
        return out, -1
    bad = _g2_decode_kernel(raw, out, _FQ_M, _FQ_NPRIME, _FQ_B_MONT, check_curve, _n_chunks(raw.shape[0]))
    return out, int(bad)


# --- plain numpy helpers ---------------------------------------------------------------------------


def first_not_below(values: np.ndarray, modulus: int) -> int:
    """Index of the first row of little-endian `(n, L)` uint64 limbs that is >= modulus, or -1."""
    n, n_limbs = values.shape
    if n == 0:
        return -1
    m = int_to_limbs(modulus, n_limbs)
    greater = np.zeros(n, dtype=bool)
    equal = np.ones(n, dtype=bool)
    for k in range(n_limbs - 1, -1, -1):
        col = values[:, k]
        greater |= equal & (col > m[k])
        equal &= col == m[k]
    bad = np.flatnonzero(greater | equal)
    return int(bad[0]) if bad.size else -1
