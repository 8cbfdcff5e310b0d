"""numba Fr vector kernels against schoolbook Python int arithmetic mod r."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzk.field import fr_vec, ints_to_limbs, limbs_to_ints
from cuzk.field.constants import FR_MONT_R, R_MODULUS

r = R_MODULUS
EDGE = [0, 1, 2, r - 1, r - 2, (r - 1) // 2, (1 << 255) % r, (1 << 64) - 1, 1 << 64, FR_MONT_R]
field_ints = st.one_of(st.sampled_from(EDGE), st.integers(0, r - 1))
relaxed = settings(deadline=None, max_examples=60)


def to_mont(values: list[int]) -> np.ndarray:
    return fr_vec.to_montgomery(ints_to_limbs(values))


def from_mont(arr: np.ndarray) -> list[int]:
    return limbs_to_ints(fr_vec.from_montgomery(arr))


@st.composite
def vector_pairs(draw: st.DrawFn, max_size: int = 40) -> tuple[list[int], list[int]]:
    n = draw(st.integers(0, max_size))
    return draw(st.lists(field_ints, min_size=n, max_size=n)), draw(
        st.lists(field_ints, min_size=n, max_size=n)
    )


def random_ints(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(r) for _ in range(n)]


@relaxed
@given(st.lists(field_ints, max_size=40))
def test_montgomery_form_and_round_trip(values: list[int]) -> None:
    mont = to_mont(values)
    assert limbs_to_ints(mont) == [v * (1 << 256) % r for v in values]
    assert from_mont(mont) == values


@relaxed
@given(vector_pairs())
def test_elementwise_ops_match_ints(pair: tuple[list[int], list[int]]) -> None:
    xs, ys = pair
    a, b = to_mont(xs), to_mont(ys)
    a_before, b_before = a.copy(), b.copy()
    assert from_mont(fr_vec.add(a, b)) == [(x + y) % r for x, y in zip(xs, ys, strict=True)]
    assert from_mont(fr_vec.sub(a, b)) == [(x - y) % r for x, y in zip(xs, ys, strict=True)]
    assert from_mont(fr_vec.mul(a, b)) == [x * y % r for x, y in zip(xs, ys, strict=True)]
    assert from_mont(fr_vec.neg(a)) == [-x % r for x in xs]
    assert from_mont(fr_vec.square(a)) == [x * x % r for x in xs]
    assert np.array_equal(a, a_before) and np.array_equal(b, b_before)


@relaxed
@given(st.lists(field_ints, max_size=40), field_ints)
def test_scalar_ops(xs: list[int], c: int) -> None:
    a = to_mont(xs)
    assert from_mont(fr_vec.mul_scalar(a, c)) == [x * c % r for x in xs]
    assert from_mont(fr_vec.add_scalar(a, c)) == [(x + c) % r for x in xs]
    assert from_mont(fr_vec.mul_scalar(a, c + r)) == [x * c % r for x in xs]
    b = a.copy()
    assert fr_vec.mul_scalar_inplace(b, c) is b
    assert from_mont(b) == [x * c % r for x in xs]


@relaxed
@given(vector_pairs())
def test_mul_inplace(pair: tuple[list[int], list[int]]) -> None:
    xs, ys = pair
    a, b = to_mont(xs), to_mont(ys)
    out = fr_vec.mul_inplace(a, b)
    assert out is a
    assert from_mont(a) == [x * y % r for x, y in zip(xs, ys, strict=True)]
    assert from_mont(b) == ys


@relaxed
@given(vector_pairs())
def test_sub_inplace(pair: tuple[list[int], list[int]]) -> None:
    xs, ys = pair
    a, b = to_mont(xs), to_mont(ys)
    assert fr_vec.sub_inplace(a, b) is a
    assert from_mont(a) == [(x - y) % r for x, y in zip(xs, ys, strict=True)]
    assert from_mont(b) == ys


def test_mul_inplace_refuses_copies() -> None:
    a = to_mont([1, 2, 3, 4])
    for op in (fr_vec.mul_inplace, fr_vec.sub_inplace):
        with pytest.raises(ValueError, match="writeable C-contiguous"):
            op(a[::2], a[:2])
    frozen = a.copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        fr_vec.mul_inplace(frozen, a)


def test_length_mismatch_and_bad_shapes() -> None:
    a, b = to_mont([1, 2, 3]), to_mont([1, 2])
    for op in (fr_vec.add, fr_vec.sub, fr_vec.mul, fr_vec.inner_product):
        with pytest.raises(ValueError, match="length mismatch"):
            op(a, b)
    with pytest.raises(ValueError, match="length mismatch"):
        fr_vec.mul(a, to_mont([5]))  # no silent broadcasting in the public API
    with pytest.raises(TypeError):
        fr_vec.mul(a, a.astype(np.int64))


def test_readonly_and_strided_inputs() -> None:
    xs = random_ints(10, 1)
    a = to_mont(xs)
    ro = a.copy()
    ro.flags.writeable = False
    assert from_mont(fr_vec.mul(ro, ro)) == [x * x % r for x in xs]
    strided = np.repeat(a, 2, axis=0)[::2]
    assert from_mont(fr_vec.add(strided, a)) == [2 * x % r for x in xs]


@relaxed
@given(st.lists(field_ints, max_size=60))
def test_batch_inverse(xs: list[int]) -> None:
    inv = fr_vec.batch_inverse(to_mont(xs))
    assert from_mont(inv) == [pow(x, r - 2, r) for x in xs]  # 0 -> 0


@pytest.mark.parametrize("n", [1, 2, 1023, 2048, 5000])
def test_batch_inverse_chunks_with_zeros(n: int) -> None:
    xs = random_ints(n, n)
    for i in {0, n // 2, n // 2 - 1, n - 1} | set(range(0, n, 97)):
        if 0 <= i < n:
            xs[i] = 0
    a = to_mont(xs)
    inv = fr_vec.batch_inverse(a)
    assert from_mont(inv) == [pow(x, r - 2, r) if x else 0 for x in xs]
    assert from_mont(a) == xs


def test_batch_inverse_all_zero_and_empty() -> None:
    assert from_mont(fr_vec.batch_inverse(to_mont([0] * 3000))) == [0] * 3000
    assert fr_vec.batch_inverse(to_mont([])).shape == (0, 4)


@pytest.mark.parametrize("n", [0, 1, 2, 17, 1024, 5001])
@pytest.mark.parametrize("x", [0, 1, 2, r - 1, 0x1234567890ABCDEF1234567890ABCDEF])
def test_powers(n: int, x: int) -> None:
    assert from_mont(fr_vec.powers(x, n)) == [pow(x, i, r) for i in range(n)]


def test_powers_rejects_negative_length() -> None:
    with pytest.raises(ValueError):
        fr_vec.powers(3, -1)


@pytest.mark.parametrize("n", [0, 3, 4099])
def test_mul_powers_inplace(n: int) -> None:
    xs = random_ints(n, 7)
    a = to_mont(xs)
    assert fr_vec.mul_powers_inplace(a, 5, 3) is a
    assert from_mont(a) == [x * 3 * pow(5, i, r) % r for i, x in enumerate(xs)]


@relaxed
@given(vector_pairs(max_size=60))
def test_reductions(pair: tuple[list[int], list[int]]) -> None:
    xs, ys = pair
    a, b = to_mont(xs), to_mont(ys)
    assert fr_vec.inner_product(a, b) == sum(x * y for x, y in zip(xs, ys, strict=True)) % r
    assert fr_vec.sum_all(a) == sum(xs) % r


def test_reductions_over_chunks() -> None:
    xs, ys = random_ints(6000, 3), random_ints(6000, 4)
    a, b = to_mont(xs), to_mont(ys)
    assert fr_vec.inner_product(a, b) == sum(x * y for x, y in zip(xs, ys, strict=True)) % r
    assert fr_vec.sum_all(a) == sum(xs) % r
    assert fr_vec.sum_all(to_mont([r - 1] * 5000)) == -5000 % r


@relaxed
@given(field_ints)
def test_mont_unmont(x: int) -> None:
    row = fr_vec.mont(x)
    assert row.shape == (4,)
    assert fr_vec.unmont(row) == x
    assert fr_vec.mont(x + r).tolist() == row.tolist()
    assert np.array_equal(row, to_mont([x])[0])


# ---------------------------------------------------------------------------------------------------
# Sparse products


def random_csr(
    n_rows: int, n_cols: int, density: float, seed: int
) -> tuple[np.ndarray, np.ndarray, list[int], list[list[tuple[int, int]]]]:
    """A random CSR matrix plus its rows as (col, coeff) lists for the reference."""
    rng = random.Random(seed)
    rows: list[list[tuple[int, int]]] = []
    for _ in range(n_rows):
        cols = sorted(rng.sample(range(n_cols), rng.randint(0, max(0, int(n_cols * density)))))
        rows.append([(c, rng.choice([1, r - 1, rng.randrange(r)])) for c in cols])
    row_ptr = np.cumsum([0] + [len(row) for row in rows]).astype(np.int64)
    col_idx = np.array([c for row in rows for c, _ in row], dtype=np.int64)
    coeffs = [v for row in rows for _, v in row]
    return row_ptr, col_idx, coeffs, rows


@pytest.mark.parametrize(
    ("n_rows", "n_cols", "density"), [(0, 3, 0.5), (1, 1, 1.0), (13, 7, 0.5), (200, 150, 0.05)]
)
def test_spmv(n_rows: int, n_cols: int, density: float) -> None:
    row_ptr, col_idx, coeffs, rows = random_csr(n_rows, n_cols, density, n_rows + n_cols)
    coeffs_m = to_mont(coeffs)
    xc = random_ints(n_cols, 12)

    expected = [sum(v * xc[c] for c, v in row) % r for row in rows]
    assert from_mont(fr_vec.spmv(row_ptr, col_idx, coeffs_m, to_mont(xc))) == expected


def test_spmv_validation() -> None:
    row_ptr = np.array([0, 1, 2], dtype=np.int64)
    col_idx = np.array([0, 3], dtype=np.int64)
    coeffs = to_mont([1, 1])
    with pytest.raises(ValueError, match="col_idx out of range"):
        fr_vec.spmv(row_ptr, col_idx, coeffs, to_mont([1, 1, 1]))
    with pytest.raises(ValueError, match="declares 2 entries"):
        fr_vec.spmv(row_ptr, col_idx[:1], coeffs[:1], to_mont([1, 1, 1, 1]))
    with pytest.raises(ValueError, match="non-decreasing"):
        fr_vec.spmv(np.array([0, 2, 1]), col_idx, coeffs, to_mont([1, 1, 1, 1]))
