"""blstrs/zcash point encodings: known vectors, round trips, every rejection reason, bulk paths,
and an independent cross-check with py_ecc (whose points we encode ourselves from affine ints)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from py_ecc import optimized_bls12_381 as ecc

from cuzk.curve import encoding as enc
from cuzk.curve.points import G1Point, G2Point, Scalar
from cuzk.errors import FormatError, PointDecodeError
from cuzk.field import fp as fpy
from cuzk.field.constants import P_MODULUS, R_MODULUS

P = P_MODULUS
G1_GEN_COMPRESSED = (
    "97f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb"
)
G2_GEN_COMPRESSED = (
    "93e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e"
    "024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8"
)


def scalar(k: int) -> Scalar:
    return Scalar.from_le_bytes((k % R_MODULUS).to_bytes(32, "little"))


def be(v: int) -> bytes:
    return v.to_bytes(48, "big")


def g1_point(k: int) -> G1Point:
    return G1Point() * scalar(k)


def g2_point(k: int) -> G2Point:
    return G2Point() * scalar(k)


rng = random.Random(1234)
G1_POINTS = [g1_point(k) for k in [1, 2, 3, R_MODULUS - 1] + [rng.randrange(R_MODULUS) for _ in range(12)]]
G2_POINTS = [g2_point(k) for k in [1, 2, R_MODULUS - 1] + [rng.randrange(R_MODULUS) for _ in range(6)]]


def g1_xy(p: G1Point) -> tuple[int, int]:
    b = p.to_xy_bytes_be()
    return int.from_bytes(b[:48], "big"), int.from_bytes(b[48:], "big")


def g1_off_subgroup() -> bytes:
    """Uncompressed bytes of a point on y^2 = x^3 + 4 that is not in the order-r subgroup."""
    for x in range(1, 1000):
        y = fpy.fp_sqrt(x**3 + 4)
        if y is None:
            continue
        data = be(x) + be(y)
        if not G1Point.from_xy_bytes_unchecked_be(data).is_in_subgroup():
            return data
    raise AssertionError("no off-subgroup G1 point found")


def g2_off_subgroup() -> bytes:
    """blstrs-order uncompressed bytes of a point on the G2 curve outside the order-r subgroup."""
    for x0 in range(1, 1000):
        x = (x0, 1)
        y = fpy.fp2_sqrt(fpy.fp2_add(fpy.fp2_mul(fpy.fp2_square(x), x), fpy.G2_B))
        if y is None:
            continue
        data = be(x[1]) + be(x[0]) + be(y[1]) + be(y[0])
        if not enc.g2_from_uncompressed(data, checked=False).is_in_subgroup():
            return data
    raise AssertionError("no off-subgroup G2 point found")


# ------------------------------------------------------------------------------------------------
# Known vectors
# ------------------------------------------------------------------------------------------------

def test_generator_compressed_vectors() -> None:
    assert enc.g1_to_compressed(G1Point()).hex() == G1_GEN_COMPRESSED
    assert enc.g2_to_compressed(G2Point()).hex() == G2_GEN_COMPRESSED
    assert enc.g1_from_compressed(bytes.fromhex(G1_GEN_COMPRESSED)) == G1Point()
    assert enc.g2_from_compressed(bytes.fromhex(G2_GEN_COMPRESSED)) == G2Point()


def test_generator_uncompressed_layout() -> None:
    g1 = enc.g1_to_uncompressed(G1Point())
    assert g1[:48].hex() == "1" + G1_GEN_COMPRESSED[1:]  # x without the flag bits
    g2 = enc.g2_to_uncompressed(G2Point())
    # x.c1 then x.c0, as in the compressed form (flags stripped)
    assert g2[:96].hex() == "1" + G2_GEN_COMPRESSED[1:]


def test_identity_encodings() -> None:
    assert enc.g1_to_compressed(G1Point.identity()) == bytes([0xC0]) + bytes(47)
    assert enc.g2_to_compressed(G2Point.identity()) == bytes([0xC0]) + bytes(95)
    assert enc.g1_to_uncompressed(G1Point.identity()) == bytes([0x40]) + bytes(95)
    assert enc.g2_to_uncompressed(G2Point.identity()) == bytes([0x40]) + bytes(191)
    assert enc.g1_from_compressed(bytes([0xC0]) + bytes(47)) == G1Point.identity()
    assert enc.g2_from_compressed(bytes([0xC0]) + bytes(95)) == G2Point.identity()
    assert enc.g1_from_uncompressed(bytes([0x40]) + bytes(95)) == G1Point.identity()
    assert enc.g2_from_uncompressed(bytes([0x40]) + bytes(191)) == G2Point.identity()


# ------------------------------------------------------------------------------------------------
# Round trips
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("point", [*G1_POINTS, G1Point.identity()])
def test_g1_round_trips(point: G1Point) -> None:
    c = enc.g1_to_compressed(point)
    u = enc.g1_to_uncompressed(point)
    assert len(c) == 48 and len(u) == 96
    assert enc.g1_from_compressed(c) == point
    assert enc.g1_from_compressed(c, checked=False) == point
    assert enc.g1_from_uncompressed(u) == point
    assert enc.g1_from_uncompressed(u, checked=False) == point
    assert c == point.to_compressed_bytes()


@pytest.mark.parametrize("point", [*G2_POINTS, G2Point.identity()])
def test_g2_round_trips(point: G2Point) -> None:
    c = enc.g2_to_compressed(point)
    u = enc.g2_to_uncompressed(point)
    assert len(c) == 96 and len(u) == 192
    assert enc.g2_from_compressed(c) == point
    assert enc.g2_from_uncompressed(u) == point
    assert enc.g2_from_uncompressed(u, checked=False) == point
    if point != G2Point.identity():
        xy = point.to_xy_bytes_be()   # arkworks: x.c0 x.c1 y.c0 y.c1
        assert u == xy[48:96] + xy[:48] + xy[144:] + xy[96:144]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, R_MODULUS - 1))
def test_g1_round_trip_property(k: int) -> None:
    p = g1_point(k)
    assert enc.g1_from_uncompressed(enc.g1_to_uncompressed(p)) == p
    assert enc.g1_from_compressed(enc.g1_to_compressed(p)) == p


def test_decoders_accept_bytearray_and_memoryview() -> None:
    u = enc.g1_to_uncompressed(G1_POINTS[3])
    assert enc.g1_from_uncompressed(bytearray(u)) == G1_POINTS[3]
    assert enc.g1_from_uncompressed(memoryview(u)) == G1_POINTS[3]


# ------------------------------------------------------------------------------------------------
# Rejections (one crafted byte string per reason)
# ------------------------------------------------------------------------------------------------

def _rejects(decode, data: bytes, reason: str, **kw) -> PointDecodeError:
    with pytest.raises(PointDecodeError, match=reason) as info:
        decode(data, **kw)
    assert isinstance(info.value, FormatError)
    return info.value


@pytest.mark.parametrize(("decode", "size"), [
    (enc.g1_from_compressed, 48), (enc.g2_from_compressed, 96),
    (enc.g1_from_uncompressed, 96), (enc.g2_from_uncompressed, 192),
])
@pytest.mark.parametrize("delta", [-1, 1])
def test_wrong_length(decode, size: int, delta: int) -> None:
    _rejects(decode, bytes([0xC0]) + bytes(size + delta - 1), f"must be {size} bytes")


def test_error_carries_field_and_offset() -> None:
    err = _rejects(enc.g1_from_uncompressed, bytes(95), "must be 96 bytes", field="vk.alpha_g1", offset=12)
    assert err.field == "vk.alpha_g1" and err.offset == 12
    assert "offset 12" in str(err) and "vk.alpha_g1" in str(err)


def test_compression_flag_rules() -> None:
    u1 = bytearray(enc.g1_to_uncompressed(G1_POINTS[0]))
    u1[0] |= 0x80
    _rejects(enc.g1_from_uncompressed, bytes(u1), "compression flag set in an uncompressed")
    u2 = bytearray(enc.g2_to_uncompressed(G2_POINTS[0]))
    u2[0] |= 0x80
    _rejects(enc.g2_from_uncompressed, bytes(u2), "compression flag set in an uncompressed")
    c1 = bytearray(enc.g1_to_compressed(G1_POINTS[0]))
    c1[0] &= 0x7F
    _rejects(enc.g1_from_compressed, bytes(c1), "compression flag not set")
    c2 = bytearray(enc.g2_to_compressed(G2_POINTS[0]))
    c2[0] &= 0x7F
    _rejects(enc.g2_from_compressed, bytes(c2), "compression flag not set")


def test_sign_flag_in_uncompressed() -> None:
    u = bytearray(enc.g1_to_uncompressed(G1_POINTS[1]))
    u[0] |= 0x20
    _rejects(enc.g1_from_uncompressed, bytes(u), "sign flag set in an uncompressed")
    u2 = bytearray(enc.g2_to_uncompressed(G2_POINTS[1]))
    u2[0] |= 0x20
    _rejects(enc.g2_from_uncompressed, bytes(u2), "sign flag set in an uncompressed")


@pytest.mark.parametrize(("decode", "head", "size"), [
    (enc.g1_from_compressed, 0xC0, 48), (enc.g2_from_compressed, 0xC0, 96),
    (enc.g1_from_uncompressed, 0x40, 96), (enc.g2_from_uncompressed, 0x40, 192),
])
def test_infinity_with_stray_bits(decode, head: int, size: int) -> None:
    _rejects(decode, bytes([head | 0x01]) + bytes(size - 1), "remaining bits are not all zero")
    _rejects(decode, bytes([head]) + bytes(size - 2) + b"\x01", "remaining bits are not all zero")
    # an ordinary point's bytes with the infinity flag added
    _rejects(decode, bytes([head]) + bytes(size - 2) + b"\x80", "remaining bits are not all zero")


@pytest.mark.parametrize(("decode", "size"), [(enc.g1_from_compressed, 48), (enc.g2_from_compressed, 96)])
def test_sign_flag_on_infinity(decode, size: int) -> None:
    _rejects(decode, bytes([0xE0]) + bytes(size - 1), "sign flag set on the point at infinity")


@pytest.mark.parametrize(("decode", "data"), [
    (enc.g1_from_compressed, bytes([0xC0]) + bytes(47)),
    (enc.g2_from_compressed, bytes([0xC0]) + bytes(95)),
    (enc.g1_from_uncompressed, bytes([0x40]) + bytes(95)),
    (enc.g2_from_uncompressed, bytes([0x40]) + bytes(191)),
])
def test_identity_not_allowed(decode, data: bytes) -> None:
    _rejects(decode, data, "identity", allow_identity=False)
    decode(data, allow_identity=True)


def test_non_canonical_coordinates() -> None:
    x, y = g1_xy(G1_POINTS[0])
    _rejects(enc.g1_from_uncompressed, be(P) + be(y), "coordinate x is not canonical")
    _rejects(enc.g1_from_uncompressed, be(x) + be(y + P), "coordinate y is not canonical")
    _rejects(enc.g1_from_uncompressed, be(x) + b"\x1f" + b"\xff" * 47, "coordinate y is not canonical")
    c = bytearray(be(P + 3))
    assert c[0] & 0xE0 == 0          # p + 3 < 2^381: the flag bits stay free
    c[0] |= 0x80
    _rejects(enc.g1_from_compressed, bytes(c), "coordinate x is not canonical")
    u2 = enc.g2_to_uncompressed(G2_POINTS[0])
    for k, name in enumerate(["x.c1", "x.c0", "y.c1", "y.c0"]):
        bad = u2[:48 * k] + be(P + k) + u2[48 * (k + 1):]     # p + k < 2^381: flags stay clear
        _rejects(enc.g2_from_uncompressed, bad, f"coordinate {name} is not canonical")
    c2 = bytearray(enc.g2_to_compressed(G2_POINTS[0]))
    c2[48:] = be(int.from_bytes(c2[48:], "big") + P)
    _rejects(enc.g2_from_compressed, bytes(c2), "coordinate x.c0 is not canonical")


def test_not_on_curve() -> None:
    x, y = g1_xy(G1_POINTS[2])
    _rejects(enc.g1_from_uncompressed, be(x) + be((y + 1) % P), "not on the G1 curve")
    _rejects(enc.g1_from_uncompressed, bytes(96), r"\(0, 0\) is not on the G1 curve")
    _rejects(enc.g2_from_uncompressed, bytes(192), r"\(0, 0\) is not on the G2 curve")
    u2 = bytearray(enc.g2_to_uncompressed(G2_POINTS[2]))
    u2[-1] ^= 1
    _rejects(enc.g2_from_uncompressed, bytes(u2), "not on the G2 curve")
    # compressed: an x with x^3 + 4 a non-square
    x_bad = next(v for v in range(1, 100) if fpy.fp_sqrt(v**3 + 4) is None)
    _rejects(enc.g1_from_compressed, bytes([0x80]) + be(x_bad)[1:], "not the x-coordinate")
    x2 = next(v for v in range(1, 100)
              if fpy.fp2_sqrt(fpy.fp2_add(fpy.fp2_mul(fpy.fp2_square((v, 0)), (v, 0)), fpy.G2_B)) is None)
    _rejects(enc.g2_from_compressed, bytes([0x80]) + bytes(47) + be(x2), "not the x-coordinate")


def test_not_in_subgroup() -> None:
    g1_bad = g1_off_subgroup()
    _rejects(enc.g1_from_uncompressed, g1_bad, "not in the prime-order subgroup")
    off = enc.g1_from_uncompressed(g1_bad, checked=False)        # on-curve only: accepted
    c = off.to_compressed_bytes()
    _rejects(enc.g1_from_compressed, c, "not in the prime-order subgroup")
    assert enc.g1_from_compressed(c, checked=False) == off
    g2_bad = g2_off_subgroup()
    _rejects(enc.g2_from_uncompressed, g2_bad, "not in the prime-order subgroup")
    off2 = enc.g2_from_uncompressed(g2_bad, checked=False)
    _rejects(enc.g2_from_compressed, off2.to_compressed_bytes(), "not in the prime-order subgroup")


def test_flipped_sign_flag_gives_negation() -> None:
    for p in G1_POINTS[:4]:
        c = bytearray(enc.g1_to_compressed(p))
        c[0] ^= 0x20
        assert enc.g1_from_compressed(bytes(c)) == -p
    for p in G2_POINTS[:3]:
        c = bytearray(enc.g2_to_compressed(p))
        c[0] ^= 0x20
        assert enc.g2_from_compressed(bytes(c)) == -p


# ------------------------------------------------------------------------------------------------
# Independent cross-check with py_ecc
# ------------------------------------------------------------------------------------------------

def _ecc_g1_encodings(pt) -> tuple[bytes, bytes]:
    if ecc.is_inf(pt):
        return bytes([0xC0]) + bytes(47), bytes([0x40]) + bytes(95)
    x, y = (c.n for c in ecc.normalize(pt))
    comp = bytearray(be(x))
    comp[0] |= 0x80 | (0x20 if y > (P - 1) // 2 else 0)
    return bytes(comp), be(x) + be(y)


def _ecc_g2_encodings(pt) -> tuple[bytes, bytes]:
    if ecc.is_inf(pt):
        return bytes([0xC0]) + bytes(95), bytes([0x40]) + bytes(191)
    x, y = ecc.normalize(pt)
    (x0, x1), (y0, y1) = x.coeffs, y.coeffs
    larger = y1 > (P - 1) // 2 if y1 != 0 else y0 > (P - 1) // 2
    comp = bytearray(be(x1) + be(x0))
    comp[0] |= 0x80 | (0x20 if larger else 0)
    return bytes(comp), be(x1) + be(x0) + be(y1) + be(y0)


@pytest.mark.parametrize("k", [1, 2, 7, R_MODULUS - 1, 0x1234567890ABCDEF1234567890ABCDEF, 0])
def test_py_ecc_cross_check_g1(k: int) -> None:
    comp, unc = _ecc_g1_encodings(ecc.multiply(ecc.G1, k))
    ours = g1_point(k)
    assert enc.g1_to_compressed(ours) == comp
    assert enc.g1_to_uncompressed(ours) == unc
    assert enc.g1_from_compressed(comp) == ours
    assert enc.g1_from_uncompressed(unc) == ours


@pytest.mark.parametrize("k", [1, 5, R_MODULUS - 1, 0])
def test_py_ecc_cross_check_g2(k: int) -> None:
    comp, unc = _ecc_g2_encodings(ecc.multiply(ecc.G2, k))
    ours = g2_point(k)
    assert enc.g2_to_compressed(ours) == comp
    assert enc.g2_to_uncompressed(ours) == unc
    assert enc.g2_from_compressed(comp) == ours
    assert enc.g2_from_uncompressed(unc) == ours


def test_lex_largest_helpers_match_compressed_sign() -> None:
    for p in G1_POINTS:
        _, y = g1_xy(p)
        assert bool(enc.g1_to_compressed(p)[0] & 0x20) == fpy.fp_is_lex_largest(y)
    for p in G2_POINTS:
        xy = p.to_xy_bytes_be()
        y = (int.from_bytes(xy[96:144], "big"), int.from_bytes(xy[144:], "big"))
        assert bool(enc.g2_to_compressed(p)[0] & 0x20) == fpy.fp2_is_lex_largest(y)


# ------------------------------------------------------------------------------------------------
# Bulk paths
# ------------------------------------------------------------------------------------------------

def _g1_raw(points) -> np.ndarray:
    return np.frombuffer(b"".join(enc.g1_to_uncompressed(p) for p in points), np.uint8).reshape(-1, 96)


def _g2_raw(points) -> np.ndarray:
    return np.frombuffer(b"".join(enc.g2_to_uncompressed(p) for p in points), np.uint8).reshape(-1, 192)


def test_bulk_g1_equals_per_point(tmp_path) -> None:
    points = [*G1_POINTS, G1Point.identity(), G1_POINTS[0]]
    raw = _g1_raw(points)
    assert np.array_equal(enc.g1_points_to_uncompressed(points), raw)
    assert enc.g1_points_from_uncompressed(raw) == [enc.g1_from_uncompressed(bytes(r)) for r in raw]
    # a read-only memmap, as the .params reader hands over
    path = tmp_path / "g1.bin"
    path.write_bytes(raw.tobytes())
    mm = np.memmap(path, dtype=np.uint8, mode="r").reshape(-1, 96)
    assert enc.g1_points_from_uncompressed(mm) == points
    assert enc.find_invalid_g1_rows(mm) == -1


def test_bulk_g2_equals_per_point() -> None:
    points = [*G2_POINTS, G2Point.identity()]
    raw = _g2_raw(points)
    assert np.array_equal(enc.g2_points_to_uncompressed(points), raw)
    assert enc.g2_points_from_uncompressed(raw) == points
    assert enc.find_invalid_g2_rows(raw) == -1
    assert enc.find_invalid_g2_rows(raw, check_subgroup=True) == -1


def test_bulk_empty() -> None:
    assert enc.g1_points_from_uncompressed(np.zeros((0, 96), np.uint8)) == []
    assert enc.g2_points_from_uncompressed(np.zeros((0, 192), np.uint8)) == []
    assert enc.g1_points_to_uncompressed([]).shape == (0, 96)
    assert enc.g2_points_to_uncompressed([]).shape == (0, 192)
    assert enc.find_invalid_g1_rows(np.zeros((0, 96), np.uint8)) == -1


def test_bulk_rejects_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"\(n, 96\) uint8"):
        enc.g1_points_from_uncompressed(np.zeros((3, 97), np.uint8))
    with pytest.raises(ValueError, match=r"\(n, 192\) uint8"):
        enc.find_invalid_g2_rows(np.zeros(192, np.uint8))


def _corrupt_g1(kind: str, raw: np.ndarray, row: int) -> str:
    """Damage one row in place; returns the expected error reason."""
    if kind == "compression":
        raw[row, 0] |= 0x80
        return "compression flag set"
    if kind == "sign":
        raw[row, 0] |= 0x20
        return "sign flag set in an uncompressed"
    if kind == "stray":
        raw[row, :] = 0
        raw[row, 0] = 0x40
        raw[row, 50] = 1
        return "remaining bits are not all zero"
    if kind == "zero":
        raw[row, :] = 0
        return r"\(0, 0\) is not on the G1 curve"
    if kind == "noncanonical":
        raw[row, :48] = np.frombuffer(be(P + 1), np.uint8)
        return "coordinate x is not canonical"
    raw[row, 95] ^= 1
    return "not on the G1 curve"


@pytest.mark.parametrize("kind", ["compression", "sign", "stray", "zero", "noncanonical", "offcurve"])
def test_bulk_g1_rejections_name_the_row(kind: str) -> None:
    raw = _g1_raw([*G1_POINTS, G1Point.identity()]).copy()
    reason = _corrupt_g1(kind, raw, 5)
    assert enc.find_invalid_g1_rows(raw) == 5
    with pytest.raises(PointDecodeError, match=reason) as info:
        enc.g1_points_from_uncompressed(raw, field="h", offset=1000)
    assert info.value.field == "h[5]" and info.value.offset == 1000 + 5 * 96
    with pytest.raises(PointDecodeError, match="row 5"):
        enc.g1_points_from_uncompressed(raw)


@pytest.mark.parametrize("kind", ["compression", "stray", "zero", "noncanonical", "offcurve"])
def test_bulk_g2_rejections(kind: str) -> None:
    raw = _g2_raw([*G2_POINTS, G2Point.identity()]).copy()
    row = 3
    if kind == "compression":
        raw[row, 0] |= 0x80
    elif kind == "stray":
        raw[row, :] = 0
        raw[row, 0] = 0x40
        raw[row, 191] = 1
    elif kind == "zero":
        raw[row, :] = 0
    elif kind == "noncanonical":
        raw[row, 144:] = np.frombuffer(be(P), np.uint8)     # y.c0 = p
    else:
        raw[row, 100] ^= 4
    assert enc.find_invalid_g2_rows(raw) == row
    with pytest.raises(PointDecodeError, match=f"b_g2\\[{row}\\]"):
        enc.g2_points_from_uncompressed(raw, field="b_g2")


def test_find_invalid_subgroup() -> None:
    good = _g1_raw(G1_POINTS[:4])
    bad_row = np.frombuffer(g1_off_subgroup(), np.uint8)[None, :]
    raw = np.concatenate([good, bad_row, good])
    assert enc.find_invalid_g1_rows(raw) == -1                     # on the curve
    assert enc.find_invalid_g1_rows(raw, check_subgroup=True) == 4
    # an earlier off-curve row wins over a later off-subgroup one
    raw2 = raw.copy()
    raw2[1, 95] ^= 1
    assert enc.find_invalid_g1_rows(raw2, check_subgroup=True) == 1
    g2 = np.concatenate([_g2_raw(G2_POINTS[:2]), np.frombuffer(g2_off_subgroup(), np.uint8)[None, :]])
    assert enc.find_invalid_g2_rows(g2) == -1
    assert enc.find_invalid_g2_rows(g2, check_subgroup=True) == 2


def test_find_invalid_many_rows_parallel() -> None:
    raw = np.tile(_g1_raw(G1_POINTS), (700, 1))               # > one thread range
    assert enc.find_invalid_g1_rows(raw) == -1
    raw[9000, 10] ^= 0x10
    raw[10000, 10] ^= 0x10
    assert enc.find_invalid_g1_rows(raw) == 9000
