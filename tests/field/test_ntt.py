"""NTT domains against an O(n^2) DFT and a recursive Python-int NTT."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzk.field import Domain, clear_twiddle_cache, fr_vec, ints_to_limbs, limbs_to_ints, ntt
from cuzk.field.constants import FR_GENERATOR, FR_ROOT_OF_UNITY, FR_TWO_ADICITY, R_MODULUS, fr_root_of_unity

r = R_MODULUS
field_ints = st.one_of(st.sampled_from([0, 1, r - 1]), st.integers(0, r - 1))
relaxed = settings(deadline=None, max_examples=40)


def to_mont(values: list[int]) -> np.ndarray:
    return fr_vec.to_montgomery(ints_to_limbs(values))


def from_mont(arr: np.ndarray) -> list[int]:
    return limbs_to_ints(fr_vec.from_montgomery(arr))


def random_ints(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(r) for _ in range(n)]


def dft(coeffs: list[int], points: list[int]) -> list[int]:
    """Evaluate the polynomial at each point by Horner: the O(n^2) definition."""
    out = []
    for x in points:
        acc = 0
        for c in reversed(coeffs):
            acc = (acc * x + c) % r
        out.append(acc)
    return out


def ntt_reference(a: list[int], w: int) -> list[int]:
    """Recursive radix-2 Cooley-Tukey on Python ints: out[i] = sum_j a[j] w^(ij)."""
    n = len(a)
    if n == 1:
        return list(a)
    even = ntt_reference(a[0::2], w * w % r)
    odd = ntt_reference(a[1::2], w * w % r)
    out = [0] * n
    x = 1
    for i in range(n // 2):
        t = x * odd[i] % r
        out[i] = (even[i] + t) % r
        out[i + n // 2] = (even[i] - t) % r
        x = x * w % r
    return out


def domain_points(d: Domain, shift: int = 1) -> list[int]:
    return [shift * pow(d.omega, i, r) % r for i in range(d.size)]


@st.composite
def domain_and_vector(draw: st.DrawFn, max_log: int = 6) -> tuple[Domain, list[int]]:
    k = draw(st.integers(0, max_log))
    return Domain(k), draw(st.lists(field_ints, min_size=1 << k, max_size=1 << k))


# ---------------------------------------------------------------------------------------------------
# Domain construction


def test_domain_attributes() -> None:
    d = Domain(5)
    assert (d.size, d.log_size) == (32, 5)
    assert d.omega == fr_root_of_unity(5)
    assert d.omega * d.omega_inv % r == 1
    assert d.size * d.size_inv % r == 1
    assert pow(d.omega, 32, r) == 1 and pow(d.omega, 16, r) == r - 1
    assert Domain(0).omega == 1 and Domain(0).size == 1
    assert Domain(FR_TWO_ADICITY).omega == FR_ROOT_OF_UNITY
    assert "log_size=5" in repr(d)


@pytest.mark.parametrize(
    ("n", "log"), [(0, 0), (1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (1000, 10), (1024, 10)]
)
def test_for_size(n: int, log: int) -> None:
    assert Domain.for_size(n).log_size == log


def test_domain_limits() -> None:
    Domain(27)  # no tables are built until a transform runs
    with pytest.raises(ValueError, match="2-adicity"):
        Domain(FR_TWO_ADICITY + 1)
    with pytest.raises(ValueError):
        Domain(-1)
    with pytest.raises(ValueError):
        Domain.for_size(-1)


def test_custom_root_validation() -> None:
    w = fr_root_of_unity(4)
    assert Domain(4, pow(w, 3, r)).omega == pow(w, 3, r)  # odd powers are primitive too
    for bad in (pow(w, 2, r), 1, 0, r - 1, r + w, w * 7 % r):
        with pytest.raises(ValueError, match="primitive 2\\^4-th root"):
            Domain(4, bad)
    assert Domain(1, r - 1).omega == r - 1
    assert Domain(0, 1).omega == 1


# ---------------------------------------------------------------------------------------------------
# Transforms against references


@relaxed
@given(domain_and_vector())
def test_ntt_matches_dft(dv: tuple[Domain, list[int]]) -> None:
    d, xs = dv
    a = to_mont(xs)
    before = a.copy()
    assert from_mont(d.ntt(a)) == dft(xs, domain_points(d))
    assert from_mont(d.intt(a)) == [
        v * d.size_inv % r for v in dft(xs, domain_points(Domain(d.log_size, d.omega_inv)))
    ]
    assert from_mont(d.coset_ntt(a)) == dft(xs, domain_points(d, FR_GENERATOR))
    assert np.array_equal(a, before)


@relaxed
@given(domain_and_vector(max_log=8))
def test_round_trips(dv: tuple[Domain, list[int]]) -> None:
    d, xs = dv
    a = to_mont(xs)
    assert np.array_equal(d.intt(d.ntt(a)), a)
    assert np.array_equal(d.ntt(d.intt(a)), a)
    assert np.array_equal(d.icoset_ntt(d.coset_ntt(a)), a)
    assert np.array_equal(d.icoset_ntt(d.coset_ntt(a, 5), 5), a)


@relaxed
@given(domain_and_vector(max_log=7), st.data())
def test_linearity(dv: tuple[Domain, list[int]], data: st.DataObject) -> None:
    d, xs = dv
    ys = data.draw(st.lists(field_ints, min_size=d.size, max_size=d.size))
    c = data.draw(field_ints)
    a, b = to_mont(xs), to_mont(ys)
    combo = fr_vec.add(fr_vec.mul_scalar(a, c), b)
    assert np.array_equal(d.ntt(combo), fr_vec.add(fr_vec.mul_scalar(d.ntt(a), c), d.ntt(b)))
    assert np.array_equal(
        d.coset_ntt(combo), fr_vec.add(fr_vec.mul_scalar(d.coset_ntt(a), c), d.coset_ntt(b))
    )


@pytest.mark.parametrize("log", [7, 10, 11, 13])
def test_ntt_matches_recursive_reference(log: int) -> None:
    d = Domain(log)
    xs = random_ints(d.size, log)
    assert from_mont(d.ntt(to_mont(xs))) == ntt_reference(xs, d.omega)
    inv = ntt_reference(xs, d.omega_inv)
    assert from_mont(d.intt(to_mont(xs))) == [v * d.size_inv % r for v in inv]


@pytest.mark.parametrize("pass_log", [1, 2, 3, 4])
@pytest.mark.parametrize("tile_width", [1, 2, 8, 64])
def test_multi_pass_tiling(monkeypatch: pytest.MonkeyPatch, pass_log: int, tile_width: int) -> None:
    """Small pass sizes force three or more passes with both high and low fixed bits per tile."""
    monkeypatch.setattr(ntt, "_PASS_LOG", pass_log)
    monkeypatch.setattr(ntt, "_TILE_WIDTH", tile_width)
    d = Domain(9)
    xs = random_ints(d.size, pass_log * 100 + tile_width)
    assert ntt._stage_split(9) == sorted(ntt._stage_split(9), reverse=True)
    assert sum(ntt._stage_split(9)) == 9 and max(ntt._stage_split(9)) <= pass_log
    assert from_mont(d.ntt(to_mont(xs))) == ntt_reference(xs, d.omega)


def test_custom_root_transforms() -> None:
    w = pow(fr_root_of_unity(6), 5, r)
    d = Domain(6, w)
    xs = random_ints(64, 6)
    a = to_mont(xs)
    assert from_mont(d.ntt(a)) == dft(xs, [pow(w, i, r) for i in range(64)])
    assert np.array_equal(d.intt(d.ntt(a)), a)
    assert np.array_equal(d.icoset_ntt(d.coset_ntt(a, 3), 3), a)


@pytest.mark.parametrize("log", [0, 1, 2, 12])
def test_all_zero_vectors(log: int) -> None:
    d = Domain(log)
    zero = np.zeros((d.size, 4), dtype=np.uint64)
    for f in (d.ntt, d.intt, d.coset_ntt, d.icoset_ntt):
        assert not f(zero).any()


def test_size_one_and_two() -> None:
    d1 = Domain(0)
    assert from_mont(d1.ntt(to_mont([9]))) == [9]
    assert from_mont(d1.coset_ntt(to_mont([9]))) == [9]
    d2 = Domain(1)
    assert from_mont(d2.ntt(to_mont([3, 5]))) == [8, (3 - 5) % r]
    assert from_mont(d2.coset_ntt(to_mont([3, 5]))) == [3 + 5 * 7, (3 - 5 * 7) % r]
    assert from_mont(d2.intt(to_mont([8, r - 2]))) == [3, 5]


# ---------------------------------------------------------------------------------------------------
# In-place variants and argument checks


def test_inplace_variants_overwrite() -> None:
    d = Domain(6)
    xs = random_ints(64, 1)
    a = to_mont(xs)
    expected = d.ntt(a)
    assert d.ntt_inplace(a) is a and np.array_equal(a, expected)
    assert d.intt_inplace(a) is a and from_mont(a) == xs
    expected = d.coset_ntt(a, 11)
    assert d.coset_ntt_inplace(a, 11) is a and np.array_equal(a, expected)
    assert d.icoset_ntt_inplace(a, 11) is a and from_mont(a) == xs


def test_argument_checks() -> None:
    d = Domain(3)
    with pytest.raises(ValueError, match="expected 8 elements"):
        d.ntt(to_mont([1] * 4))
    with pytest.raises(ValueError, match="writeable C-contiguous"):
        d.ntt_inplace(np.zeros((16, 4), dtype=np.uint64)[::2])
    with pytest.raises(ValueError, match="non-zero"):
        d.icoset_ntt(to_mont([1] * 8), r)
    with pytest.raises(TypeError):
        d.ntt(np.zeros((8, 4), dtype=np.int64))


# ---------------------------------------------------------------------------------------------------
# Scalars and bases


def test_vanishing_on_coset() -> None:
    d = Domain(4)
    z = d.vanishing_on_coset(FR_GENERATOR)
    assert z == (pow(7, 16, r) - 1) % r
    assert d.vanishing_on_coset() == z
    for x in domain_points(d, FR_GENERATOR)[:4]:
        assert (pow(x, 16, r) - 1) % r == z
    assert d.vanishing_on_coset(1) == 0


@pytest.mark.parametrize("log", [0, 1, 3, 6])
def test_lagrange_at(log: int) -> None:
    d = Domain(log)
    tau = 0x1234567890ABCDEF
    lag = from_mont(d.lagrange_at(tau))
    # Interpolating f through its values on the domain recovers f(tau).
    coeffs = random_ints(d.size, log)
    values = dft(coeffs, domain_points(d))
    assert sum(lv * v for lv, v in zip(lag, values, strict=True)) % r == dft(coeffs, [tau])[0]
    # Closed form L_i(tau) = omega^i (tau^n - 1) / (n (tau - omega^i)).
    zt = (pow(tau, d.size, r) - 1) % r
    for i, w in enumerate(domain_points(d)):
        assert lag[i] == w * zt * pow(d.size * (tau - w), r - 2, r) % r
    # At a domain point the basis is an indicator vector.
    if d.size > 1:
        assert from_mont(d.lagrange_at(d.omega)) == [int(i == 1) for i in range(d.size)]


# ---------------------------------------------------------------------------------------------------
# Twiddle cache and large sizes


def test_twiddle_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_twiddle_cache()
    monkeypatch.setattr(ntt, "TWIDDLE_CACHE_BYTES", 40 * 32)
    for log in (4, 5, 6):  # tables of 8, 16 and 32 rows
        Domain(log).ntt(to_mont([1] * (1 << log)))
    assert list(ntt._twiddle_cache) == [(6, fr_root_of_unity(6))]  # the newest stays even when too big
    Domain(3).ntt(to_mont([1] * 8))
    assert list(ntt._twiddle_cache) == [(6, fr_root_of_unity(6)), (3, fr_root_of_unity(3))]
    clear_twiddle_cache()
    assert not ntt._twiddle_cache


def test_ntt_2_16_against_reference_spot_check() -> None:
    d = Domain(16)
    xs = random_ints(d.size, 16)
    out = from_mont(d.ntt(to_mont(xs)))
    for i in (0, 1, 12345, d.size - 1):
        assert out[i] == dft(xs, [pow(d.omega, i, r)])[0]


@pytest.mark.slow
def test_ntt_2_20_round_trip() -> None:
    d = Domain(20)
    rng = np.random.default_rng(20)
    a = fr_vec.to_montgomery(ints_to_limbs([int(v) for v in rng.integers(0, 1 << 62, 1 << 20)]))
    evals = d.coset_ntt(a)
    assert np.array_equal(d.icoset_ntt(evals), a)
    assert np.array_equal(d.intt(d.ntt(a)), a)
    x = pow(d.omega, 777, r) * FR_GENERATOR % r
    assert fr_vec.unmont(evals[777]) == fr_vec.inner_product(a, fr_vec.powers(x, d.size))
