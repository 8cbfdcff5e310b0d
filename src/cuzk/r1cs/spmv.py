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

import numba
import numpy as np
from numba import njit, prange

from cuzk.field import _mont64 as m
from cuzk.field.constants import FR_LIMBS
from cuzk.field.fr_vec import from_montgomery
from cuzk.field.limbs import as_limb_array, limb_rows_out

__all__ = ["COEFF_MINUS_ONE", "COEFF_ONE", "check_rows", "spmv3_table", "spmv_table", "spmv_table_transpose"]

#: Table slots every coefficient table reserves, whether or not the circuit uses them.
COEFF_ONE = 0
COEFF_MINUS_ONE = 1


@njit(parallel=True, cache=True)
def _spmv_table(row_ptr, cols, coeff_idx, table, table_canonical, inputs, aux, out):  # type: ignore[no-untyped-def]
    """out[r] = sum over row r's entries of table[coeff_idx[k]] * w[cols[k]]; rows in parallel."""
    for r in prange(out.shape[0]):
        s0, s1, s2, s3 = _row_sum(row_ptr, cols, coeff_idx, table, table_canonical, inputs, aux, r)
        out[r, 0] = s0
        out[r, 1] = s1
        out[r, 2] = s2
        out[r, 3] = s3


@njit(inline="always")
def _row_sum(row_ptr, cols, coeff_idx, table, table_canonical, inputs, aux, r):  # type: ignore[no-untyped-def]
    """Row r of one matrix times the witness.

    Witness values 0 and 1 (the bits that make up most of a SHA-256 circuit's witness, multiplied
    by the powers of two of packing rows) skip the multiplication: 0 adds nothing, 1 adds the
    coefficient itself. Field arithmetic is exact, so the sum is the same either way."""
    n_in = inputs.shape[0]
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
    return s0, s1, s2, s3


@njit(parallel=True, cache=True)
def _spmv3_checked(a_ptr, a_cols, a_idx, b_ptr, b_cols, b_idx, c_ptr, c_cols, c_idx, table, table_canonical,
                   inputs, aux, out_a, out_b, out_c, bad, check):  # type: ignore[no-untyped-def]
    """a, b, c of each row in one pass over the rows, and with `check` bad[r] = (a·b != c) beside
    them: a row's three products read mostly the same witness values, and its check the values just
    computed, so nothing goes round the memory twice."""
    for r in prange(out_a.shape[0]):
        a0, a1, a2, a3 = _row_sum(a_ptr, a_cols, a_idx, table, table_canonical, inputs, aux, r)
        b0, b1, b2, b3 = _row_sum(b_ptr, b_cols, b_idx, table, table_canonical, inputs, aux, r)
        c0, c1, c2, c3 = _row_sum(c_ptr, c_cols, c_idx, table, table_canonical, inputs, aux, r)
        out_a[r, 0], out_a[r, 1], out_a[r, 2], out_a[r, 3] = a0, a1, a2, a3
        out_b[r, 0], out_b[r, 1], out_b[r, 2], out_b[r, 3] = b0, b1, b2, b3
        out_c[r, 0], out_c[r, 1], out_c[r, 2], out_c[r, 3] = c0, c1, c2, c3
        if check:
            bad[r] = _unequal(a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3)


@njit(parallel=True, cache=True)
def _spmv_table_transpose(row_ptr, cols, coeff_idx, table, x, y, n_parts):  # type: ignore[no-untyped-def]
    """y[col] += table[coeff_idx[k]] * x[row] over every entry, all Montgomery.

    Each part owns a contiguous range of columns and scans the whole matrix, multiplying only the
    entries in its range: no write races and nothing of size n_cols per thread (a PoRep-32GiB
    column vector is 4 GB). The extra scans read only the uint32 columns."""
    n_rows = row_ptr.shape[0] - 1
    n_cols = y.shape[0]
    for p in prange(n_parts):
        lo = p * n_cols // n_parts
        hi = (p + 1) * n_cols // n_parts
        for r in range(n_rows):
            x0, x1, x2, x3 = x[r, 0], x[r, 1], x[r, 2], x[r, 3]
            for k in range(row_ptr[r], row_ptr[r + 1]):
                col = np.int64(cols[k])
                if col < lo or col >= hi:
                    continue
                ci = np.int64(coeff_idx[k])
                if ci == 0:
                    t0, t1, t2, t3 = x0, x1, x2, x3
                elif ci == 1:
                    t0, t1, t2, t3 = m.sub_mod(m.U0, m.U0, m.U0, m.U0, x0, x1, x2, x3)
                else:
                    t0, t1, t2, t3 = m.mont_mul(table[ci, 0], table[ci, 1], table[ci, 2], table[ci, 3],
                                                x0, x1, x2, x3)
                y0, y1, y2, y3 = m.add_mod(y[col, 0], y[col, 1], y[col, 2], y[col, 3], t0, t1, t2, t3)
                y[col, 0] = y0
                y[col, 1] = y1
                y[col, 2] = y2
                y[col, 3] = y3


@njit(inline="always")
def _unequal(a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3):  # type: ignore[no-untyped-def]
    """a·b != c, all canonical: Montgomery products of a·b and of c·1 both carry one factor R^-1,
    so they are equal exactly when a·b = c. A factor 0 or 1 (most rows of the bit-heavy Filecoin
    circuits) needs no product: canonical values are equal exactly when their limbs are."""
    if (a0 | a1 | a2 | a3) == m.U0 or (b0 | b1 | b2 | b3) == m.U0:
        return (c0 | c1 | c2 | c3) != m.U0
    if a0 == m.U1 and (a1 | a2 | a3) == m.U0:
        return ((b0 ^ c0) | (b1 ^ c1) | (b2 ^ c2) | (b3 ^ c3)) != m.U0
    if b0 == m.U1 and (b1 | b2 | b3) == m.U0:
        return ((a0 ^ c0) | (a1 ^ c1) | (a2 ^ c2) | (a3 ^ c3)) != m.U0
    p0, p1, p2, p3 = m.mont_mul(a0, a1, a2, a3, b0, b1, b2, b3)
    q0, q1, q2, q3 = m.mont_mul(c0, c1, c2, c3, m.U1, m.U0, m.U0, m.U0)
    return ((p0 ^ q0) | (p1 ^ q1) | (p2 ^ q2) | (p3 ^ q3)) != m.U0


@njit(parallel=True, cache=True)
def _unsatisfied(a, b, c, bad):  # type: ignore[no-untyped-def]
    """bad[r] = (a[r]·b[r] != c[r])."""
    for r in prange(a.shape[0]):
        bad[r] = _unequal(a[r, 0], a[r, 1], a[r, 2], a[r, 3], b[r, 0], b[r, 1], b[r, 2], b[r, 3],
                          c[r, 0], c[r, 1], c[r, 2], c[r, 3])


def spmv_table(row_ptr: np.ndarray, cols: np.ndarray, coeff_idx: np.ndarray, table_mont: np.ndarray,
               inputs: np.ndarray, aux: np.ndarray, out: np.ndarray | None = None, *,
               table_canonical: np.ndarray | None = None) -> np.ndarray:
    """M·w for a compiled CSR matrix M over the witness w = (inputs, aux), canonical in and out.

    `table_canonical` (the table out of Montgomery form) is computed when not given; callers that
    multiply often pass it. The arrays are trusted to be consistent (a compiled file checks them
    when it is loaded or built): the kernel does no bounds checks, so only the cheap shape facts
    are verified here.
    """
    inputs, aux, table, canonical = _operands(inputs, aux, table_mont, table_canonical)
    rows = row_ptr.shape[0] - 1
    if cols.shape != coeff_idx.shape or cols.ndim != 1:
        raise ValueError(f"cols {cols.shape} and coeff_idx {coeff_idx.shape} must be equal 1-D shapes")
    out = limb_rows_out(out, rows)
    _spmv_table(row_ptr, cols, coeff_idx, table, canonical, inputs, aux, out)
    return out


def _operands(inputs: np.ndarray, aux: np.ndarray, table_mont: np.ndarray,
              table_canonical: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The witness and both forms of the coefficient table as the kernels take them, checked."""
    inputs = as_limb_array(inputs, "inputs")
    aux = as_limb_array(aux, "aux")
    table = as_limb_array(table_mont, "table_mont")
    canonical = from_montgomery(table) if table_canonical is None else as_limb_array(table_canonical,
                                                                                       "table_canonical")
    if canonical.shape != table.shape:
        raise ValueError(f"table_canonical {canonical.shape} and table_mont {table.shape} differ")
    if table.shape[0] < 2:
        raise ValueError("a coefficient table holds at least 1 and -1")
    return inputs, aux, table, canonical


def spmv3_table(matrices: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...], table_mont: np.ndarray,
                inputs: np.ndarray, aux: np.ndarray,
                out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None, *, check: bool = False,
                table_canonical: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(A·w, B·w, C·w, rows where a·b != c) for three CSR matrices (row_ptr, cols, coeff_idx) of one
    circuit, in one pass over the rows: what `spmv_table` three times and `check_rows` after give,
    in less time (benchmarks/results/host-products-porep-2k-cpu-2026-12-04.json). The rows array is
    empty unless `check`. `out`: three (rows, 4) uint64 arrays."""
    inputs, aux, table, canonical = _operands(inputs, aux, table_mont, table_canonical)
    if len(matrices) != 3:
        raise ValueError(f"three matrices (A, B, C), got {len(matrices)}")
    rows = matrices[0][0].shape[0] - 1
    for name, (row_ptr, cols, coeff_idx) in zip("ABC", matrices, strict=True):
        if row_ptr.shape[0] - 1 != rows:
            raise ValueError(f"matrix {name} has {row_ptr.shape[0] - 1} rows, A has {rows}")
        if cols.shape != coeff_idx.shape or cols.ndim != 1:
            raise ValueError(f"matrix {name}: cols {cols.shape} and coeff_idx {coeff_idx.shape} must be equal "
                             "1-D shapes")
    dsts = out if out is not None else (None, None, None)
    oa, ob, oc = (limb_rows_out(d, rows) for d in dsts)
    bad = np.zeros(rows if check else 0, dtype=np.bool_)
    (ap, ac, ai), (bp, bc, bi), (cp, cc, ci) = matrices
    _spmv3_checked(ap, ac, ai, bp, bc, bi, cp, cc, ci, table, canonical, inputs, aux, oa, ob, oc,
                   bad if check else np.zeros(1, dtype=np.bool_), check)
    return oa, ob, oc, np.flatnonzero(bad)


def spmv_table_transpose(row_ptr: np.ndarray, cols: np.ndarray, coeff_idx: np.ndarray, table_mont: np.ndarray,
                         x_mont: np.ndarray, num_cols: int) -> np.ndarray:
    """Mᵀ·x for a compiled CSR matrix M, Montgomery in and out: y[col] = Σ_rows coeff·x[row].

    Key generation evaluates every variable's QAP polynomial at τ this way, with x the Lagrange
    basis at τ (`cuzk.groth16.setup`). Rows beyond len(x) are not allowed; x may be longer than
    the matrix (a domain padded to a power of two): the extra entries meet no coefficient."""
    x = as_limb_array(x_mont, "x_mont")
    table = as_limb_array(table_mont, "table_mont")
    rows = row_ptr.shape[0] - 1
    if cols.shape != coeff_idx.shape or cols.ndim != 1:
        raise ValueError(f"cols {cols.shape} and coeff_idx {coeff_idx.shape} must be equal 1-D shapes")
    if x.shape[0] < rows:
        raise ValueError(f"x_mont has {x.shape[0]} entries, the matrix has {rows} rows")
    if table.shape[0] < 2:
        raise ValueError("a coefficient table holds at least 1 and -1")
    y = np.zeros((num_cols, FR_LIMBS), dtype=np.uint64)
    if num_cols:
        _spmv_table_transpose(row_ptr, cols, coeff_idx, table, x, y, max(1, min(numba.get_num_threads(), num_cols)))
    return y


def check_rows(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Indices of the rows where a·b != c (canonical inputs), ascending; empty when all hold."""
    a, b, c = (as_limb_array(x, name) for x, name in ((a, "a"), (b, "b"), (c, "c")))
    if not a.shape == b.shape == c.shape:
        raise ValueError(f"a, b, c must have equal shapes, got {a.shape}, {b.shape}, {c.shape}")
    bad = np.empty(a.shape[0], dtype=np.bool_)
    _unsatisfied(a, b, c, bad)
    return np.flatnonzero(bad)
