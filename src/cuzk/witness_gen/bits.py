"""Boolean witness values written into limb rows, on all cores.

Most of a Filecoin partition's aux vector is bits (SHA-256 intermediates, bit decompositions, index
bits), produced as uint8 0/1 by the generators and stored as canonical (n, 4) uint64 limbs in the
aux vector. Writing them with numpy (`aux[:, a:b] = 0; aux[:, a:b, 0] = bits`) is two strided
single-threaded passes over gigabytes at 32GiB; this kernel writes each element once, rows and
chunks of columns in parallel.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

__all__ = ["spread_bits", "spread_rows"]

#: Columns per parallel task: large enough to amortise the task, small enough to balance few rows.
_CHUNK = 1 << 14


@njit(parallel=True, cache=True)
def _spread(bits, out, offset):  # type: ignore[no-untyped-def]
    rows, count = bits.shape
    chunks = (count + _CHUNK - 1) // _CHUNK
    for task in prange(rows * chunks):
        c = task // chunks
        start = (task % chunks) * _CHUNK
        stop = min(start + _CHUNK, count)
        for j in range(start, stop):
            out[c, offset + j, 0] = bits[c, j]
            out[c, offset + j, 1] = 0
            out[c, offset + j, 2] = 0
            out[c, offset + j, 3] = 0


def spread_bits(bits: np.ndarray, out: np.ndarray, offset: int) -> None:
    """out[c, offset + j] = (bits[c, j], 0, 0, 0) for (rows, count) uint8 0/1 `bits` and an
    (rows, >= offset + count, 4) uint64 `out` (a view of a larger aux array will do)."""
    if bits.ndim != 2 or out.ndim != 3 or out.shape[2] != 4 or out.shape[0] != bits.shape[0]:
        raise ValueError(f"spread_bits: bits {bits.shape} do not fit out {out.shape}")
    if offset < 0 or offset + bits.shape[1] > out.shape[1]:
        raise ValueError(f"spread_bits: columns {offset}..{offset + bits.shape[1]} outside out's {out.shape[1]}")
    _spread(np.ascontiguousarray(bits, dtype=np.uint8), out, offset)


@njit(parallel=True, cache=True)
def _spread_rows(bits, out, rows):  # type: ignore[no-untyped-def]
    count = bits.shape[1]
    chunks = (count + _CHUNK - 1) // _CHUNK
    for task in prange(bits.shape[0] * chunks):
        c = task // chunks
        start = (task % chunks) * _CHUNK
        stop = min(start + _CHUNK, count)
        base = rows[c]
        for j in range(start, stop):
            out[base + j, 0] = bits[c, j]
            out[base + j, 1] = 0
            out[base + j, 2] = 0
            out[base + j, 3] = 0


def spread_rows(bits: np.ndarray, out: np.ndarray, rows: np.ndarray) -> None:
    """out[rows[c] + j] = (bits[c, j], 0, 0, 0) for (N, count) uint8 0/1 `bits`, an (n, 4) uint64
    `out` (a flat aux vector) and (N,) starting rows."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if bits.ndim != 2 or out.ndim != 2 or out.shape[1] != 4 or rows.shape != (bits.shape[0],):
        raise ValueError(f"spread_rows: bits {bits.shape}, rows {rows.shape} do not fit out {out.shape}")
    if rows.size and (int(rows.min()) < 0 or int(rows.max()) + bits.shape[1] > out.shape[0]):
        raise ValueError(f"spread_rows: rows {int(rows.min())}..{int(rows.max()) + bits.shape[1]} outside out's "
                         f"{out.shape[0]}")
    _spread_rows(np.ascontiguousarray(bits, dtype=np.uint8), out, rows)
