"""Conversions between Python ints / little-endian bytes and (n, 4) uint64 limb arrays of Fr.

The array layout is the one every Fr kernel uses: one row per element, limb 0 least significant, so a
row's 32 bytes are exactly the element's little-endian encoding. That makes bytes <-> arrays a
reinterpretation (``np.frombuffer``) rather than a computation, and Python ints <-> arrays one
``int.to_bytes``/``int.from_bytes`` per element, with numpy doing the limb split.

Functions here work on *canonical* values (the integer itself, < r); Montgomery conversion lives in
:mod:`cuzk.field.fr_vec`.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numba
import numpy as np
from numba import njit, prange

from cuzk.field import _mont64 as m
from cuzk.field.constants import FR_BYTES, FR_LIMBS, FR_MONT_R, R_MODULUS

LIMB_DTYPE = np.dtype("<u8")

__all__ = [
    "as_limb_array",
    "bytes_le_to_limbs",
    "check_canonical",
    "int_to_limbs",
    "ints_to_limbs",
    "is_one_mask",
    "is_zero_mask",
    "limbs_to_bytes_le",
    "limbs_to_int",
    "limbs_to_ints",
]


def as_limb_array(a: np.ndarray, name: str = "a") -> np.ndarray:
    """Check that ``a`` is an (n, 4) uint64 array and return it C-contiguous (copying only if needed).

    numba kernels index rows blindly; this guard turns a wrong shape or dtype into a clear error
    instead of garbage, and contiguity keeps the number of compiled kernel variants down.
    """
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of shape (n, 4), got {type(a).__name__}")
    if a.ndim != 2 or a.shape[1] != FR_LIMBS:
        raise ValueError(f"{name} must have shape (n, {FR_LIMBS}), got {a.shape}")
    if a.dtype != np.uint64:
        raise TypeError(f"{name} must have dtype uint64, got {a.dtype}")
    return np.ascontiguousarray(a)


def limb_rows_out(out: np.ndarray | None, rows: int) -> np.ndarray:
    """A (rows, 4) uint64 array to write limbs into: `out` when it is one (C-contiguous), else a new
    array when `out` is None; ValueError naming the problem for any other `out`."""
    if out is None:
        return np.empty((rows, FR_LIMBS), dtype=np.uint64)
    if out.shape != (rows, FR_LIMBS) or out.dtype != np.uint64 or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous ({rows}, {FR_LIMBS}) uint64 array, got {out.dtype} "
                         f"{out.shape}{'' if out.flags.c_contiguous else ' (not C-contiguous)'}")
    return out


def _first_bad_value(values: Sequence[int]) -> tuple[int, object]:
    """Slow path of :func:`ints_to_limbs`: locate the first value that is not an int in [0, r)."""
    for i, v in enumerate(values):
        try:
            x = operator.index(v)
        except TypeError:
            return i, v
        if not 0 <= x < R_MODULUS:
            return i, v
    return -1, None


def ints_to_limbs(values: Sequence[int]) -> np.ndarray:
    """Canonical ints (each 0 <= v < r) to a new (n, 4) uint64 array.

    Raises ``ValueError`` naming the first out-of-range index (``TypeError`` for a non-integer).
    """
    try:
        buf = b"".join([v.to_bytes(FR_BYTES, "little") for v in values])
    except (OverflowError, AttributeError, TypeError):
        buf = None
    if buf is not None:
        arr = np.frombuffer(buf, dtype=LIMB_DTYPE).reshape(-1, FR_LIMBS).copy()
        bad = check_canonical(arr)
        if bad < 0:
            return arr
    bad, value = _first_bad_value(values)
    if bad < 0:
        # Only reachable for int-like objects without to_bytes (e.g. numpy integers): convert them.
        return ints_to_limbs([operator.index(v) for v in values])
    if not isinstance(value, int | np.integer):
        raise TypeError(f"value at index {bad} is not an integer: {type(value).__name__}")
    raise ValueError(f"value at index {bad} is not a canonical Fr element (need 0 <= v < r): {value}")


def limbs_to_ints(arr: np.ndarray) -> list[int]:
    """An (n, 4) uint64 array to a list of Python ints (no reduction: the limbs are read as-is)."""
    data = limbs_to_bytes_le(as_limb_array(arr, "arr"))
    view = memoryview(data)
    return [int.from_bytes(view[i : i + FR_BYTES], "little") for i in range(0, len(data), FR_BYTES)]


def bytes_le_to_limbs(buf: bytes | bytearray | memoryview | np.ndarray, n: int | None = None) -> np.ndarray:
    """Read 32-byte little-endian elements as an (n, 4) uint64 array, sharing memory with ``buf``.

    With ``n`` given, the first ``n`` elements are read (``buf`` may be longer, e.g. a whole file);
    otherwise ``buf`` must hold a whole number of elements. The result is read-only when ``buf`` is.
    Values are not checked: call :func:`check_canonical` when the bytes come from outside.
    """
    raw = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf
    if raw.dtype != np.uint8:
        raw = raw.reshape(-1).view(np.uint8)
    raw = raw.reshape(-1)
    if n is None:
        if raw.size % FR_BYTES:
            raise ValueError(f"buffer length {raw.size} is not a multiple of {FR_BYTES} bytes")
        n = raw.size // FR_BYTES
    elif n < 0 or n * FR_BYTES > raw.size:
        raise ValueError(f"buffer of {raw.size} bytes cannot hold {n} elements of {FR_BYTES} bytes")
    return raw[: n * FR_BYTES].view(LIMB_DTYPE).reshape(n, FR_LIMBS)


def limbs_to_bytes_le(arr: np.ndarray) -> bytes:
    """An (n, 4) uint64 array to its 32n-byte little-endian encoding."""
    return np.ascontiguousarray(as_limb_array(arr, "arr"), dtype=LIMB_DTYPE).tobytes()


@njit(nogil=True, parallel=True, cache=True)
def _first_geq_r(arr: np.ndarray, parts: int) -> int:
    """Index of the first row >= r, or -1: `parts` contiguous ranges side by side, each with an
    early exit, the first range's find winning. A witness handed over in shared memory is mapped
    afresh by the prover, and the first pass over it takes its page faults, which a single thread
    takes one by one, so ranges side by side take them in parallel (benchmarks/HISTORY.md). It
    releases the GIL: a device process checks a witness with it while its other prover threads
    launch kernels."""
    n = arr.shape[0]
    found = np.full(parts, -1, dtype=np.int64)
    for p in prange(parts):
        for i in range(p * n // parts, (p + 1) * n // parts):
            if m.geq_r(arr[i, 0], arr[i, 1], arr[i, 2], arr[i, 3]):
                found[p] = i
                break
    for p in range(parts):
        if found[p] >= 0:
            return found[p]
    return -1


#: Rows per part of `check_canonical` at least: smaller arrays are checked by one thread.
CHECK_PART_ROWS = 1 << 20


def check_canonical(arr: np.ndarray) -> int:
    """Index of the first element >= r in an (n, 4) array, or -1 when all are canonical."""
    arr = as_limb_array(arr, "arr")
    parts = max(1, min(numba.get_num_threads(), arr.shape[0] // CHECK_PART_ROWS))
    return int(_first_geq_r(arr, parts))


def int_to_limbs(x: int) -> np.ndarray:
    """One canonical int (0 <= x < r) to a (4,) uint64 array."""
    x = operator.index(x)
    if not 0 <= x < R_MODULUS:
        raise ValueError(f"not a canonical Fr element (need 0 <= x < r): {x}")
    return np.frombuffer(x.to_bytes(FR_BYTES, "little"), dtype=LIMB_DTYPE).copy()


def limbs_to_int(row: np.ndarray) -> int:
    """A (4,) uint64 row to a Python int (no reduction)."""
    row = np.asarray(row)
    if row.shape != (FR_LIMBS,) or row.dtype != np.uint64:
        raise ValueError(f"expected a ({FR_LIMBS},) uint64 row, got shape {row.shape} dtype {row.dtype}")
    return int.from_bytes(np.ascontiguousarray(row, dtype=LIMB_DTYPE).tobytes(), "little")


@njit(parallel=True, cache=True)
def _rows_equal(arr: np.ndarray, c: np.ndarray, out: np.ndarray) -> None:
    """out[i] = (arr[i] == c): one pass, no (n, 4) temporaries."""
    c0, c1, c2, c3 = c[0], c[1], c[2], c[3]
    for i in prange(arr.shape[0]):
        out[i] = ((arr[i, 0] ^ c0) | (arr[i, 1] ^ c1) | (arr[i, 2] ^ c2) | (arr[i, 3] ^ c3)) == m.U0


def _equals_mask(arr: np.ndarray, value: int) -> np.ndarray:
    arr = as_limb_array(arr, "arr")
    out = np.empty(arr.shape[0], dtype=np.bool_)
    _rows_equal(arr, int_to_limbs(value), out)
    return out


def is_zero_mask(arr: np.ndarray) -> np.ndarray:
    """Boolean mask of the zero elements (zero has the same limbs in canonical and Montgomery form)."""
    return _equals_mask(arr, 0)


def is_one_mask(arr: np.ndarray, *, montgomery: bool = False) -> np.ndarray:
    """Boolean mask of the elements equal to one; pass ``montgomery=True`` for Montgomery arrays.

    Groth16 uses it to route 0/1 scalars around the MSM, which sees canonical values.
    """
    return _equals_mask(arr, FR_MONT_R if montgomery else 1)
