"""Batch fixed-base scalar multiplication: k_1*g, ..., k_n*g for one base g, straight to blstrs bytes.

Why: generating Groth16 parameters (H, L, A, B queries) needs millions of multiples of one G1 and
one G2 generator. One py-arkworks `g * Scalar` costs 170 us (G1) / 570 us (G2) plus a 7 us
inversion to serialise; here the cost is a couple of dozen mixed additions per point.

Method (signed fixed windows):
* Split every scalar into W = ceil(256/w) signed w-bit digits d_i in (-2^(w-1), 2^(w-1)], so that
  k = sum_i d_i * 2^(w*i). Negating an affine point is free, so the table only needs
  table[i][j-1] = j * 2^(w*i) * g for j = 1..2^(w-1), stored affine in Montgomery form.
* Each scalar then costs at most W mixed (Jacobian + affine) additions; the rows are split over
  numba's thread count by `parallel_for` (nogil kernels on a thread pool).
* Each chunk converts its results to affine with one field inversion (Montgomery's batch trick)
  and writes the blstrs uncompressed encoding directly (infinity = 0x40 then zeros).

The curve formulas below are written once over the generic `fe_*` field operations, so the same
code is compiled for G1 (y^2 = x^3 + 4 over Fp) and G2 (y^2 = x^3 + 4(u+1) over Fp2). They handle
the identity and the doubling case of an addition explicitly, so correctness never depends on the
digits avoiding those cases.
"""

from __future__ import annotations

import math
import threading

import numpy as np
from numba import njit, types
from numba.extending import overload

from cuzk.curve.fp_kernels import (
    fe_add,
    fe_eq,
    fe_inv,
    fe_is_zero,
    fe_mul,
    fe_neg,
    fe_one_like,
    fe_square,
    fe_sub,
    fe_zero_like,
    fp_from_mont,
    fp_to_mont,
    parallel_for,
    read_be48,
    write_be48,
)
from cuzk.curve.points import G1_UNCOMPRESSED_BYTES, G2_UNCOMPRESSED_BYTES, G1Point, G2Point
from cuzk.field.constants import FP_BYTES, FP_LIMBS, R_MODULUS

_SCALAR_BITS = 256          # windows cover 256 bits so that the top signed digit never overflows
_MAX_WINDOW = 14            # beyond this the table (W * 2^(w-1) points) stops fitting in cache
_CHUNK = 256                # scalars per batch inversion; one inversion is ~600 field products
_INFINITY_FLAG = np.uint8(0x40)


# ---------------------------------------------------------------------------------------------
# Curve formulas (Jacobian: x = X/Z^2, y = Y/Z^3; identity has Z = 0). Generic over Fp / Fp2.
# ---------------------------------------------------------------------------------------------

@njit(inline="always", cache=True)
def _dbl2(a):
    return fe_add(a, a)


@njit(cache=True)
def jac_double(X, Y, Z):
    """2P for a = 0 curves (dbl-2009-l: 2M + 5S). The identity doubles to itself via Z3 = 2YZ = 0."""
    A = fe_square(X)
    B = fe_square(Y)
    C = fe_square(B)
    D = _dbl2(fe_sub(fe_sub(fe_square(fe_add(X, B)), A), C))
    E = fe_add(_dbl2(A), A)
    F = fe_square(E)
    X3 = fe_sub(F, _dbl2(D))
    C8 = _dbl2(_dbl2(_dbl2(C)))
    Y3 = fe_sub(fe_mul(E, fe_sub(D, X3)), C8)
    Z3 = _dbl2(fe_mul(Y, Z))
    return X3, Y3, Z3


@njit(cache=True)
def jac_add_affine(X1, Y1, Z1, x2, y2):
    """P + Q with P Jacobian and Q affine, Q not the identity (madd-2007-bl: 7M + 4S).

    Falls back to doubling when P == Q and returns the identity when P == -Q.
    """
    if fe_is_zero(Z1):
        return x2, y2, fe_one_like(x2)
    Z1Z1 = fe_square(Z1)
    U2 = fe_mul(x2, Z1Z1)
    S2 = fe_mul(fe_mul(y2, Z1), Z1Z1)
    if fe_eq(U2, X1):
        if fe_eq(S2, Y1):
            return jac_double(X1, Y1, Z1)
        zero = fe_zero_like(x2)
        return fe_one_like(x2), fe_one_like(x2), zero
    H = fe_sub(U2, X1)
    HH = fe_square(H)
    I = _dbl2(_dbl2(HH))
    J = fe_mul(H, I)
    r = _dbl2(fe_sub(S2, Y1))
    V = fe_mul(X1, I)
    X3 = fe_sub(fe_sub(fe_square(r), J), _dbl2(V))
    Y3 = fe_sub(fe_mul(r, fe_sub(V, X3)), _dbl2(fe_mul(Y1, J)))
    Z3 = fe_sub(fe_sub(fe_square(fe_add(Z1, H)), Z1Z1), HH)
    return X3, Y3, Z3


# ---------------------------------------------------------------------------------------------
# Array access generic over G1 (element arrays (..., 6)) and G2 (element arrays (..., 2, 6)).
# ---------------------------------------------------------------------------------------------

def _fe_load(view):
    """An element from a (6,) or (2, 6) uint64 view (jitted code only)."""
    raise TypeError("jitted code only")


def _fe_store(view, a):
    """Store an element into a (6,) or (2, 6) uint64 view (jitted code only)."""
    raise TypeError("jitted code only")


def _write_affine(row, x, y):
    """Write affine Montgomery (x, y) as the blstrs uncompressed encoding into a uint8 row."""
    raise TypeError("jitted code only")


@overload(_fe_load, inline="always")
def _ov_fe_load(view):
    if isinstance(view, types.Array) and view.ndim == 1:
        return lambda view: (view[0], view[1], view[2], view[3], view[4], view[5])
    return lambda view: ((view[0, 0], view[0, 1], view[0, 2], view[0, 3], view[0, 4], view[0, 5]),
                         (view[1, 0], view[1, 1], view[1, 2], view[1, 3], view[1, 4], view[1, 5]))


@overload(_fe_store, inline="always")
def _ov_fe_store(view, a):
    if isinstance(view, types.Array) and view.ndim == 1:
        def impl(view, a):
            for k in range(6):
                view[k] = a[k]
        return impl

    def impl2(view, a):
        for k in range(6):
            view[0, k] = a[0][k]
            view[1, k] = a[1][k]
    return impl2


@overload(_write_affine, inline="always")
def _ov_write_affine(row, x, y):
    if isinstance(x[0], types.BaseTuple):
        def impl2(row, x, y):
            # blstrs/zcash G2 order: x.c1, x.c0, y.c1, y.c0 (imaginary part first).
            write_be48(row, 0, fp_from_mont(x[1]))
            write_be48(row, 48, fp_from_mont(x[0]))
            write_be48(row, 96, fp_from_mont(y[1]))
            write_be48(row, 144, fp_from_mont(y[0]))
        return impl2

    def impl(row, x, y):
        write_be48(row, 0, fp_from_mont(x))
        write_be48(row, 48, fp_from_mont(y))
    return impl


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------

@njit(cache=True)
def _batch_to_affine(X, Y, Z, count, ax, ay, is_inf):
    """Affine coordinates of the first `count` Jacobian points (one inversion: Montgomery's trick).

    X, Y, Z, ax, ay are element arrays (count, ...); is_inf[k] is set for identities (Z = 0), whose
    ax/ay are left untouched.
    """
    if count == 0:
        return
    pref = np.empty_like(Z)
    acc = fe_one_like(_fe_load(Z[0]))
    for k in range(count):
        z = _fe_load(Z[k])
        is_inf[k] = fe_is_zero(z)
        _fe_store(pref[k], acc)            # product of the non-zero Z before k
        if not is_inf[k]:
            acc = fe_mul(acc, z)
    inv = fe_inv(acc)
    for k in range(count - 1, -1, -1):
        if is_inf[k]:
            continue
        z = _fe_load(Z[k])
        zinv = fe_mul(inv, _fe_load(pref[k]))
        inv = fe_mul(inv, z)
        zinv2 = fe_square(zinv)
        _fe_store(ax[k], fe_mul(_fe_load(X[k]), zinv2))
        _fe_store(ay[k], fe_mul(_fe_load(Y[k]), fe_mul(zinv2, zinv)))


@njit(cache=True)
def _window_bases(gx, gy, n_windows, w):
    """Affine 2^(w*i) * g for i < n_windows (w doublings and one inversion per window)."""
    bx = np.empty((n_windows, *gx.shape), dtype=np.uint64)
    by = np.empty_like(bx)
    x = _fe_load(gx)
    y = _fe_load(gy)
    _fe_store(bx[0], x)
    _fe_store(by[0], y)
    for i in range(1, n_windows):
        X, Y, Z = x, y, fe_one_like(x)
        for _ in range(w):
            X, Y, Z = jac_double(X, Y, Z)
        zinv = fe_inv(Z)
        zinv2 = fe_square(zinv)
        x = fe_mul(X, zinv2)
        y = fe_mul(Y, fe_mul(zinv2, zinv))
        _fe_store(bx[i], x)
        _fe_store(by[i], y)
    return bx, by


@njit(nogil=True, cache=True)
def _fill_table_rows(bx, by, table, lo, hi):
    """table[i, j-1, 0/1] = x/y of j * (bx[i], by[i]) for windows i in [lo, hi)."""
    half = table.shape[1]
    X = np.empty((half, *bx.shape[1:]), dtype=np.uint64)
    Y = np.empty_like(X)
    Z = np.empty_like(X)
    is_inf = np.empty(half, dtype=np.bool_)
    for i in range(lo, hi):
        x = _fe_load(bx[i])
        y = _fe_load(by[i])
        aX, aY, aZ = x, y, fe_one_like(x)
        _fe_store(X[0], aX)
        _fe_store(Y[0], aY)
        _fe_store(Z[0], aZ)
        for j in range(1, half):
            aX, aY, aZ = jac_add_affine(aX, aY, aZ, x, y)
            _fe_store(X[j], aX)
            _fe_store(Y[j], aY)
            _fe_store(Z[j], aZ)
        _batch_to_affine(X, Y, Z, half, table[i, :, 0], table[i, :, 1], is_inf)


def _build_table(gx: np.ndarray, gy: np.ndarray, w: int) -> np.ndarray:
    """table[i, j-1, 0/1] = x/y of j * 2^(w*i) * g, j = 1..2^(w-1), affine Montgomery.

    g must have prime order r, so no entry is the identity (j * 2^(w*i) is never a multiple of r).
    """
    n_windows = math.ceil(_SCALAR_BITS / w)
    bx, by = _window_bases(gx, gy, n_windows, w)
    table = np.empty((n_windows, 1 << (w - 1), 2, *gx.shape), dtype=np.uint64)
    parallel_for(_fill_table_rows, n_windows, bx, by, table)
    return table


@njit(inline="always", cache=True)
def _window_value(scalars, k, bit, w):
    """Bits [bit, bit + w) of scalar k (little-endian uint64 limbs; bits past 256 read as 0)."""
    limb = bit >> 6
    off = bit & 63
    v = scalars[k, limb] >> np.uint64(off)
    if off + w > 64 and limb < 3:
        v |= scalars[k, limb + 1] << np.uint64(64 - off)
    return np.int64(v & np.uint64((1 << w) - 1))


@njit(nogil=True, cache=True)
def _fixed_base_rows(table, scalars, w, out, lo, hi):
    """out[k] = blstrs encoding of scalars[k] * g for k in [lo, hi), in chunks of _CHUNK rows."""
    n_windows = table.shape[0]
    half = np.int64(1) << (w - 1)
    full = np.int64(1) << w
    X = np.empty((_CHUNK, *table.shape[3:]), dtype=np.uint64)
    Y = np.empty_like(X)
    Z = np.empty_like(X)
    ax = np.empty_like(X)
    ay = np.empty_like(X)
    is_inf = np.empty(_CHUNK, dtype=np.bool_)
    x0 = _fe_load(table[0, 0, 0])
    for start in range(lo, hi, _CHUNK):
        count = min(hi, start + _CHUNK) - start
        for t in range(count):
            k = start + t
            aX, aY, aZ = x0, x0, fe_zero_like(x0)     # the identity
            carry = np.int64(0)
            for i in range(n_windows):
                d = _window_value(scalars, k, i * w, w) + carry
                carry = np.int64(0)
                if d > half and i < n_windows - 1:     # signed digit; the top one stays <= half
                    d -= full
                    carry = np.int64(1)
                if d != 0:
                    j = d - 1 if d > 0 else -d - 1
                    px = _fe_load(table[i, j, 0])
                    py = _fe_load(table[i, j, 1])
                    if d < 0:
                        py = fe_neg(py)
                    aX, aY, aZ = jac_add_affine(aX, aY, aZ, px, py)
            _fe_store(X[t], aX)
            _fe_store(Y[t], aY)
            _fe_store(Z[t], aZ)
        _batch_to_affine(X, Y, Z, count, ax, ay, is_inf)
        for t in range(count):
            row = out[start + t]
            if is_inf[t]:
                row[:] = 0
                row[0] = _INFINITY_FLAG
            else:
                _write_affine(row, _fe_load(ax[t]), _fe_load(ay[t]))


@njit(cache=True)
def _g1_affine_from_xy(xy):
    """arkworks xy bytes (x || y, big-endian) -> Montgomery (6,) arrays x, y."""
    gx = np.empty(FP_LIMBS, dtype=np.uint64)
    gy = np.empty(FP_LIMBS, dtype=np.uint64)
    x = read_be48(xy, 0)
    y = read_be48(xy, 48)
    _fe_store(gx, fp_to_mont(x))
    _fe_store(gy, fp_to_mont(y))
    return gx, gy


@njit(cache=True)
def _g2_affine_from_xy(xy):
    """arkworks xy bytes (x.c0 || x.c1 || y.c0 || y.c1) -> Montgomery (2, 6) arrays x, y."""
    gx = np.empty((2, FP_LIMBS), dtype=np.uint64)
    gy = np.empty((2, FP_LIMBS), dtype=np.uint64)
    for c in range(2):
        x = read_be48(xy, c * FP_BYTES)
        y = read_be48(xy, (2 + c) * FP_BYTES)
        _fe_store(gx[c], fp_to_mont(x))
        _fe_store(gy[c], fp_to_mont(y))
    return gx, gy


# ---------------------------------------------------------------------------------------------
# Python API
# ---------------------------------------------------------------------------------------------

def _cost(n: int, w: int, with_table: bool) -> float:
    """Estimated work in mixed additions: W per scalar, ~1.7 per table entry (its addition plus
    its share of the batch normalisation)."""
    n_windows = math.ceil(_SCALAR_BITS / w)
    return n * n_windows + (1.7 * n_windows * (1 << (w - 1)) if with_table else 0.0)


def choose_window(n: int) -> int:
    """Window width minimising the estimated work for n scalars, table construction included."""
    return min(range(2, _MAX_WINDOW + 1), key=lambda w: _cost(n, w, True))


_R_LIMBS = np.array([(R_MODULUS >> (64 * i)) & ((1 << 64) - 1) for i in range(4)], dtype=np.uint64)


def _check_scalars(scalars: np.ndarray) -> np.ndarray:
    """Validate the (n, 4) uint64 little-endian canonical-Fr layout; returns a C-contiguous array."""
    s = np.ascontiguousarray(scalars)
    if s.ndim != 2 or s.shape[1] != 4 or s.dtype != np.uint64:
        raise ValueError(f"scalars must be an (n, 4) uint64 array, got {s.dtype} {s.shape}")
    lt = np.zeros(s.shape[0], dtype=bool)
    eq = np.ones(s.shape[0], dtype=bool)
    for limb in range(3, -1, -1):              # lexicographic compare with r, top limb first
        lt |= eq & (s[:, limb] < _R_LIMBS[limb])
        eq &= s[:, limb] == _R_LIMBS[limb]
    if not lt.all():
        bad = int(np.argmin(lt))
        raise ValueError(f"scalar {bad} is not a canonical Fr element (it is >= r)")
    return s


class _TableCache:
    """The window tables of the most recent bases (parameter generation reuses one G1 and one G2
    base for several queries of different sizes). A cached table with another width is reused
    when that is cheaper than building the best one."""

    def __init__(self, to_affine, size: int = 2) -> None:
        self._to_affine = to_affine
        self._size = size
        self._tables: dict[bytes, tuple[int, np.ndarray]] = {}
        self._lock = threading.Lock()

    def get(self, xy: bytes, n: int, window: int | None) -> tuple[int, np.ndarray]:
        with self._lock:
            cached = self._tables.get(xy)
            if cached is not None:
                w_c = cached[0]
                if window == w_c or (window is None and _cost(n, w_c, False) <= min(
                        _cost(n, w, True) for w in range(2, _MAX_WINDOW + 1))):
                    return cached
            w = window if window is not None else choose_window(n)
            gx, gy = self._to_affine(np.frombuffer(xy, dtype=np.uint8))
            entry = (w, _build_table(gx, gy, w))
            self._tables.pop(xy, None)
            self._tables[xy] = entry
            while len(self._tables) > self._size:
                self._tables.pop(next(iter(self._tables)))
            return entry

    def clear(self) -> None:
        with self._lock:
            self._tables.clear()


_G1_TABLES = _TableCache(_g1_affine_from_xy)
_G2_TABLES = _TableCache(_g2_affine_from_xy)


def _fixed_base(base, identity, tables: _TableCache, scalars: np.ndarray, width: int,
                window: int | None, group: str) -> np.ndarray:
    s = _check_scalars(scalars)
    n = s.shape[0]
    if window is not None and not 2 <= window <= 16:
        raise ValueError(f"window width must be in 2..16, got {window}")
    out = np.empty((n, width), dtype=np.uint8)
    if base == identity or n == 0:
        out[:] = 0
        out[:, 0] = _INFINITY_FLAG
        return out
    if not base.is_in_subgroup():
        raise ValueError(f"base point is not in the prime-order subgroup of {group}")
    w, table = tables.get(base.to_xy_bytes_be(), n, window)
    parallel_for(_fixed_base_rows, n, table, s, w, out, grain=_CHUNK)
    return out


def g1_fixed_base_batch(base: G1Point, scalars: np.ndarray, *, window: int | None = None) -> np.ndarray:
    """k_i * base for every row k_i of `scalars`, as an (n, 96) uint8 array of blstrs encodings.

    `scalars` is (n, 4) uint64, little-endian limbs of canonical Fr values (< r; ValueError
    otherwise). Zero scalars give the infinity encoding (0x40 then zeros). `base` must lie in the
    prime-order subgroup. `window` forces the window width (2..16) instead of the cost model.
    The tables of the last two bases are cached, so repeated calls with one base are cheap.
    """
    return _fixed_base(base, G1Point.identity(), _G1_TABLES, scalars, G1_UNCOMPRESSED_BYTES, window, "G1")


def g2_fixed_base_batch(base: G2Point, scalars: np.ndarray, *, window: int | None = None) -> np.ndarray:
    """k_i * base as an (n, 192) uint8 array of blstrs G2 encodings; see `g1_fixed_base_batch`."""
    return _fixed_base(base, G2Point.identity(), _G2_TABLES, scalars, G2_UNCOMPRESSED_BYTES, window, "G2")


#: Scalars per batch of the `*_into` functions: bounds their temporary copy of the encoded points.
_INTO_CHUNK = 1 << 20


def check_into_arguments(scalars: np.ndarray, out: np.ndarray, width: int) -> None:
    """The layouts a batch written into `out` needs (ValueError naming the problem): (n, 4) uint64
    scalars and a writable (n, width) uint8 `out`. Shared by every implementation of the `*_into`
    contract (the CPU's here, the GPU's in cuzk.backends.cuda.fixed_base)."""
    if not isinstance(scalars, np.ndarray) or scalars.ndim != 2 or scalars.shape[1] != 4 \
            or scalars.dtype != np.uint64:
        raise ValueError(f"scalars must be an (n, 4) uint64 array, got {getattr(scalars, 'dtype', None)} "
                         f"{getattr(scalars, 'shape', None)}")
    if not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.shape != (scalars.shape[0], width):
        raise ValueError(f"out must be a ({scalars.shape[0]}, {width}) uint8 array, got "
                         f"{getattr(out, 'dtype', None)} {getattr(out, 'shape', None)}")
    if not out.flags.writeable:
        raise ValueError("out is read-only")


def _into(batch, base, scalars: np.ndarray, out: np.ndarray, width: int) -> None:
    check_into_arguments(scalars, out, width)
    for lo in range(0, scalars.shape[0], _INTO_CHUNK):
        hi = min(lo + _INTO_CHUNK, scalars.shape[0])
        out[lo:hi] = batch(base, scalars[lo:hi])


def g1_fixed_base_into(base: G1Point, scalars: np.ndarray, out: np.ndarray) -> None:
    """`g1_fixed_base_batch` written into `out` ((n, 96) uint8, e.g. a view of a file being
    written), a million scalars at a time."""
    _into(g1_fixed_base_batch, base, scalars, out, G1_UNCOMPRESSED_BYTES)


def g2_fixed_base_into(base: G2Point, scalars: np.ndarray, out: np.ndarray) -> None:
    """`g2_fixed_base_batch` written into `out` ((n, 192) uint8)."""
    _into(g2_fixed_base_batch, base, scalars, out, G2_UNCOMPRESSED_BYTES)


def clear_table_cache() -> None:
    """Free the cached window tables (up to ~30 MB each for large G2 batches)."""
    _G1_TABLES.clear()
    _G2_TABLES.clear()


def scalars_from_ints(values) -> np.ndarray:
    """Python ints (each < 2^256) -> (n, 4) uint64 little-endian limbs (for callers and tests)."""
    raw = b"".join(int(v).to_bytes(32, "little") for v in values)
    return np.frombuffer(raw, dtype="<u8").astype(np.uint64).reshape(-1, 4)


def check_scalars(scalars: np.ndarray) -> np.ndarray:
    """`scalars` as a C-contiguous (n, 4) uint64 array of canonical Fr values; ValueError naming the
    first one >= r (for device implementations that share this module's input contract)."""
    return _check_scalars(scalars)


def window_table(base: G1Point | G2Point, w: int) -> np.ndarray:
    """The signed-window table of `base` for width w: table[i, j-1] = affine j * 2^(w*i) * base in
    Montgomery form, shape (ceil(256/w), 2^(w-1), 2, 6) for G1 and (..., 2, 2, 6) for G2 (x then y,
    each c0 then c1): the device's affine layout, so a GPU implementation can upload it as it is.
    `base` must be a non-identity point of the prime-order subgroup (ValueError otherwise)."""
    if not 2 <= w <= 16:
        raise ValueError(f"window width must be in 2..16, got {w}")
    g2 = isinstance(base, G2Point)
    group = "G2" if g2 else "G1"
    if base == (G2Point.identity() if g2 else G1Point.identity()):
        raise ValueError(f"the {group} base is the identity: it has no window table")
    if not base.is_in_subgroup():
        raise ValueError(f"base point is not in the prime-order subgroup of {group}")
    to_affine = _g2_affine_from_xy if g2 else _g1_affine_from_xy
    gx, gy = to_affine(np.frombuffer(base.to_xy_bytes_be(), dtype=np.uint8))
    return _build_table(gx, gy, w)
