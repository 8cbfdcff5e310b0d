"""Byte-exact blstrs / zcash encodings of G1 and G2 points (filecoin-proofs.md §9.1).

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
    fp_to_mont,
    int_to_limbs,
    parallel_for,
    read_be48,
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
from cuzk.field.constants import FP_BYTES, FP_MONT_R, P_MODULUS
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


@njit(nogil=True, cache=True)
def _g1_valid_rows(raw, ok, lo, hi):
    """ok[i] = row i encodes the identity or a point on y^2 = x^3 + 4 with canonical coordinates."""
    for i in range(lo, hi):
        row = raw[i]
        kind = _row_flags_ok(row)
        if kind != 2:
            ok[i] = kind == 1
            continue
        x = read_be48(row, 0)
        y = read_be48(row, 48)
        if not (fe_is_canonical(x) and fe_is_canonical(y)):
            ok[i] = False
            continue
        xm = fp_to_mont(x)
        ym = fp_to_mont(y)
        ok[i] = fe_eq(fe_square(ym), fe_add(fe_mul(fe_square(xm), xm), _G1_B_MONT))


@njit(nogil=True, cache=True)
def _g2_valid_rows(raw, ok, lo, hi):
    """ok[i] = row i (x.c1, x.c0, y.c1, y.c0) is the identity or on y^2 = x^3 + 4(u + 1)."""
    for i in range(lo, hi):
        row = raw[i]
        kind = _row_flags_ok(row)
        if kind != 2:
            ok[i] = kind == 1
            continue
        x = (read_be48(row, 48), read_be48(row, 0))
        y = (read_be48(row, 144), read_be48(row, 96))
        if not (fe_is_canonical(x) and fe_is_canonical(y)):
            ok[i] = False
            continue
        xm = (fp_to_mont(x[0]), fp_to_mont(x[1]))
        ym = (fp_to_mont(y[0]), fp_to_mont(y[1]))
        ok[i] = fe_eq(fe_square(ym), fe_add(fe_mul(fe_square(xm), xm), _G2_B_MONT))


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
