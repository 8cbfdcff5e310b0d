"""numba Fp / Fp2 Montgomery kernels against Python-int arithmetic (and the fp.py helpers)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzk.curve import fp_kernels as fk
from cuzk.curve.points import G1Point, G2Point
from cuzk.field import fp as fpy
from cuzk.field.constants import FP_MONT_R, P_MODULUS

P = P_MODULUS
EDGE = [0, 1, 2, P - 1, P - 2, (P - 1) // 2, (P + 1) // 2, FP_MONT_R, (1 << 64) - 1, 1 << 64,
        (1 << 320) % P, P >> 1, (P >> 64) << 64]
rng = random.Random(7)
VALUES = EDGE + [rng.randrange(P) for _ in range(300)]
OTHER = VALUES[::-1]

fp_ints = st.one_of(st.sampled_from(EDGE), st.integers(0, P - 1))


def test_limb_helpers() -> None:
    assert fk.limbs_to_int(fk.int_to_limbs(P - 1)) == P - 1
    assert fk.int_to_limbs(1 << 64) == (0, 1, 0, 0, 0, 0)


def test_montgomery_round_trip() -> None:
    a = fk.ints_to_fp_array(VALUES)
    assert fk.fp_array_to_ints(a) == VALUES
    std = np.array([fk.int_to_limbs(v) for v in VALUES], dtype=np.uint64)
    assert np.array_equal(fk.fp_from_mont_array(fk.fp_to_mont_array(std)), std)
    # Montgomery form of v is v*R mod p
    assert fk.limbs_to_int(a[1]) == FP_MONT_R


@pytest.mark.parametrize(("op", "ref"), [
    (fk.FE_ADD, lambda x, y: (x + y) % P),
    (fk.FE_SUB, lambda x, y: (x - y) % P),
    (fk.FE_MUL, lambda x, y: x * y % P),
])
def test_fp_binary(op: int, ref) -> None:
    out = fk.fe_binary(op, fk.ints_to_fp_array(VALUES), fk.ints_to_fp_array(OTHER))
    assert fk.fp_array_to_ints(out) == [ref(x, y) for x, y in zip(VALUES, OTHER, strict=True)]


@pytest.mark.parametrize(("op", "ref"), [
    (fk.FE_NEG, lambda x: -x % P),
    (fk.FE_SQUARE, lambda x: x * x % P),
    (fk.FE_INV, lambda x: pow(x, P - 2, P)),      # 0 -> 0
])
def test_fp_unary(op: int, ref) -> None:
    out = fk.fe_unary(op, fk.ints_to_fp_array(VALUES))
    assert fk.fp_array_to_ints(out) == [ref(x) for x in VALUES]


def test_fp_large_array_threads() -> None:
    vals = [rng.randrange(P) for _ in range(5000)]
    a = fk.ints_to_fp_array(vals)
    out = fk.fp_array_to_ints(fk.fe_binary(fk.FE_MUL, a, a))
    assert out == [v * v % P for v in vals]


PAIRS = [(a, b) for a, b in zip(VALUES[:150], VALUES[150:300], strict=True)] + [(0, 0), (1, 0), (0, 1)]
PAIRS2 = PAIRS[::-1]


@pytest.mark.parametrize(("op", "ref"), [
    (fk.FE_ADD, fpy.fp2_add), (fk.FE_SUB, fpy.fp2_sub), (fk.FE_MUL, fpy.fp2_mul),
])
def test_fp2_binary(op: int, ref) -> None:
    out = fk.fe_binary(op, fk.ints_to_fp2_array(PAIRS), fk.ints_to_fp2_array(PAIRS2))
    assert fk.fp2_array_to_ints(out) == [ref(x, y) for x, y in zip(PAIRS, PAIRS2, strict=True)]


@pytest.mark.parametrize(("op", "ref"), [
    (fk.FE_NEG, fpy.fp2_neg), (fk.FE_SQUARE, fpy.fp2_square),
    (fk.FE_INV, lambda x: (0, 0) if x == (0, 0) else fpy.fp2_inv(x)),
])
def test_fp2_unary(op: int, ref) -> None:
    out = fk.fe_unary(op, fk.ints_to_fp2_array(PAIRS))
    assert fk.fp2_array_to_ints(out) == [ref(x) for x in PAIRS]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(fp_ints, fp_ints), min_size=1, max_size=8))
def test_fp_ops_property(pairs: list[tuple[int, int]]) -> None:
    a = fk.ints_to_fp_array([x for x, _ in pairs])
    b = fk.ints_to_fp_array([y for _, y in pairs])
    assert fk.fp_array_to_ints(fk.fe_binary(fk.FE_MUL, a, b)) == [x * y % P for x, y in pairs]
    assert fk.fp_array_to_ints(fk.fe_binary(fk.FE_SUB, a, b)) == [(x - y) % P for x, y in pairs]
    assert fk.fp_array_to_ints(fk.fe_binary(fk.FE_ADD, a, b)) == [(x + y) % P for x, y in pairs]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(fp_ints, fp_ints), min_size=1, max_size=6),
       st.lists(st.tuples(fp_ints, fp_ints), min_size=6, max_size=6))
def test_fp2_mul_property(xs: list[tuple[int, int]], ys: list[tuple[int, int]]) -> None:
    ys = ys[:len(xs)]
    out = fk.fe_binary(fk.FE_MUL, fk.ints_to_fp2_array(xs), fk.ints_to_fp2_array(ys))
    assert fk.fp2_array_to_ints(out) == [fpy.fp2_mul(x, y) for x, y in zip(xs, ys, strict=True)]


def test_bytes_conversions() -> None:
    vals = [0, 1, P - 1, P, P + 1, (1 << 384) - 1, 12345678901234567890]
    raw = np.frombuffer(b"".join(v.to_bytes(48, "big") for v in vals), np.uint8).reshape(-1, 48)
    mont, ok = fk.fp_from_be_bytes(raw)
    assert list(ok) == [v < P for v in vals]
    good = [i for i, v in enumerate(vals) if v < P]
    assert fk.fp_array_to_ints(mont[good]) == [vals[i] for i in good]
    back = fk.fp_to_be_bytes(mont[good])
    assert np.array_equal(back, raw[good])


def test_shape_errors() -> None:
    with pytest.raises(ValueError, match="expected an"):
        fk.fe_unary(fk.FE_NEG, np.zeros((3, 5), np.uint64))
    with pytest.raises(ValueError, match="shape mismatch"):
        fk.fe_binary(fk.FE_ADD, np.zeros((3, 6), np.uint64), np.zeros((2, 6), np.uint64))


def test_generic_ops_reject_non_field_types_in_python() -> None:
    with pytest.raises(TypeError):
        fk.fe_inv((1, 2))


# ---- the Python-int helpers of cuzk.field.fp ----

def test_fp_helpers() -> None:
    assert fpy.fp_is_canonical(P - 1) and not fpy.fp_is_canonical(P) and not fpy.fp_is_canonical(-1)
    assert fpy.fp_from_be(fpy.fp_to_be(P - 1)) == P - 1
    with pytest.raises(ValueError):
        fpy.fp_from_be(bytes(47))
    assert fpy.fp_is_lex_largest((P + 1) // 2) and not fpy.fp_is_lex_largest((P - 1) // 2)
    assert fpy.fp2_is_lex_largest((0, (P + 1) // 2)) and fpy.fp2_is_lex_largest(((P + 1) // 2, 0))
    assert not fpy.fp2_is_lex_largest((P - 1, 1))
    for v in VALUES[:40]:
        s = fpy.fp_sqrt(v * v)
        assert s is not None and s * s % P == v * v % P
    assert fpy.fp_sqrt(-1) is None          # p = 3 (mod 4): -1 is not a square
    for x in PAIRS[:30]:
        sq = fpy.fp2_square(x)
        s = fpy.fp2_sqrt(sq)
        assert s is not None and fpy.fp2_square(s) == sq
    assert fpy.fp2_sqrt((P - 1, 0)) == (0, 1) or fpy.fp2_sqrt((P - 1, 0)) == (0, P - 1)
    assert fpy.fp2_mul(fpy.fp2_inv((3, 4)), (3, 4)) == (1, 0)


def test_curve_equation_helpers() -> None:
    b1 = G1Point().to_xy_bytes_be()
    assert fpy.g1_on_curve(int.from_bytes(b1[:48], "big"), int.from_bytes(b1[48:], "big"))
    assert not fpy.g1_on_curve(1, 1)
    b2 = G2Point().to_xy_bytes_be()
    c = [int.from_bytes(b2[48 * k:48 * (k + 1)], "big") for k in range(4)]
    assert fpy.g2_on_curve((c[0], c[1]), (c[2], c[3]))
    assert not fpy.g2_on_curve((c[0], c[1]), (c[3], c[2]))
