"""Sparse matrix-vector products over Fr for compiled circuits: a = A·w, b = B·w, c = C·w.

A compiled matrix stores, per entry, a column (uint32) and an index into a small table of distinct
coefficients (uint16 or uint32) rather than the 32-byte coefficient itself: the Filecoin circuits
use a few hundred distinct coefficients over hundreds of millions of entries, nearly all of them
±1 or powers of two. By convention the table starts with 1 and -1 (`COEFF_ONE`, `COEFF_MINUS_ONE`),
which the kernel adds or subtracts without a multiplication.

Values stay canonical throughout: the table is in Montgomery form, so the Montgomery product of a
table entry (c·R) with a canonical witness value w is c·w, canonical. No conversion pass over the
witness or the result is needed. Witness values 0 and 1 need no product at all (see the kernel).

The witness arrives as two arrays, inputs and aux, in bellperson's combined column order (column
j < num_inputs is input j, otherwise aux j - num_inputs), so the 4 GB aux vector of a 32GiB PoRep
partition is never concatenated with the inputs.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from cuzk.field import _mont64 as m
from cuzk.field.constants import FR_LIMBS
from cuzk.field.fr_vec import from_montgomery
from cuzk.field.limbs import as_limb_array

__all__ = ["COEFF_MINUS_ONE", "COEFF_ONE", "check_rows", "spmv_table"]

#: Table slots every coefficient table reserves, whether or not the circuit uses them.
COEFF_ONE = 0
COEFF_MINUS_ONE = 1


@njit(parallel=True, cache=True)
def _spmv_table(row_ptr, cols, coeff_idx, table, table_canonical, inputs, aux, out):  # type: ignore[no-untyped-def]
    """out[r] = sum over row r's entries of table[coeff_idx[k]] * w[cols[k]]; rows in parallel.

    Witness values 0 and 1 (the bits that make up most of a SHA-256 circuit's witness, multiplied
    by the powers of two of packing rows) skip the multiplication: 0 adds nothing, 1 adds the
    coefficient itself. Field arithmetic is exact, so the sum is the same either way."""
    n_in = inputs.shape[0]
    for r in prange(out.shape[0]):
        s0, s1, s2, s3 = m.U0, m.U0, m.U0, m.U0
        for k in range(row_ptr[r], row_ptr[r + 1]):
            col = np.int64(cols[k])
            if col < n_in:
                x0, x1, x2, x3 = inputs[col, 0], inputs[col, 1], inputs[col, 2], inputs[col, 3]
            else:
                j = col - n_in
                x0, x1, x2, x3 = aux[j, 0], aux[j, 1], aux[j, 2], aux[j, 3]
            ci = np.int64(coeff_idx[k])
            if (x1 | x2 | x3) == m.U0 and x0 <= m.U1:
                if x0 == m.U1:
                    s0, s1, s2, s3 = m.add_mod(s0, s1, s2, s3, table_canonical[ci, 0], table_canonical[ci, 1],
                                               table_canonical[ci, 2], table_canonical[ci, 3])
            elif ci == 0:
                s0, s1, s2, s3 = m.add_mod(s0, s1, s2, s3, x0, x1, x2, x3)
            elif ci == 1:
                s0, s1, s2, s3 = m.sub_mod(s0, s1, s2, s3, x0, x1, x2, x3)
            else:
                t0, t1, t2, t3 = m.mont_mul(table[ci, 0], table[ci, 1], table[ci, 2], table[ci, 3], x0, x1, x2, x3)
                s0, s1, s2, s3 = m.add_mod(s0, s1, s2, s3, t0, t1, t2, t3)
        out[r, 0] = s0
        out[r, 1] = s1
        out[r, 2] = s2
        out[r, 3] = s3


@njit(parallel=True, cache=True)
def _unsatisfied(a, b, c, bad):  # type: ignore[no-untyped-def]
    """bad[r] = (a[r]·b[r] != c[r]), all canonical: Montgomery products of a·b and of c·1 both
    carry one factor R^-1, so they are equal exactly when a·b = c."""
    for r in prange(a.shape[0]):
        p0, p1, p2, p3 = m.mont_mul(a[r, 0], a[r, 1], a[r, 2], a[r, 3], b[r, 0], b[r, 1], b[r, 2], b[r, 3])
        q0, q1, q2, q3 = m.mont_mul(c[r, 0], c[r, 1], c[r, 2], c[r, 3], m.U1, m.U0, m.U0, m.U0)
        bad[r] = ((p0 ^ q0) | (p1 ^ q1) | (p2 ^ q2) | (p3 ^ q3)) != m.U0


def spmv_table(row_ptr: np.ndarray, cols: np.ndarray, coeff_idx: np.ndarray, table_mont: np.ndarray,
               inputs: np.ndarray, aux: np.ndarray, out: np.ndarray | None = None, *,
               table_canonical: np.ndarray | None = None) -> np.ndarray:
    """M·w for a compiled CSR matrix M over the witness w = (inputs, aux), canonical in and out.

    `table_canonical` (the table out of Montgomery form) is computed when not given; callers that
    multiply often pass it. The arrays are trusted to be consistent (a compiled file checks them
    when it is loaded or built): the kernel does no bounds checks, so only the cheap shape facts
    are verified here.
    """
    inputs = as_limb_array(inputs, "inputs")
    aux = as_limb_array(aux, "aux")
    table = as_limb_array(table_mont, "table_mont")
    canonical = from_montgomery(table) if table_canonical is None else as_limb_array(table_canonical,
                                                                                       "table_canonical")
    if canonical.shape != table.shape:
        raise ValueError(f"table_canonical {canonical.shape} and table_mont {table.shape} differ")
    rows = row_ptr.shape[0] - 1
    if cols.shape != coeff_idx.shape or cols.ndim != 1:
        raise ValueError(f"cols {cols.shape} and coeff_idx {coeff_idx.shape} must be equal 1-D shapes")
    if table.shape[0] < 2:
        raise ValueError("a coefficient table holds at least 1 and -1")
    if out is None:
        out = np.empty((rows, FR_LIMBS), dtype=np.uint64)
    elif out.shape != (rows, FR_LIMBS) or out.dtype != np.uint64 or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous ({rows}, {FR_LIMBS}) uint64 array")
    _spmv_table(row_ptr, cols, coeff_idx, table, canonical, inputs, aux, out)
    return out


def check_rows(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Indices of the rows where a·b != c (canonical inputs), ascending; empty when all hold."""
    a, b, c = (as_limb_array(x, name) for x, name in ((a, "a"), (b, "b"), (c, "c")))
    if not a.shape == b.shape == c.shape:
        raise ValueError(f"a, b, c must have equal shapes, got {a.shape}, {b.shape}, {c.shape}")
    bad = np.empty(a.shape[0], dtype=np.bool_)
    _unsatisfied(a, b, c, bad)
    return np.flatnonzero(bad)
