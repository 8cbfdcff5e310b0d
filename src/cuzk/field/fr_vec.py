"""Vectorised Fr arithmetic on (n, 4) uint64 arrays in Montgomery form, compiled with numba.

Why Montgomery form: a Montgomery product needs no division by r, so a field multiplication is 32
64x64-bit products and a few adds (~20 ns per element and thread, docs/dependencies.md §4). Arrays enter
Montgomery form once (:func:`to_montgomery`), all arithmetic stays there, and they leave it once
(:func:`from_montgomery`) before serialisation or MSM.

Conventions: functions return new arrays and never modify their arguments, except those whose name
ends in ``_inplace``. Scalars passed as ``int`` are canonical values (reduced mod r here); functions
returning ``int`` return canonical values. Kernels are parallel over rows with ``prange``; order of
additions never matters since field arithmetic is exact.

To keep the number of compiled kernels small, all elementwise operations share one kernel that
supports broadcasting either operand from a single row (stride 0).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from cuzk.field import _mont64 as m
from cuzk.field.constants import FR_LIMBS, FR_MONT_R, R_MODULUS
from cuzk.field.limbs import as_limb_array, int_to_limbs, limbs_to_int

__all__ = [
    "add",
    "add_inplace",
    "add_scalar",
    "batch_inverse",
    "from_montgomery",
    "inner_product",
    "mont",
    "mul",
    "mul_inplace",
    "mul_powers_inplace",
    "mul_scalar",
    "mul_scalar_inplace",
    "neg",
    "powers",
    "spmv",
    "square",
    "sub",
    "sum_all",
    "to_montgomery",
    "unmont",
]

_R_INV = pow(FR_MONT_R, -1, R_MODULUS)

# Operation codes of the shared elementwise kernel.
_OP_MUL = 0
_OP_ADD = 1
_OP_SUB = 2


# ----------------------------------------------------------------------------------------------------
# Scalar helpers (plain Python: they run once per call, not per element)


def mont(x: int) -> np.ndarray:
    """The Montgomery form of ``x`` (reduced mod r) as a (4,) uint64 array."""
    return int_to_limbs(x % R_MODULUS * FR_MONT_R % R_MODULUS)


def unmont(row: np.ndarray) -> int:
    """The canonical int of one Montgomery row."""
    return limbs_to_int(row) * _R_INV % R_MODULUS


def _row(x: int) -> np.ndarray:
    """Montgomery form of ``x`` as a (1, 4) array, ready to be broadcast by the elementwise kernel."""
    return mont(x).reshape(1, FR_LIMBS)


def _n_chunks(n: int, min_chunk: int = 1024) -> int:
    """How many independent chunks to split ``n`` rows into: one per thread, none below ``min_chunk``.

    Chunked kernels (batch inverse, powers, reductions) pay a fixed cost per chunk (an inversion or an
    exponentiation), so tiny inputs stay in one chunk.
    """
    return max(1, min(numba.get_num_threads(), n // min_chunk))


# ----------------------------------------------------------------------------------------------------
# Kernels


@njit(parallel=True, cache=True)
def _elementwise(op: int, a: np.ndarray, sa: int, b: np.ndarray, sb: int, out: np.ndarray) -> None:
    """out[i] = a[i*sa] (op) b[i*sb]; a stride of 0 broadcasts that operand's single row."""
    for i in prange(out.shape[0]):
        ia = i * sa
        ib = i * sb
        a0, a1, a2, a3 = a[ia, 0], a[ia, 1], a[ia, 2], a[ia, 3]
        b0, b1, b2, b3 = b[ib, 0], b[ib, 1], b[ib, 2], b[ib, 3]
        if op == 0:
            r0, r1, r2, r3 = m.mont_mul(a0, a1, a2, a3, b0, b1, b2, b3)
        elif op == 1:
            r0, r1, r2, r3 = m.add_mod(a0, a1, a2, a3, b0, b1, b2, b3)
        else:
            r0, r1, r2, r3 = m.sub_mod(a0, a1, a2, a3, b0, b1, b2, b3)
        out[i, 0] = r0
        out[i, 1] = r1
        out[i, 2] = r2
        out[i, 3] = r3


@njit(parallel=True, cache=True)
def _batch_inverse(a: np.ndarray, out: np.ndarray, n_chunks: int) -> None:
    """Montgomery's trick per chunk: one Fermat inversion per chunk, 3 products per element.

    First pass stores in out[i] the product of the non-zero a[j] before i (within the chunk); the
    backward pass peels them off the inverted total. Zeros are skipped and map to zero.
    """
    n = a.shape[0]
    for c in prange(n_chunks):
        lo = c * n // n_chunks
        hi = (c + 1) * n // n_chunks
        p0, p1, p2, p3 = m.ONE0, m.ONE1, m.ONE2, m.ONE3
        for i in range(lo, hi):
            out[i, 0] = p0
            out[i, 1] = p1
            out[i, 2] = p2
            out[i, 3] = p3
            if not m.is_zero(a[i, 0], a[i, 1], a[i, 2], a[i, 3]):
                p0, p1, p2, p3 = m.mont_mul(p0, p1, p2, p3, a[i, 0], a[i, 1], a[i, 2], a[i, 3])
        v0, v1, v2, v3 = m.mont_inv(p0, p1, p2, p3)
        for i in range(hi - 1, lo - 1, -1):
            a0, a1, a2, a3 = a[i, 0], a[i, 1], a[i, 2], a[i, 3]
            if m.is_zero(a0, a1, a2, a3):
                r0, r1, r2, r3 = m.U0, m.U0, m.U0, m.U0
            else:
                r0, r1, r2, r3 = m.mont_mul(v0, v1, v2, v3, out[i, 0], out[i, 1], out[i, 2], out[i, 3])
                v0, v1, v2, v3 = m.mont_mul(v0, v1, v2, v3, a0, a1, a2, a3)
            out[i, 0] = r0
            out[i, 1] = r1
            out[i, 2] = r2
            out[i, 3] = r3


@njit(parallel=True, cache=True)
def _geometric(out: np.ndarray, c: np.ndarray, x: np.ndarray, n_chunks: int, multiply: bool) -> None:
    """out[i] = c * x^i, or out[i] *= c * x^i when ``multiply``; c, x are Montgomery (4,) rows.

    Each chunk starts from c * x^lo (one exponentiation) so the chunks are independent.
    """
    n = out.shape[0]
    x0, x1, x2, x3 = x[0], x[1], x[2], x[3]
    for k in prange(n_chunks):
        lo = k * n // n_chunks
        hi = (k + 1) * n // n_chunks
        s0, s1, s2, s3 = m.mont_pow(x0, x1, x2, x3, np.uint64(lo), m.U0, m.U0, m.U0)
        s0, s1, s2, s3 = m.mont_mul(s0, s1, s2, s3, c[0], c[1], c[2], c[3])
        for i in range(lo, hi):
            if multiply:
                r0, r1, r2, r3 = m.mont_mul(out[i, 0], out[i, 1], out[i, 2], out[i, 3], s0, s1, s2, s3)
            else:
                r0, r1, r2, r3 = s0, s1, s2, s3
            out[i, 0] = r0
            out[i, 1] = r1
            out[i, 2] = r2
            out[i, 3] = r3
            s0, s1, s2, s3 = m.mont_mul(s0, s1, s2, s3, x0, x1, x2, x3)


@njit(parallel=True, cache=True)
def _chunk_sums(a: np.ndarray, b: np.ndarray, use_b: bool, partial: np.ndarray) -> None:
    """partial[k] = sum over chunk k of a[i] * b[i] (or of a[i] when not ``use_b``), Montgomery form."""
    n = a.shape[0]
    n_chunks = partial.shape[0]
    for k in prange(n_chunks):
        lo = k * n // n_chunks
        hi = (k + 1) * n // n_chunks
        s0, s1, s2, s3 = m.U0, m.U0, m.U0, m.U0
        for i in range(lo, hi):
            t0, t1, t2, t3 = a[i, 0], a[i, 1], a[i, 2], a[i, 3]
            if use_b:
                t0, t1, t2, t3 = m.mont_mul(t0, t1, t2, t3, b[i, 0], b[i, 1], b[i, 2], b[i, 3])
            s0, s1, s2, s3 = m.add_mod(s0, s1, s2, s3, t0, t1, t2, t3)
        partial[k, 0] = s0
        partial[k, 1] = s1
        partial[k, 2] = s2
        partial[k, 3] = s3


@njit(parallel=True, cache=True)
def _spmv(row_ptr: np.ndarray, col_idx: np.ndarray, coeffs: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """y[row] = sum of coeff * x[col] over the row's entries; rows are independent."""
    for r in prange(row_ptr.shape[0] - 1):
        s0, s1, s2, s3 = m.U0, m.U0, m.U0, m.U0
        for k in range(row_ptr[r], row_ptr[r + 1]):
            col = col_idx[k]
            c0, c1, c2, c3 = coeffs[k, 0], coeffs[k, 1], coeffs[k, 2], coeffs[k, 3]
            t0, t1, t2, t3 = m.mont_mul(c0, c1, c2, c3, x[col, 0], x[col, 1], x[col, 2], x[col, 3])
            s0, s1, s2, s3 = m.add_mod(s0, s1, s2, s3, t0, t1, t2, t3)
        y[r, 0] = s0
        y[r, 1] = s1
        y[r, 2] = s2
        y[r, 3] = s3


# ----------------------------------------------------------------------------------------------------
# Elementwise API


def _binary(op: int, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Run the elementwise kernel; a (1, 4) operand is broadcast against the other's length."""
    lengths = {a.shape[0], b.shape[0]} - {1}
    if len(lengths) > 1:
        raise ValueError(f"length mismatch: a has {a.shape[0]} rows, b has {b.shape[0]}")
    n = lengths.pop() if lengths else 1
    if out is None:
        out = np.empty((n, FR_LIMBS), dtype=np.uint64)
    _elementwise(op, a, int(a.shape[0] != 1), b, int(b.shape[0] != 1), out)
    return out


def _same_length(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = as_limb_array(a, "a")
    b = as_limb_array(b, "b")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"length mismatch: a has {a.shape[0]} rows, b has {b.shape[0]}")
    return a, b


def _check_writeable(a: np.ndarray, func: str) -> None:
    """In-place functions must write into the caller's array, not into a silent contiguous copy."""
    if not (isinstance(a, np.ndarray) and a.flags.c_contiguous and a.flags.writeable):
        raise ValueError(f"{func} needs a writeable C-contiguous (n, 4) uint64 array")


def to_montgomery(a: np.ndarray) -> np.ndarray:
    """Canonical array to Montgomery form: the Montgomery product with R^2 is a * R.

    Inputs must be canonical (< r), like every kernel input. The kernels do not check: run
    ``cuzk.field.limbs.check_canonical`` on data read from outside first.
    """
    a = as_limb_array(a)
    return _binary(_OP_MUL, a, np.array([[m.RR0, m.RR1, m.RR2, m.RR3]], dtype=np.uint64))


def from_montgomery(a: np.ndarray) -> np.ndarray:
    """Montgomery array to canonical form: the Montgomery product with plain 1 divides by R."""
    a = as_limb_array(a)
    return _binary(_OP_MUL, a, np.array([[1, 0, 0, 0]], dtype=np.uint64))


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b elementwise."""
    return _binary(_OP_ADD, *_same_length(a, b))


def sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a - b elementwise."""
    return _binary(_OP_SUB, *_same_length(a, b))


def neg(a: np.ndarray) -> np.ndarray:
    """-a elementwise (zero stays zero)."""
    a = as_limb_array(a)
    return _binary(_OP_SUB, np.zeros((1, FR_LIMBS), dtype=np.uint64), a)


def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a * b elementwise."""
    return _binary(_OP_MUL, *_same_length(a, b))


def square(a: np.ndarray) -> np.ndarray:
    """a^2 elementwise."""
    a = as_limb_array(a)
    return _binary(_OP_MUL, a, a)


def add_inplace(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a += b elementwise, writing into ``a`` (a C-contiguous (n, 4) uint64 array)."""
    _check_writeable(a, "add_inplace")
    a, b = _same_length(a, b)
    return _binary(_OP_ADD, a, b, out=a)


def sub_inplace(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a -= b elementwise, writing into ``a`` (a C-contiguous (n, 4) uint64 array)."""
    _check_writeable(a, "sub_inplace")
    a, b = _same_length(a, b)
    return _binary(_OP_SUB, a, b, out=a)


def mul_inplace(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a *= b elementwise, writing into ``a`` (which must be a C-contiguous (n, 4) uint64 array)."""
    _check_writeable(a, "mul_inplace")
    a, b = _same_length(a, b)
    return _binary(_OP_MUL, a, b, out=a)


def mul_scalar(a: np.ndarray, c: int) -> np.ndarray:
    """a * c elementwise, for a canonical int ``c`` (converted to Montgomery form here)."""
    return _binary(_OP_MUL, as_limb_array(a), _row(c))


def mul_scalar_inplace(a: np.ndarray, c: int) -> np.ndarray:
    """a *= c elementwise, in place (the 1/n scaling of an inverse NTT at 2^27 cannot afford a copy)."""
    _check_writeable(a, "mul_scalar_inplace")
    a = as_limb_array(a)
    return _binary(_OP_MUL, a, _row(c), out=a)


def add_scalar(a: np.ndarray, c: int) -> np.ndarray:
    """a + c elementwise, for a canonical int ``c``."""
    return _binary(_OP_ADD, as_limb_array(a), _row(c))


# ----------------------------------------------------------------------------------------------------
# Batch operations


def batch_inverse(a: np.ndarray) -> np.ndarray:
    """Elementwise inverse with Montgomery's trick; zeros map to zero (bellperson's convention)."""
    a = as_limb_array(a)
    out = np.empty_like(a)
    _batch_inverse(a, out, _n_chunks(a.shape[0]))
    return out


def powers(x: int, n: int) -> np.ndarray:
    """[1, x, x^2, ..., x^(n-1)] in Montgomery form."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    out = np.empty((n, FR_LIMBS), dtype=np.uint64)
    _geometric(out, mont(1), mont(x), _n_chunks(n), False)
    return out


def mul_powers_inplace(a: np.ndarray, x: int, c: int = 1) -> np.ndarray:
    """a[i] *= c * x^i, in place: the coset shift of an NTT (and its inverse) in one pass."""
    _check_writeable(a, "mul_powers_inplace")
    a = as_limb_array(a)
    _geometric(a, mont(c), mont(x), _n_chunks(a.shape[0]), True)
    return a


def _reduce(a: np.ndarray, b: np.ndarray, use_b: bool) -> int:
    partial = np.empty((_n_chunks(a.shape[0]), FR_LIMBS), dtype=np.uint64)
    _chunk_sums(a, b, use_b, partial)
    return sum(unmont(row) for row in partial) % R_MODULUS


def inner_product(a: np.ndarray, b: np.ndarray) -> int:
    """sum a[i] * b[i], as a canonical int."""
    a, b = _same_length(a, b)
    return _reduce(a, b, True)


def sum_all(a: np.ndarray) -> int:
    """sum a[i], as a canonical int."""
    a = as_limb_array(a)
    return _reduce(a, a, False)


# ----------------------------------------------------------------------------------------------------
# Sparse matrix products (CSR), used by Groth16 key generation


def _check_csr(
    row_ptr: np.ndarray, col_idx: np.ndarray, coeffs: np.ndarray, n_cols: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a CSR matrix before handing it to a kernel that does no bounds checks."""
    row_ptr = np.ascontiguousarray(row_ptr, dtype=np.int64)
    col_idx = np.ascontiguousarray(col_idx, dtype=np.int64)
    coeffs = as_limb_array(coeffs, "coeffs_mont")
    if row_ptr.ndim != 1 or row_ptr.size < 1 or row_ptr[0] != 0:
        raise ValueError("row_ptr must be a 1-D array starting at 0")
    if np.any(np.diff(row_ptr) < 0):
        raise ValueError("row_ptr must be non-decreasing")
    nnz = int(row_ptr[-1])
    if col_idx.shape != (nnz,) or coeffs.shape[0] != nnz:
        raise ValueError(
            f"row_ptr declares {nnz} entries, col_idx has {col_idx.size}, coeffs_mont {coeffs.shape[0]}"
        )
    if nnz and (col_idx.min() < 0 or col_idx.max() >= n_cols):
        raise ValueError(f"col_idx out of range [0, {n_cols})")
    return row_ptr, col_idx, coeffs


def spmv(row_ptr: np.ndarray, col_idx: np.ndarray, coeffs_mont: np.ndarray, x_mont: np.ndarray) -> np.ndarray:
    """y = M x for a CSR matrix M: y[row] = sum of coeff * x[col], all Montgomery."""
    x = as_limb_array(x_mont, "x_mont")
    row_ptr, col_idx, coeffs = _check_csr(row_ptr, col_idx, coeffs_mont, x.shape[0])
    y = np.empty((row_ptr.size - 1, FR_LIMBS), dtype=np.uint64)
    _spmv(row_ptr, col_idx, coeffs, x, y)
    return y
