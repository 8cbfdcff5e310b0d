"""Batch fixed-base multiplication against py-arkworks `base * Scalar`, plus the curve formulas'
exceptional cases (identity, doubling, P + (-P))."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from cuzk.curve import encoding as enc
from cuzk.curve import fixed_base as fb
from cuzk.curve.fp_kernels import fp2_array_to_ints, fp_array_to_ints, ints_to_fp2_array, ints_to_fp_array
from cuzk.curve.points import G1Point, G2Point, Scalar
from cuzk.field.constants import P_MODULUS, R_MODULUS

R = R_MODULUS
EDGE = [0, 1, 2, 3, R - 1, R - 2, (R - 1) // 2, (R + 1) // 2, 1 << 64, (1 << 128) - 1, 1 << 254,
        (1 << 254) + 1, R - (1 << 64)]


def scalar(k: int) -> Scalar:
    return Scalar.from_le_bytes(k.to_bytes(32, "little"))


def expected_g1(base: G1Point, ks: list[int]) -> np.ndarray:
    return enc.g1_points_to_uncompressed([base * scalar(k) for k in ks]).reshape(-1, 96)


def expected_g2(base: G2Point, ks: list[int]) -> np.ndarray:
    return enc.g2_points_to_uncompressed([base * scalar(k) for k in ks]).reshape(-1, 192)


rng = random.Random(99)
G1_BASE = G1Point() * scalar(rng.randrange(1, R))
G2_BASE = G2Point() * scalar(rng.randrange(1, R))


def test_scalars_from_ints_layout() -> None:
    s = fb.scalars_from_ints([1, R - 1, 1 << 64])
    assert s.dtype == np.uint64 and s.shape == (3, 4)
    assert list(s[0]) == [1, 0, 0, 0] and list(s[2]) == [0, 1, 0, 0]
    assert sum(int(v) << (64 * i) for i, v in enumerate(s[1])) == R - 1


@pytest.mark.parametrize("n", [0, 1, 3, 1000])
def test_g1_random(n: int) -> None:
    ks = [rng.randrange(R) for _ in range(n)]
    out = fb.g1_fixed_base_batch(G1_BASE, fb.scalars_from_ints(ks))
    assert out.shape == (n, 96) and out.dtype == np.uint8
    assert np.array_equal(out, expected_g1(G1_BASE, ks))


@pytest.mark.parametrize("n", [0, 1, 3, 1000])
def test_g2_random(n: int) -> None:
    ks = [rng.randrange(R) for _ in range(n)]
    out = fb.g2_fixed_base_batch(G2_BASE, fb.scalars_from_ints(ks))
    assert out.shape == (n, 192) and out.dtype == np.uint8
    assert np.array_equal(out, expected_g2(G2_BASE, ks))


def test_edge_scalars_and_repeats_g1() -> None:
    ks = EDGE + EDGE[::-1] + [5] * 7
    out = fb.g1_fixed_base_batch(G1Point(), fb.scalars_from_ints(ks))
    assert np.array_equal(out, expected_g1(G1Point(), ks))
    assert bytes(out[0]) == bytes([0x40]) + bytes(95)       # 0 -> infinity
    assert enc.g1_from_uncompressed(bytes(out[1])) == G1Point()


def test_edge_scalars_g2() -> None:
    out = fb.g2_fixed_base_batch(G2Point(), fb.scalars_from_ints(EDGE))
    assert np.array_equal(out, expected_g2(G2Point(), EDGE))
    assert bytes(out[0]) == bytes([0x40]) + bytes(191)


@pytest.mark.parametrize("window", [2, 3, 4, 5, 7, 8, 9, 11, 13])
def test_every_window_width(window: int) -> None:
    """Widths dividing 256 (2, 4, 8) put a digit of exactly 2^(w-1) in the top window for some
    scalars; the others leave spare top bits. All must agree with arkworks."""
    ks = EDGE + [rng.randrange(R) for _ in range(20)]
    s = fb.scalars_from_ints(ks)
    assert np.array_equal(fb.g1_fixed_base_batch(G1_BASE, s, window=window), expected_g1(G1_BASE, ks))
    if window in (2, 5, 8):
        assert np.array_equal(fb.g2_fixed_base_batch(G2_BASE, s, window=window), expected_g2(G2_BASE, ks))


def test_non_contiguous_scalars_and_many_chunks() -> None:
    ks = [rng.randrange(R) for _ in range(1200)]
    s = fb.scalars_from_ints(ks)
    out = fb.g1_fixed_base_batch(G1_BASE, s[::3], window=6)    # several _CHUNK batches and threads
    assert np.array_equal(out, expected_g1(G1_BASE, ks[::3]))


def test_table_cache_reuse_gives_same_answer() -> None:
    fb.clear_table_cache()
    ks = [rng.randrange(R) for _ in range(50)]
    s = fb.scalars_from_ints(ks)
    first = fb.g1_fixed_base_batch(G1_BASE, s)
    small = fb.g1_fixed_base_batch(G1_BASE, s[:2])     # may reuse the wider cached table
    assert np.array_equal(first[:2], small)
    other = G1_BASE + G1Point()
    assert np.array_equal(fb.g1_fixed_base_batch(other, s[:3]), expected_g1(other, ks[:3]))
    assert np.array_equal(fb.g1_fixed_base_batch(G1_BASE, s), first)


def test_identity_base() -> None:
    s = fb.scalars_from_ints([0, 1, 5])
    out1 = fb.g1_fixed_base_batch(G1Point.identity(), s)
    assert all(bytes(r) == bytes([0x40]) + bytes(95) for r in out1)
    out2 = fb.g2_fixed_base_batch(G2Point.identity(), s)
    assert all(bytes(r) == bytes([0x40]) + bytes(191) for r in out2)


def test_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="canonical"):
        fb.g1_fixed_base_batch(G1Point(), fb.scalars_from_ints([1, R]))
    with pytest.raises(ValueError, match="canonical"):
        fb.g2_fixed_base_batch(G2Point(), fb.scalars_from_ints([(1 << 256) - 1]))
    with pytest.raises(ValueError, match=r"\(n, 4\) uint64"):
        fb.g1_fixed_base_batch(G1Point(), np.zeros((3, 4), np.int64))
    with pytest.raises(ValueError, match=r"\(n, 4\) uint64"):
        fb.g1_fixed_base_batch(G1Point(), np.zeros(4, np.uint64))
    with pytest.raises(ValueError, match="window"):
        fb.g1_fixed_base_batch(G1Point(), fb.scalars_from_ints([1]), window=1)
    off = next(G1Point.from_xy_bytes_unchecked_be(x.to_bytes(48, "big") + y.to_bytes(48, "big"))
               for x in range(1, 100)
               for y in [pow(x**3 + 4, (P_MODULUS + 1) // 4, P_MODULUS)]
               if y * y % P_MODULUS == (x**3 + 4) % P_MODULUS)
    assert not off.is_in_subgroup()
    with pytest.raises(ValueError, match="subgroup"):
        fb.g1_fixed_base_batch(off, fb.scalars_from_ints([1]))


def test_choose_window_grows_with_n() -> None:
    widths = [fb.choose_window(n) for n in (1, 100, 1000, 1 << 14, 1 << 16, 1 << 20)]
    assert widths == sorted(widths) and widths[0] >= 2 and widths[-1] <= 16


@settings(max_examples=15, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(EDGE), st.integers(0, R - 1)), max_size=12))
def test_g1_property(ks: list[int]) -> None:
    out = fb.g1_fixed_base_batch(G1_BASE, fb.scalars_from_ints(ks).reshape(-1, 4))
    assert np.array_equal(out, expected_g1(G1_BASE, ks))


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(0, R - 1), max_size=6))
def test_g2_property(ks: list[int]) -> None:
    out = fb.g2_fixed_base_batch(G2_BASE, fb.scalars_from_ints(ks).reshape(-1, 4))
    assert np.array_equal(out, expected_g2(G2_BASE, ks))


# ------------------------------------------------------------------------------------------------
# Curve formulas, including the cases fixed-base digits never reach
# ------------------------------------------------------------------------------------------------

@njit(cache=True)
def _add_g1(X1, Y1, Z1, x2, y2):
    X, Y, Z = fb.jac_add_affine((X1[0], X1[1], X1[2], X1[3], X1[4], X1[5]),
                                (Y1[0], Y1[1], Y1[2], Y1[3], Y1[4], Y1[5]),
                                (Z1[0], Z1[1], Z1[2], Z1[3], Z1[4], Z1[5]),
                                (x2[0], x2[1], x2[2], x2[3], x2[4], x2[5]),
                                (y2[0], y2[1], y2[2], y2[3], y2[4], y2[5]))
    out = np.empty((3, 6), dtype=np.uint64)
    for k in range(6):
        out[0, k] = X[k]
        out[1, k] = Y[k]
        out[2, k] = Z[k]
    return out


def _g1_affine(p: G1Point) -> tuple[int, int]:
    b = p.to_xy_bytes_be()
    return int.from_bytes(b[:48], "big"), int.from_bytes(b[48:], "big")


def _jac_to_point(X: int, Y: int, Z: int) -> G1Point:
    if Z == 0:
        return G1Point.identity()
    zi = pow(Z, -1, P_MODULUS)
    x, y = X * zi * zi % P_MODULUS, Y * zi**3 % P_MODULUS
    return G1Point.from_xy_bytes_be(x.to_bytes(48, "big") + y.to_bytes(48, "big"))


@pytest.mark.parametrize("case", ["identity+P", "P+P", "P+(-P)", "P+Q"])
def test_jacobian_mixed_addition_cases(case: str) -> None:
    p = G1Point() * scalar(11)
    q = {"identity+P": p, "P+P": p, "P+(-P)": -p, "P+Q": G1Point() * scalar(12345)}[case]
    px, py = _g1_affine(p)
    qx, qy = _g1_affine(q)
    z = rng.randrange(1, P_MODULUS)          # a non-trivial Jacobian representative of p
    X1, Y1, Z1 = px * z * z % P_MODULUS, py * z**3 % P_MODULUS, z
    if case == "identity+P":
        X1, Y1, Z1 = 1, 1, 0
    a = ints_to_fp_array([X1, Y1, Z1, qx, qy])
    out = fp_array_to_ints(_add_g1(a[0], a[1], a[2], a[3], a[4]))
    expected = q if case == "identity+P" else p + q
    assert _jac_to_point(*out) == expected


def test_fp2_array_helpers_round_trip() -> None:
    vals = [(1, 2), (P_MODULUS - 1, 0), (0, P_MODULUS - 1)]
    assert fp2_array_to_ints(ints_to_fp2_array(vals)) == vals


@pytest.mark.parametrize("g2", [False, True])
def test_window_table_entries(g2: bool) -> None:
    """window_table(base, w)[i, j-1] is the affine Montgomery j * 2^(w*i) * base (the device layout)."""
    base, w = (G2_BASE, 5) if g2 else (G1_BASE, 6)
    table = fb.window_table(base, w)
    windows = -(-256 // w)
    assert table.shape == (windows, 1 << (w - 1), 2, *((2, 6) if g2 else (6,)))
    assert table.dtype == np.uint64 and table.flags.c_contiguous
    for i, j in [(0, 1), (0, 1 << (w - 1)), (3, 7), (windows - 1, 1), (windows - 1, 1 << (w - 1))]:
        xy = (base * scalar(j * (1 << (w * i)) % R)).to_xy_bytes_be()
        coords = [int.from_bytes(xy[48 * c:48 * (c + 1)], "big") for c in range(4 if g2 else 2)]
        entry = table[i, j - 1]
        got = [v for pair in fp2_array_to_ints(entry) for v in pair] if g2 else fp_array_to_ints(entry)
        assert got == coords


def test_window_table_and_check_scalars_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="identity"):
        fb.window_table(G1Point.identity(), 8)
    with pytest.raises(ValueError, match="identity"):
        fb.window_table(G2Point.identity(), 8)
    with pytest.raises(ValueError, match="window width"):
        fb.window_table(G1_BASE, 17)
    with pytest.raises(ValueError, match="scalar 1 is not a canonical"):
        fb.check_scalars(fb.scalars_from_ints([5, R]))
    assert fb.check_scalars(fb.scalars_from_ints([0, R - 1])).flags.c_contiguous
