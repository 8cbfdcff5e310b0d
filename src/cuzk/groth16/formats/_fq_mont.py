"""Vectorised limb arithmetic for decoding snarkjs files (private to `cuzk.groth16.formats`).

snarkjs stores Fr coefficients as little-endian Montgomery limbs times R^2. A proving key holds
millions of them, so converting one Python int at a time would take minutes; these numba kernels work
on whole arrays instead (generic in the limb count L) and split the rows over the available threads.
Point sections need no conversion: their layout is blst's affine layout, checked in place by
`cuzk.curve.encoding.find_invalid_affine_limbs`.

The kernels use word-by-word Montgomery reduction with a 64x64->128-bit multiply-accumulate built from
an LLVM i128 intrinsic (the trick of docs/dependencies.md §5). The helpers are left to LLVM to inline.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

__all__ = [
    "FQ_LIMBS",
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
