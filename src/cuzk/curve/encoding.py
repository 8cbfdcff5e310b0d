"""Byte-exact blstrs / zcash encodings of G1 and G2 points (docs/formats.md §1).

* G1 uncompressed, 96 B: x || y, 48-byte big-endian each.
* G2 uncompressed, 192 B: x.c1 || x.c0 || y.c1 || y.c0 (imaginary part first; py-arkworks' xy form
  puts c0 first, so the halves are swapped here).
* Compressed, 48 / 96 B: x only, with flags in the top bits of byte 0: 0x80 compressed, 0x40 point at
  infinity (every other bit zero), 0x20 "y is the lexicographically largest root".
* Infinity uncompressed: 0x40 then zeros (py-arkworks' xy form uses all zeros instead).

Decoders raise `PointDecodeError` naming the exact problem. `checked=True` means on the curve and
in the prime-order subgroup; `checked=False` still checks the curve equation (cheap here), which is
stricter than blstrs' `from_uncompressed_unchecked` (it checks nothing). `field`/`offset` are passed
through to the error so callers can say where the bytes came from.

Bulk functions serve .params files (millions of points, often a read-only memmap): flags and
identities are handled with numpy on the whole array and the per-point work is one py-arkworks
constructor call (0.4 us); `find_invalid_*_rows` validates a whole vector in numba.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from cuzk.curve.fp_kernels import (
    fe_add,
    fe_eq,
    fe_is_canonical,
    fe_mul,
    fe_square,
    fe_zero_like,
    fp_from_mont,
    fp_to_mont,
    int_to_limbs,
    load_fp,
    load_fp2,
    parallel_for,
    read_be48,
    store_fp,
    store_fp2,
    write_be48,
)
from cuzk.curve.points import (
    G1_COMPRESSED_BYTES,
    G1_UNCOMPRESSED_BYTES,
    G2_COMPRESSED_BYTES,
    G2_UNCOMPRESSED_BYTES,
    G1Point,
    G2Point,
)
from cuzk.errors import PointDecodeError
from cuzk.field.constants import FP_BYTES, FP_LIMBS, FP_MONT_R, P_MODULUS
from cuzk.field.fp import G1_B, G2_B

COMPRESSION_FLAG = 0x80
INFINITY_FLAG = 0x40
SIGN_FLAG = 0x20
_FLAG_MASK = 0xE0

# Rows handled per numpy/arkworks batch in the bulk decoders (bounds the temporary copies).
_BULK_ROWS = 1 << 16

_G1_IDENTITY_UNCOMPRESSED = bytes([INFINITY_FLAG]) + bytes(G1_UNCOMPRESSED_BYTES - 1)
_G2_IDENTITY_UNCOMPRESSED = bytes([INFINITY_FLAG]) + bytes(G2_UNCOMPRESSED_BYTES - 1)

# G2 coordinate names in blstrs byte order.
_G2_COORDS = ("x.c1", "x.c0", "y.c1", "y.c0")
# blstrs order (x.c1, x.c0, y.c1, y.c0) <-> arkworks order (x.c0, x.c1, y.c0, y.c1): its own inverse.
_G2_SWAP = [1, 0, 3, 2]


def _fail(what: str, field: str | None, offset: int | None) -> PointDecodeError:
    return PointDecodeError(what, field=field, offset=offset)


def _check_len(data: bytes, expected: int, kind: str, field: str | None, offset: int | None) -> None:
    if len(data) != expected:
        raise _fail(f"{kind} must be {expected} bytes, got {len(data)}", field, offset)


def _check_infinity(data: bytes, compressed: bool, allow_identity: bool, group: str,
                    field: str | None, offset: int | None) -> None:
    """Validate an encoding whose infinity flag is set (raises unless it is the exact identity)."""
    if compressed and data[0] & SIGN_FLAG:
        raise _fail("sign flag set on the point at infinity", field, offset)
    if data[0] & ~_FLAG_MASK & 0xFF or any(data[1:]):
        raise _fail("infinity flag set but the remaining bits are not all zero", field, offset)
    if not allow_identity:
        raise _fail(f"{group} point is the identity (point at infinity), which is not allowed here",
                    field, offset)


def _coordinate(data: bytes, start: int, name: str, field: str | None, offset: int | None,
                mask_flags: bool = False) -> int:
    raw = bytearray(data[start:start + FP_BYTES])
    if mask_flags:
        raw[0] &= ~_FLAG_MASK & 0xFF
    v = int.from_bytes(raw, "big")
    if v >= P_MODULUS:
        raise _fail(f"coordinate {name} is not canonical (>= p)", field, offset)
    return v


def _check_uncompressed_flags(data: bytes, field: str | None, offset: int | None) -> bool:
    """Flag rules of an uncompressed encoding; returns whether it is the point at infinity."""
    if data[0] & COMPRESSION_FLAG:
        raise _fail("compression flag set in an uncompressed encoding", field, offset)
    if data[0] & SIGN_FLAG:
        raise _fail("sign flag set in an uncompressed encoding", field, offset)
    return bool(data[0] & INFINITY_FLAG)


def _check_subgroup(point, checked: bool, group: str, field: str | None, offset: int | None) -> None:
    if checked and not point.is_in_subgroup():
        raise _fail(f"{group} point is on the curve but not in the prime-order subgroup", field, offset)


# ---------------------------------------------------------------------------------------------
# Single points
# ---------------------------------------------------------------------------------------------

def g1_to_compressed(p: G1Point) -> bytes:
    """48-byte zcash compressed form (py-arkworks already writes exactly this format)."""
    return p.to_compressed_bytes()


def g2_to_compressed(p: G2Point) -> bytes:
    """96-byte zcash compressed form: x.c1 || x.c0 with flags (py-arkworks' own format)."""
    return p.to_compressed_bytes()


def g1_to_uncompressed(p: G1Point) -> bytes:
    """96-byte blstrs uncompressed form x || y (0x40 then zeros for the identity)."""
    if p == G1Point.identity():
        return _G1_IDENTITY_UNCOMPRESSED
    return p.to_xy_bytes_be()


def g2_to_uncompressed(p: G2Point) -> bytes:
    """192-byte blstrs uncompressed form x.c1 || x.c0 || y.c1 || y.c0 (0x40 then zeros for identity)."""
    if p == G2Point.identity():
        return _G2_IDENTITY_UNCOMPRESSED
    xy = p.to_xy_bytes_be()
    return b"".join(xy[k * FP_BYTES:(k + 1) * FP_BYTES] for k in _G2_SWAP)


def g1_from_compressed(data: bytes, *, checked: bool = True, allow_identity: bool = True,
                       field: str | None = None, offset: int | None = None) -> G1Point:
    """Decode 48 compressed bytes; PointDecodeError says exactly what is wrong."""
    data = bytes(data)
    _check_len(data, G1_COMPRESSED_BYTES, "a compressed G1 point", field, offset)
    if not data[0] & COMPRESSION_FLAG:
        raise _fail("compression flag not set in a compressed encoding", field, offset)
    if data[0] & INFINITY_FLAG:
        _check_infinity(data, True, allow_identity, "G1", field, offset)
        return G1Point.identity()
    _coordinate(data, 0, "x", field, offset, mask_flags=True)
    try:
        point = G1Point.from_compressed_bytes_unchecked(data)
    except ValueError:
        raise _fail("x is not the x-coordinate of a point on the G1 curve", field, offset) from None
    _check_subgroup(point, checked, "G1", field, offset)
    return point


def g2_from_compressed(data: bytes, *, checked: bool = True, allow_identity: bool = True,
                       field: str | None = None, offset: int | None = None) -> G2Point:
    """Decode 96 compressed bytes (x.c1 || x.c0 with flags); see `g1_from_compressed`."""
    data = bytes(data)
    _check_len(data, G2_COMPRESSED_BYTES, "a compressed G2 point", field, offset)
    if not data[0] & COMPRESSION_FLAG:
        raise _fail("compression flag not set in a compressed encoding", field, offset)
    if data[0] & INFINITY_FLAG:
        _check_infinity(data, True, allow_identity, "G2", field, offset)
        return G2Point.identity()
    _coordinate(data, 0, "x.c1", field, offset, mask_flags=True)
    _coordinate(data, FP_BYTES, "x.c0", field, offset)
    try:
        point = G2Point.from_compressed_bytes_unchecked(data)
    except ValueError:
        raise _fail("x is not the x-coordinate of a point on the G2 curve", field, offset) from None
    _check_subgroup(point, checked, "G2", field, offset)
    return point


def g1_from_uncompressed(data: bytes, *, checked: bool = True, allow_identity: bool = True,
                         field: str | None = None, offset: int | None = None) -> G1Point:
    """Decode 96 uncompressed bytes (x || y); PointDecodeError says exactly what is wrong."""
    data = bytes(data)
    _check_len(data, G1_UNCOMPRESSED_BYTES, "an uncompressed G1 point", field, offset)
    if _check_uncompressed_flags(data, field, offset):
        _check_infinity(data, False, allow_identity, "G1", field, offset)
        return G1Point.identity()
    x = _coordinate(data, 0, "x", field, offset)
    y = _coordinate(data, FP_BYTES, "y", field, offset)
    if x == 0 and y == 0:   # arkworks would read all zeros as the identity; (0, 0) is not on the curve
        raise _fail("point (0, 0) is not on the G1 curve (the identity needs the infinity flag)",
                    field, offset)
    try:
        point = G1Point.from_xy_bytes_unchecked_be(data)
    except ValueError:
        raise _fail("point is not on the G1 curve y^2 = x^3 + 4", field, offset) from None
    _check_subgroup(point, checked, "G1", field, offset)
    return point


def g2_from_uncompressed(data: bytes, *, checked: bool = True, allow_identity: bool = True,
                         field: str | None = None, offset: int | None = None) -> G2Point:
    """Decode 192 uncompressed bytes (x.c1 || x.c0 || y.c1 || y.c0); see `g1_from_uncompressed`."""
    data = bytes(data)
    _check_len(data, G2_UNCOMPRESSED_BYTES, "an uncompressed G2 point", field, offset)
    if _check_uncompressed_flags(data, field, offset):
        _check_infinity(data, False, allow_identity, "G2", field, offset)
        return G2Point.identity()
    coords = [_coordinate(data, k * FP_BYTES, name, field, offset) for k, name in enumerate(_G2_COORDS)]
    if not any(coords):
        raise _fail("point (0, 0) is not on the G2 curve (the identity needs the infinity flag)",
                    field, offset)
    try:
        point = G2Point.from_xy_bytes_unchecked_be(
            b"".join(data[k * FP_BYTES:(k + 1) * FP_BYTES] for k in _G2_SWAP))
    except ValueError:
        raise _fail("point is not on the G2 curve y^2 = x^3 + 4(u + 1)", field, offset) from None
    _check_subgroup(point, checked, "G2", field, offset)
    return point


# ---------------------------------------------------------------------------------------------
# Bulk decoding / encoding
# ---------------------------------------------------------------------------------------------

def _check_raw(raw: np.ndarray, width: int, what: str) -> None:
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or raw.ndim != 2 or raw.shape[1] != width:
        shape = getattr(raw, "shape", None)
        dtype = getattr(raw, "dtype", type(raw).__name__)
        raise ValueError(f"{what} needs an (n, {width}) uint8 array, got {dtype} {shape}")


def _to_arkworks_order(rows: np.ndarray, swap: bool) -> np.ndarray:
    """A writable copy of (n, width) encodings; for G2 with the c1/c0 halves swapped (numpy, whole
    array at once: blstrs c1-first <-> arkworks c0-first)."""
    if not swap:
        return rows.copy()
    return rows.reshape(-1, 4, FP_BYTES)[:, _G2_SWAP, :].reshape(rows.shape[0], -1)


def _bulk_flags(chunk: np.ndarray, lo: int, decode_one, field: str | None, offset: int | None,
                width: int) -> np.ndarray:
    """Validate flags of rows chunk (absolute row index lo + i); returns the identity-row mask.

    Rows with bad flags, with an infinity flag and stray bits, or all-zero without the infinity
    flag (which py-arkworks would silently read as the identity) are rejected through the
    single-point decoder, so the message is the same as for one point.
    """
    b0 = chunk[:, 0]
    inf = (b0 & INFINITY_FLAG) != 0
    bad = (b0 & (COMPRESSION_FLAG | SIGN_FLAG)) != 0
    inf_rows = np.flatnonzero(inf)
    if inf_rows.size:
        sub = chunk[inf_rows]
        stray = ((sub[:, 0] & 0x3F) != 0) | sub[:, 1:].any(axis=1)
        bad[inf_rows[stray]] = True
    plain = np.flatnonzero(~inf)
    if plain.size:
        zero = ~chunk[plain].any(axis=1)
        bad[plain[zero]] = True
    if bad.any():
        _raise_row(chunk, lo, int(np.argmax(bad)), decode_one, field, offset, width)
    return inf


def _raise_row(chunk: np.ndarray, lo: int, i: int, decode_one, field: str | None, offset: int | None,
               width: int) -> None:
    """Raise the precise PointDecodeError of row lo + i (the caller knows it is invalid)."""
    row = lo + i
    where = f"{field}[{row}]" if field is not None else f"row {row}"
    off = None if offset is None else offset + row * width
    decode_one(bytes(chunk[i]), checked=False, allow_identity=True, field=where, offset=off)
    raise _fail("invalid point encoding", where, off)  # decode_one raised for every known defect


def _points_from_uncompressed(raw: np.ndarray, width: int, point_cls, decode_one, swap: bool,
                              field: str | None, offset: int | None) -> list:
    _check_raw(raw, width, f"{point_cls.__name__} bulk decoding")
    out: list = []
    parse = point_cls.from_xy_bytes_unchecked_be
    for lo in range(0, raw.shape[0], _BULK_ROWS):
        chunk = np.asarray(raw[lo:lo + _BULK_ROWS])
        inf = _bulk_flags(chunk, lo, decode_one, field, offset, width)
        xy = _to_arkworks_order(chunk, swap)
        xy[inf] = 0            # arkworks' xy form of the identity is all zeros
        buf = xy.tobytes()
        try:
            out.extend([parse(buf[o:o + width]) for o in range(0, len(buf), width)])
        except ValueError:
            for i in range(chunk.shape[0]):   # locate the row; only on the error path
                try:
                    parse(buf[i * width:(i + 1) * width])
                except ValueError:
                    _raise_row(chunk, lo, i, decode_one, field, offset, width)
            raise
    return out


def g1_points_from_uncompressed(raw: np.ndarray, *, field: str | None = None,
                                offset: int | None = None) -> list[G1Point]:
    """Decode an (n, 96) uint8 array (may be a read-only memmap) to G1 points, on-curve checked.

    No subgroup check (like bellperson's prover reading parameters; see `find_invalid_g1_rows`).
    A bad row raises PointDecodeError naming the row (`field[row]`, byte offset from `offset`).
    """
    return _points_from_uncompressed(raw, G1_UNCOMPRESSED_BYTES, G1Point, g1_from_uncompressed, False,
                                     field, offset)


def g2_points_from_uncompressed(raw: np.ndarray, *, field: str | None = None,
                                offset: int | None = None) -> list[G2Point]:
    """Decode an (n, 192) uint8 array to G2 points; see `g1_points_from_uncompressed`."""
    return _points_from_uncompressed(raw, G2_UNCOMPRESSED_BYTES, G2Point, g2_from_uncompressed, True,
                                     field, offset)


def _points_to_uncompressed(points: Sequence, width: int, swap: bool) -> np.ndarray:
    if len(points) == 0:
        return np.zeros((0, width), dtype=np.uint8)
    out = np.frombuffer(b"".join(p.to_xy_bytes_be() for p in points), dtype=np.uint8).reshape(-1, width)
    out = _to_arkworks_order(out, swap)   # the swap is its own inverse; always a writable copy
    out[~out.any(axis=1), 0] = INFINITY_FLAG   # arkworks writes the identity as all zeros
    return out


def g1_points_to_uncompressed(points: Sequence[G1Point]) -> np.ndarray:
    """(n, 96) uint8 array of blstrs uncompressed encodings (one inversion per point in arkworks)."""
    return _points_to_uncompressed(points, G1_UNCOMPRESSED_BYTES, False)


def g2_points_to_uncompressed(points: Sequence[G2Point]) -> np.ndarray:
    """(n, 192) uint8 array of blstrs uncompressed G2 encodings."""
    return _points_to_uncompressed(points, G2_UNCOMPRESSED_BYTES, True)


# ---------------------------------------------------------------------------------------------
# Bulk validation in numba
# ---------------------------------------------------------------------------------------------

_G1_B_MONT = tuple(np.uint64(v) for v in int_to_limbs(G1_B * FP_MONT_R % P_MODULUS))
_G2_B_MONT = tuple(tuple(np.uint64(v) for v in int_to_limbs(c * FP_MONT_R % P_MODULUS)) for c in G2_B)


@njit(inline="always", cache=True)
def _row_flags_ok(row):
    """0: bad flags, 1: a well-formed identity, 2: an ordinary point to check."""
    b0 = row[0]
    if b0 & np.uint8(COMPRESSION_FLAG | SIGN_FLAG):
        return 0
    if b0 & np.uint8(INFINITY_FLAG):
        if b0 != np.uint8(INFINITY_FLAG):
            return 0
        for k in range(1, row.shape[0]):
            if row[k]:
                return 0
        return 1
    return 2


@njit(inline="always", cache=True)
def _g1_row(row):
    """(valid, x, y) of one encoding: x, y in Montgomery form (zeros for the identity)."""
    x = read_be48(row, 0)
    y = read_be48(row, 48)
    kind = _row_flags_ok(row)
    if kind != 2:
        zero = fe_zero_like(x)
        return kind == 1, zero, zero
    if not (fe_is_canonical(x) and fe_is_canonical(y)):
        return False, x, y
    xm = fp_to_mont(x)
    ym = fp_to_mont(y)
    return fe_eq(fe_square(ym), fe_add(fe_mul(fe_square(xm), xm), _G1_B_MONT)), xm, ym


@njit(inline="always", cache=True)
def _g2_row(row):
    """(valid, x, y) of one encoding (x.c1, x.c0, y.c1, y.c0): Fp2 pairs (c0, c1), Montgomery form."""
    x = (read_be48(row, 48), read_be48(row, 0))
    y = (read_be48(row, 144), read_be48(row, 96))
    kind = _row_flags_ok(row)
    if kind != 2:
        zero = fe_zero_like(x)
        return kind == 1, zero, zero
    if not (fe_is_canonical(x) and fe_is_canonical(y)):
        return False, x, y
    xm = (fp_to_mont(x[0]), fp_to_mont(x[1]))
    ym = (fp_to_mont(y[0]), fp_to_mont(y[1]))
    return fe_eq(fe_square(ym), fe_add(fe_mul(fe_square(xm), xm), _G2_B_MONT)), xm, ym


@njit(nogil=True, cache=True)
def _g1_valid_rows(raw, ok, lo, hi):
    """ok[i] = row i encodes the identity or a point on y^2 = x^3 + 4 with canonical coordinates."""
    for i in range(lo, hi):
        ok[i] = _g1_row(raw[i])[0]


@njit(nogil=True, cache=True)
def _g2_valid_rows(raw, ok, lo, hi):
    """ok[i] = row i (x.c1, x.c0, y.c1, y.c0) is the identity or on y^2 = x^3 + 4(u + 1)."""
    for i in range(lo, hi):
        ok[i] = _g2_row(raw[i])[0]


@njit(nogil=True, cache=True)
def _g1_affine_rows(raw, out, ok, lo, hi):
    """Valid rows to blst's affine layout: out (2n, 6) gets x at 2i and y at 2i + 1."""
    for i in range(lo, hi):
        good, x, y = _g1_row(raw[i])
        ok[i] = good
        store_fp(out, 2 * i, x)
        store_fp(out, 2 * i + 1, y)


@njit(nogil=True, cache=True)
def _g2_affine_rows(raw, out, ok, lo, hi):
    """Valid rows to blst's affine layout: out (2n, 2, 6) gets x at 2i and y at 2i + 1 (c0 first)."""
    for i in range(lo, hi):
        good, x, y = _g2_row(raw[i])
        ok[i] = good
        store_fp2(out, 2 * i, x)
        store_fp2(out, 2 * i + 1, y)


def _affine_limbs(raw: np.ndarray, width: int, kernel, words: int, decode_one, field: str | None,
                  offset: int | None) -> np.ndarray:
    _check_raw(raw, width, "affine conversion")
    n = raw.shape[0]
    out = np.empty((n, words), dtype=np.uint64)
    ok = np.empty(n, dtype=np.bool_)
    if n:
        parallel_for(kernel, n, raw, _limb_rows(out, words == 24), ok, grain=4096)
    if n and not ok.all():
        bad = int(np.argmin(ok))
        _raise_row(np.asarray(raw[bad:bad + 1]), bad, 0, decode_one, field, offset, width)
    return out


def g1_affine_limbs_from_uncompressed(raw: np.ndarray, *, field: str | None = None,
                                      offset: int | None = None) -> np.ndarray:
    """(n, 96) uint8 encodings -> (n, 12) uint64: x, y as Montgomery limbs (blst's affine layout).

    The checks and errors are those of `g1_points_from_uncompressed` (flags, canonical coordinates,
    the curve equation; no subgroup check). The identity becomes all zeros, as blst expects.
    """
    return _affine_limbs(raw, G1_UNCOMPRESSED_BYTES, _g1_affine_rows, 12, g1_from_uncompressed, field, offset)


def g2_affine_limbs_from_uncompressed(raw: np.ndarray, *, field: str | None = None,
                                      offset: int | None = None) -> np.ndarray:
    """(n, 192) uint8 encodings -> (n, 24) uint64: x.c0, x.c1, y.c0, y.c1 as Montgomery limbs."""
    return _affine_limbs(raw, G2_UNCOMPRESSED_BYTES, _g2_affine_rows, 24, g2_from_uncompressed, field, offset)


# --- blst's affine layout ((n, 12) / (n, 24) uint64 Montgomery limbs; the identity all zeros) ---------

#: Why a row of affine limbs is invalid (index = the kernels' status code).
AFFINE_LIMB_PROBLEMS = ("", "has a coordinate that is not below q", "is not on the curve")


@njit(inline="always", cache=True)
def _all_zero(a, b):
    z = np.uint64(0)
    for k in range(FP_LIMBS):
        z |= a[k] | b[k]
    return z == 0


@njit(nogil=True, cache=True)
def _g1_limb_status(limbs, status, check_curve, lo, hi):
    """status[i]: 0 valid (or the identity), 1 a coordinate >= q, 2 off y^2 = x^3 + 4."""
    for i in range(lo, hi):
        x = load_fp(limbs, 2 * i)
        y = load_fp(limbs, 2 * i + 1)
        if not (fe_is_canonical(x) and fe_is_canonical(y)):
            status[i] = 1
        elif check_curve and not _all_zero(x, y) and \
                not fe_eq(fe_square(y), fe_add(fe_mul(fe_square(x), x), _G1_B_MONT)):
            status[i] = 2
        else:
            status[i] = 0


@njit(nogil=True, cache=True)
def _g2_limb_status(limbs, status, check_curve, lo, hi):
    """As for G1, on y^2 = x^3 + 4(u + 1); Fp2 rows are (c0, c1)."""
    for i in range(lo, hi):
        x = load_fp2(limbs, 2 * i)
        y = load_fp2(limbs, 2 * i + 1)
        if not (fe_is_canonical(x) and fe_is_canonical(y)):
            status[i] = 1
        elif check_curve and not (_all_zero(x[0], x[1]) and _all_zero(y[0], y[1])) and \
                not fe_eq(fe_square(y), fe_add(fe_mul(fe_square(x), x), _G2_B_MONT)):
            status[i] = 2
        else:
            status[i] = 0


def _limb_rows(limbs: np.ndarray, is_g2: bool) -> np.ndarray:
    words = 24 if is_g2 else 12
    if limbs.dtype != np.uint64 or limbs.ndim != 2 or limbs.shape[1] != words:
        raise ValueError(f"affine limbs must be an (n, {words}) uint64 array, got {limbs.dtype} {limbs.shape}")
    limbs = np.ascontiguousarray(limbs)
    n = limbs.shape[0]
    return limbs.reshape(2 * n, 2, FP_LIMBS) if is_g2 else limbs.reshape(2 * n, FP_LIMBS)


def find_invalid_affine_limbs(limbs: np.ndarray, *, is_g2: bool, check_curve: bool = True) -> tuple[int, str]:
    """(first invalid row, what is wrong with it) of affine limbs, or (-1, "").

    Checks canonical coordinates and, with check_curve, the curve equation, in the Montgomery domain
    (no conversion: snarkjs stores points this way). All-zero rows are the identity.
    """
    rows = _limb_rows(limbs, is_g2)
    n = limbs.shape[0]
    status = np.zeros(n, dtype=np.uint8)
    if n:
        parallel_for(_g2_limb_status if is_g2 else _g1_limb_status, n, rows, status, check_curve, grain=4096)
    bad = np.flatnonzero(status)
    if not bad.size:
        return -1, ""
    return int(bad[0]), AFFINE_LIMB_PROBLEMS[int(status[bad[0]])]


@njit(nogil=True, cache=True)
def _g1_encode_limb_rows(limbs, out, lo, hi):
    for i in range(lo, hi):
        x = load_fp(limbs, 2 * i)
        y = load_fp(limbs, 2 * i + 1)
        if _all_zero(x, y):
            out[i, :] = 0
            out[i, 0] = INFINITY_FLAG
            continue
        write_be48(out[i], 0, fp_from_mont(x))
        write_be48(out[i], 48, fp_from_mont(y))


@njit(nogil=True, cache=True)
def _g2_encode_limb_rows(limbs, out, lo, hi):
    for i in range(lo, hi):
        x = load_fp2(limbs, 2 * i)
        y = load_fp2(limbs, 2 * i + 1)
        if _all_zero(x[0], x[1]) and _all_zero(y[0], y[1]):
            out[i, :] = 0
            out[i, 0] = INFINITY_FLAG
            continue
        write_be48(out[i], 0, fp_from_mont(x[1]))     # blstrs: imaginary part first
        write_be48(out[i], 48, fp_from_mont(x[0]))
        write_be48(out[i], 96, fp_from_mont(y[1]))
        write_be48(out[i], 144, fp_from_mont(y[0]))


def uncompressed_from_affine_limbs(limbs: np.ndarray, *, is_g2: bool) -> np.ndarray:
    """Affine limbs (valid ones) -> (n, 96) / (n, 192) uint8 blstrs uncompressed encodings."""
    rows = _limb_rows(limbs, is_g2)
    n = limbs.shape[0]
    out = np.empty((n, G2_UNCOMPRESSED_BYTES if is_g2 else G1_UNCOMPRESSED_BYTES), dtype=np.uint8)
    if n:
        parallel_for(_g2_encode_limb_rows if is_g2 else _g1_encode_limb_rows, n, rows, out, grain=4096)
    return out


def _find_invalid(raw: np.ndarray, width: int, kernel, point_cls, swap: bool, check_subgroup: bool) -> int:
    _check_raw(raw, width, "point validation")
    n = raw.shape[0]
    ok = np.empty(n, dtype=np.bool_)
    parallel_for(kernel, n, raw, ok, grain=4096)
    first_bad = int(np.argmin(ok)) if n and not ok.all() else -1
    if not check_subgroup:
        return first_bad
    # Subgroup membership via py-arkworks (~50 us per G1 point), only for rows before the first
    # otherwise-invalid one.
    limit = n if first_bad < 0 else first_bad
    for lo in range(0, limit, _BULK_ROWS):
        chunk = np.asarray(raw[lo:min(limit, lo + _BULK_ROWS)])
        xy = _to_arkworks_order(chunk, swap)
        inf = (chunk[:, 0] & INFINITY_FLAG) != 0
        xy[inf] = 0
        buf = xy.tobytes()
        for i in range(chunk.shape[0]):
            if not inf[i] and not point_cls.from_xy_bytes_unchecked_be(buf[i * width:(i + 1) * width]) \
                    .is_in_subgroup():
                return lo + i
    return first_bad


def find_invalid_g1_rows(raw: np.ndarray, *, check_subgroup: bool = False) -> int:
    """Index of the first row of an (n, 96) uint8 array that is not a valid G1 encoding, or -1.

    Checks flags, canonical coordinates and the curve equation in numba (~0.5 us per row per
    thread); with check_subgroup also prime-order subgroup membership (py-arkworks, ~50 us per row).
    """
    return _find_invalid(raw, G1_UNCOMPRESSED_BYTES, _g1_valid_rows, G1Point, False, check_subgroup)


def find_invalid_g2_rows(raw: np.ndarray, *, check_subgroup: bool = False) -> int:
    """Index of the first row of an (n, 192) uint8 array that is not a valid G2 encoding, or -1."""
    return _find_invalid(raw, G2_UNCOMPRESSED_BYTES, _g2_valid_rows, G2Point, True, check_subgroup)
