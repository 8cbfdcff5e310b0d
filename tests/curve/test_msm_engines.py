"""The blst MSM engine over parameter vectors, against py-arkworks and naive sums; engine choice."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cuzk.curve import blst
from cuzk.curve import msm as msm_module
from cuzk.curve.bases import G1Bases, G2Bases
from cuzk.curve.encoding import g1_affine_limbs_from_uncompressed, g2_affine_limbs_from_uncompressed
from cuzk.curve.msm import msm, msm_bases, msm_engine
from cuzk.curve.points import G1Point, G2Point, Scalar
from cuzk.errors import CuzkError, PointDecodeError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs

pytestmark = pytest.mark.skipif(blst.unavailable_reason() is not None, reason="blst (ckzg) not loadable")


def _sc(x: int) -> Scalar:
    return Scalar.from_le_bytes(x.to_bytes(32, "little"))


def _bases(group: type, n: int, seed: int) -> G1Bases | G2Bases:
    """n points drawn from 24 distinct ones (so repeats occur), with the identity and a P, -P pair."""
    rng = random.Random(seed)
    distinct = [group() * _sc(rng.randrange(1, R_MODULUS)) for _ in range(24)]
    points = [distinct[rng.randrange(24)] for _ in range(n)]
    if n > 4:
        points[1] = group.identity()
        points[3] = -points[2]
    cls = G1Bases if group is G1Point else G2Bases
    bases = cls.from_points(points)
    bases.release_points()   # the engines must work from the encoded bytes
    return bases


def _scalars(n: int, seed: int) -> np.ndarray:
    rng = random.Random(seed)
    special = [0, 1, 2, R_MODULUS - 1, 2**254, (1 << 255) - 1 - ((1 << 255) - R_MODULUS)]
    values = [rng.choice(special) if rng.random() < 0.3 else rng.randrange(R_MODULUS) for _ in range(n)]
    if n > 4:
        values[2] = values[3] = 77   # P and -P with one scalar: a bucket sums to the identity
    return ints_to_limbs(values)


def _with_engine(monkeypatch: pytest.MonkeyPatch, engine: str, bases, scalars: np.ndarray):
    monkeypatch.setenv("CUZK_CPU_MSM", engine)
    return msm_bases(bases, scalars)


@pytest.mark.parametrize("group", [G1Point, G2Point])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 31, 63, 64, 65, 200, 1500])
def test_blst_equals_arkworks(monkeypatch: pytest.MonkeyPatch, group: type, n: int) -> None:
    bases = _bases(group, n, seed=n)
    scalars = _scalars(n, seed=n + 1)
    assert _with_engine(monkeypatch, "blst", bases, scalars) == _with_engine(monkeypatch, "arkworks", bases, scalars)


@pytest.mark.parametrize("group", [G1Point, G2Point])
def test_blst_small_msm_against_a_naive_sum(monkeypatch: pytest.MonkeyPatch, group: type) -> None:
    bases = _bases(group, 70, seed=7)
    values = [random.Random(8).randrange(R_MODULUS) for _ in range(70)]
    naive = group.identity()
    for point, value in zip(bases.points(), values, strict=True):
        naive = naive + point * _sc(value)
    assert _with_engine(monkeypatch, "blst", bases, ints_to_limbs(values)) == naive


@pytest.mark.parametrize("fill", [0, 1])
def test_blst_all_zero_or_all_one_scalars(monkeypatch: pytest.MonkeyPatch, fill: int) -> None:
    bases = _bases(G1Point, 9000, seed=3)   # ones are summed in pieces of >= 4096
    scalars = ints_to_limbs([fill] * 9000)
    expected = G1Point.identity()
    if fill:
        for point in bases.points():
            expected = expected + point
    assert _with_engine(monkeypatch, "blst", bases, scalars) == expected


def test_every_core_split_gives_the_same_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    # More threads than tiles splits the points as well as the windows.
    bases = _bases(G1Point, 3000, seed=11)
    scalars = _scalars(3000, seed=12)
    reference = msm(bases.points(), scalars)
    pool = msm_module.msm_pool()
    for threads in (1, 2, 64):
        futures = blst.msm_tasks(pool, blst.G1, bases.affine(), None, scalars, threads)
        assert msm_module.gather(futures) == reference
    rows = np.arange(0, 3000, 3)
    futures = blst.msm_tasks(pool, blst.G1, bases.affine(), rows, scalars[rows], 64)
    assert msm_module.gather(futures) == msm([bases.points()[i] for i in rows], scalars[rows])


@pytest.mark.parametrize(("group", "n"), [(G1Point, 100), (G1Point, 1000), (G2Point, 100)])
def test_top_window_carry(monkeypatch: pytest.MonkeyPatch, group: type, n: int) -> None:
    # Scalars with bit 254 set, with windows that divide 255 (5 is blst's window for 64..127 points)
    # and that do not: the carry out of the top window must not be lost.
    bases = _bases(group, n, seed=n)
    rng = random.Random(n)
    scalars = ints_to_limbs([rng.randrange(2**254, R_MODULUS) for _ in range(n)])
    reference = msm(bases.points(), scalars)
    for window in (3, 5, 15, 17, 13):
        monkeypatch.setattr(blst, "window_bits", lambda _n, w=window: w)
        layout = blst.G1 if group is G1Point else blst.G2
        futures = blst.msm_tasks(msm_module.msm_pool(), layout, bases.affine(), None, scalars, 2)
        assert msm_module.gather(futures) == reference, window


def test_large_msms_cap_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    # blst would take 23 bits at 2^26 points; tiles stop at MAX_WINDOW (bounded bucket memory).
    seen: list[int] = []
    monkeypatch.setattr(blst, "window_bits", lambda n: 23 if n >= 1000 else 5)
    monkeypatch.setattr(blst, "_shifted_tile", lambda *args: seen.append(args[6]) or G1Point.identity())
    bases = _bases(G1Point, 1000, seed=4)
    msm_module.gather(blst.msm_tasks(msm_module.msm_pool(), blst.G1, bases.affine(), None, _scalars(1000, 5), 2))
    assert set(seen) == {blst.MAX_WINDOW} and len(seen) == 255 // blst.MAX_WINDOW + 1


def test_length_mismatch_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    bases = _bases(G1Point, 10, seed=1)
    monkeypatch.setenv("CUZK_CPU_MSM", "blst")
    with pytest.raises(ValueError, match="length mismatch"):
        msm_bases(bases, _scalars(9, seed=1))


def test_engine_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUZK_CPU_MSM", raising=False)
    assert msm_engine() == "blst"
    monkeypatch.setenv("CUZK_CPU_MSM", "ARKWORKS")
    assert msm_engine() == "arkworks"
    monkeypatch.setenv("CUZK_CPU_MSM", "gmp")
    with pytest.raises(CuzkError, match="CUZK_CPU_MSM='gmp' is not an MSM engine"):
        msm_engine()


def test_without_blst_the_default_falls_back_and_an_explicit_request_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blst, "unavailable_reason", lambda: "the ckzg package (which carries blst) is not installed")
    monkeypatch.delenv("CUZK_CPU_MSM", raising=False)
    assert msm_engine() == "arkworks"
    bases = _bases(G1Point, 100, seed=2)
    scalars = _scalars(100, seed=3)
    assert msm_bases(bases, scalars) == msm(bases.points(), scalars)
    monkeypatch.setenv("CUZK_CPU_MSM", "blst")
    with pytest.raises(CuzkError, match="blst cannot be used: the ckzg package"):
        msm_engine()


@pytest.mark.parametrize("group", [G1Point, G2Point])
def test_affine_limbs_round_trip_through_blst(group: type) -> None:
    bases = _bases(group, 50, seed=5)
    layout = blst.G1 if group is G1Point else blst.G2
    limbs = bases.affine()
    assert limbs.shape == (50, layout.affine_words) and not limbs[1].any()   # the identity is all zeros
    # blst serialises each converted row back to the exact encoding it came from.
    for row in range(50):
        jacobian = blst._sum(layout, blst._pointer_pair(limbs[row:row + 1]), None, 1)
        assert jacobian == bases.points()[row]


@pytest.mark.parametrize(("convert", "width"), [(g1_affine_limbs_from_uncompressed, 96),
                                                (g2_affine_limbs_from_uncompressed, 192)])
def test_affine_conversion_rejects_what_decoding_rejects(convert, width: int) -> None:
    group = G1Point if width == 96 else G2Point
    raw = _bases(group, 8, seed=9).raw.copy()
    off_curve = raw.copy()
    off_curve[5, -1] ^= 1
    with pytest.raises(PointDecodeError, match=r"offset (580|1060): h\[5\]: point is not on the G[12] curve"):
        convert(off_curve, field="h", offset=100)
    bad_flag = raw.copy()
    bad_flag[6, 0] |= 0x80
    with pytest.raises(PointDecodeError, match=r"h\[6\]"):
        convert(bad_flag, field="h")
    stray = raw.copy()
    stray[1, 7] = 1   # the identity row with a stray bit
    with pytest.raises(PointDecodeError, match=r"h\[1\]"):
        convert(stray, field="h")
    with pytest.raises(ValueError, match=f"needs an \\(n, {width}\\) uint8 array"):
        convert(raw[:, :-1])
