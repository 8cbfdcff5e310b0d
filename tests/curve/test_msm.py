"""CPU MSM (py-arkworks, split across cores, 0/1 scalars as additions) against plain references."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzk.curve.msm import msm, msm_async
from cuzk.curve.points import G1Point, G2Point, Scalar
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs


def _sc(x: int) -> Scalar:
    return Scalar.from_le_bytes(x.to_bytes(32, "little"))


def _points(group: type, n: int, seed: int) -> list:
    rng = random.Random(seed)
    base = group()
    return [base * _sc(rng.randrange(1, R_MODULUS)) for _ in range(n)]


def _naive(points: list, scalars: list[int], identity: object) -> object:
    acc = identity
    for p, s in zip(points, scalars, strict=True):
        acc = acc + p * _sc(s)
    return acc


scalar_values = st.one_of(st.just(0), st.just(1), st.just(2), st.just(R_MODULUS - 1),
                          st.integers(min_value=0, max_value=R_MODULUS - 1))


@settings(max_examples=25, deadline=None)
@given(st.lists(scalar_values, min_size=0, max_size=40), st.integers(0, 2**32))
def test_g1_msm_matches_naive_sum(scalars: list[int], seed: int) -> None:
    pts = _points(G1Point, len(scalars), seed)
    assert msm(pts, ints_to_limbs(scalars), group=G1Point) == _naive(pts, scalars, G1Point.identity())


@settings(max_examples=10, deadline=None)
@given(st.lists(scalar_values, min_size=1, max_size=12), st.integers(0, 2**32))
def test_g2_msm_matches_naive_sum(scalars: list[int], seed: int) -> None:
    pts = _points(G2Point, len(scalars), seed)
    assert msm(pts, ints_to_limbs(scalars)) == _naive(pts, scalars, G2Point.identity())


@pytest.mark.parametrize("n", [1023, 5000])
def test_chunked_msm_with_many_zero_and_one_scalars(n: int) -> None:
    """Large enough to be split across threads; most scalars 0 or 1, like a SHA-256 witness."""
    rng = random.Random(n)
    pts = _points(G1Point, n, n)
    scalars = [rng.choice([0, 0, 1, 1, 1, rng.randrange(R_MODULUS)]) for _ in range(n)]
    assert msm(pts, ints_to_limbs(scalars), group=G1Point) == _naive(pts, scalars, G1Point.identity())


def test_repeated_points_and_identity_bases() -> None:
    p = G1Point() * _sc(7)
    pts = [p, p, G1Point.identity(), p]
    scalars = [3, R_MODULUS - 3, 5, 1]
    assert msm(pts, ints_to_limbs(scalars)) == p


def test_against_py_ecc_reference() -> None:
    """An independent implementation: py_ecc's affine arithmetic on the same points."""
    from py_ecc import optimized_bls12_381 as ec

    rng = random.Random(3)
    ks = [rng.randrange(1, R_MODULUS) for _ in range(4)]
    scalars = [rng.randrange(R_MODULUS), 1, 0, rng.randrange(R_MODULUS)]
    ours = msm([G1Point() * _sc(k) for k in ks], ints_to_limbs(scalars))
    ref = ec.Z1
    for k, s in zip(ks, scalars, strict=True):
        ref = ec.add(ref, ec.multiply(ec.G1, k * s % R_MODULUS))
    x, y = ec.normalize(ref)
    assert ours.to_xy_bytes_be() == int(x).to_bytes(48, "big") + int(y).to_bytes(48, "big")


def test_length_mismatch_is_refused() -> None:
    with pytest.raises(ValueError, match="length mismatch"):
        msm(_points(G1Point, 3, 1), ints_to_limbs([1, 2]))
    with pytest.raises(ValueError, match=r"\(n, 4\)"):
        msm(_points(G1Point, 2, 1), np.zeros((2, 3), np.uint64))


def test_empty_msm_is_the_identity_of_its_group() -> None:
    empty = np.zeros((0, 4), np.uint64)
    assert msm([], empty, group=G1Point) == G1Point.identity()
    assert msm_async([], empty, group=G2Point)[0].result() == G2Point.identity()
    with pytest.raises(ValueError, match="needs its group"):
        msm([], empty)
