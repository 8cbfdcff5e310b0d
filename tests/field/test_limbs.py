"""Limb-array conversions and checks against Python int references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuzk.field import (
    as_limb_array,
    bytes_le_to_limbs,
    check_canonical,
    fr_vec,
    int_to_limbs,
    ints_to_limbs,
    is_one_mask,
    is_zero_mask,
    limbs_to_bytes_le,
    limbs_to_int,
    limbs_to_ints,
)
from cuzk.field.constants import FR_MONT_R, R_MODULUS

r = R_MODULUS
MASK64 = (1 << 64) - 1
EDGE = [0, 1, r - 1, r - 2, (1 << 64) - 1, 1 << 64, (1 << 255) % r, (r >> 64) << 64]
field_ints = st.one_of(st.sampled_from(EDGE), st.integers(0, r - 1))
field_lists = st.lists(field_ints, max_size=40)
# No per-example deadline: the first example of a test may include numba compilation.
relaxed = settings(deadline=None)


def reference_limbs(values: list[int]) -> np.ndarray:
    """The layout spelled out: row i, column j holds bits 64j .. 64j+63 of values[i]."""
    return np.array([[(v >> (64 * j)) & MASK64 for j in range(4)] for v in values], dtype=np.uint64).reshape(
        -1, 4
    )


@relaxed
@given(field_lists)
def test_ints_round_trip_and_layout(values: list[int]) -> None:
    arr = ints_to_limbs(values)
    assert arr.shape == (len(values), 4)
    assert arr.dtype == np.uint64
    assert np.array_equal(arr, reference_limbs(values))
    assert limbs_to_ints(arr) == values


@relaxed
@given(field_ints)
def test_single_int_round_trip(x: int) -> None:
    row = int_to_limbs(x)
    assert row.shape == (4,)
    assert [int(v) for v in row] == [(x >> (64 * j)) & MASK64 for j in range(4)]
    assert limbs_to_int(row) == x


@relaxed
@given(field_lists)
def test_bytes_round_trip(values: list[int]) -> None:
    data = b"".join(v.to_bytes(32, "little") for v in values)
    arr = bytes_le_to_limbs(data)
    assert np.array_equal(arr, reference_limbs(values))
    assert limbs_to_bytes_le(arr) == data


def test_empty_inputs() -> None:
    assert ints_to_limbs([]).shape == (0, 4)
    assert limbs_to_ints(np.zeros((0, 4), dtype=np.uint64)) == []
    assert bytes_le_to_limbs(b"").shape == (0, 4)
    assert check_canonical(np.zeros((0, 4), dtype=np.uint64)) == -1


@pytest.mark.parametrize(
    ("bad", "index"), [(r, 0), (r, 4), (-1, 2), (1 << 256, 4), ((1 << 256) - 1, 1), (r + (1 << 64), 3)]
)
def test_ints_to_limbs_names_first_bad_index(bad: int, index: int) -> None:
    values = [1, 2, 3, 4, 5]
    values[index] = bad
    if index + 1 < len(values):
        values[index + 1] = r + 5  # a later bad value must not be the one reported
    with pytest.raises(ValueError, match=f"index {index} "):
        ints_to_limbs(values)


def test_ints_to_limbs_accepts_numpy_integers_and_rejects_others() -> None:
    assert limbs_to_ints(ints_to_limbs([np.uint64(7), np.int64(9)])) == [7, 9]
    with pytest.raises(TypeError, match="index 1"):
        ints_to_limbs([1, 2.0])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="not a canonical"):
        int_to_limbs(r)
    with pytest.raises(ValueError):
        int_to_limbs(-1)


def test_bytes_le_to_limbs_is_zero_copy() -> None:
    buf = bytearray(b"".join(v.to_bytes(32, "little") for v in [5, 6, 7]))
    arr = bytes_le_to_limbs(buf)
    assert np.shares_memory(arr, np.frombuffer(buf, dtype=np.uint8))
    buf[32] = 9
    assert int(arr[1, 0]) == 9
    assert not bytes_le_to_limbs(bytes(buf)).flags.writeable


def test_bytes_le_to_limbs_inputs_and_counts() -> None:
    values = [11, r - 1, 13]
    data = b"".join(v.to_bytes(32, "little") for v in values)
    padded = data + b"trailer"
    assert limbs_to_ints(bytes_le_to_limbs(padded, 2)) == values[:2]
    assert limbs_to_ints(bytes_le_to_limbs(memoryview(padded)[32:], 2)) == values[1:]
    assert limbs_to_ints(bytes_le_to_limbs(np.frombuffer(data, dtype=np.uint8))) == values
    assert limbs_to_ints(bytes_le_to_limbs(np.frombuffer(data, dtype=np.uint64).reshape(3, 4))) == values
    assert bytes_le_to_limbs(data, 0).shape == (0, 4)
    with pytest.raises(ValueError, match="not a multiple of 32"):
        bytes_le_to_limbs(padded)
    with pytest.raises(ValueError, match="cannot hold 4 elements"):
        bytes_le_to_limbs(data, 4)


def test_unaligned_view_still_works() -> None:
    data = b"\x00" + b"".join(v.to_bytes(32, "little") for v in [3, r - 1])
    arr = bytes_le_to_limbs(memoryview(data)[1:])
    assert limbs_to_ints(arr) == [3, r - 1]
    assert check_canonical(arr) == -1


@pytest.mark.parametrize("n", [1, 2, 7, 1000])
@pytest.mark.parametrize("where", ["first", "last", "middle"])
@pytest.mark.parametrize("bad", [r, r + 1, (1 << 256) - 1, r + (1 << 192), r | 0xFFFF])
def test_check_canonical_finds_first_bad(n: int, where: str, bad: int) -> None:
    values = [r - 1 - i for i in range(n)]
    index = {"first": 0, "last": n - 1, "middle": n // 2}[where]
    values[index] = bad
    arr = reference_limbs(values)
    assert check_canonical(arr) == index
    if index + 1 < n:
        arr[-1] = reference_limbs([r])[0]
        assert check_canonical(arr) == index


def test_check_canonical_accepts_near_r() -> None:
    near = [r - 1, r - (1 << 64), r - (1 << 192), (r >> 192) << 192, 0]
    assert check_canonical(reference_limbs(near)) == -1


@relaxed
@given(st.lists(st.sampled_from([0, 1, 2, r - 1, FR_MONT_R, 1 << 64]), max_size=30))
def test_masks(values: list[int]) -> None:
    arr = ints_to_limbs(values)
    assert is_zero_mask(arr).tolist() == [v == 0 for v in values]
    assert is_one_mask(arr).tolist() == [v == 1 for v in values]
    assert is_one_mask(arr, montgomery=True).tolist() == [v == FR_MONT_R for v in values]
    mont = fr_vec.to_montgomery(arr)
    assert is_one_mask(mont, montgomery=True).tolist() == [v == 1 for v in values]
    assert is_zero_mask(mont).tolist() == [v == 0 for v in values]


def test_as_limb_array_validation() -> None:
    good = np.zeros((3, 4), dtype=np.uint64)
    assert as_limb_array(good) is good
    strided = np.zeros((6, 4), dtype=np.uint64)[::2]
    assert as_limb_array(strided).flags.c_contiguous
    with pytest.raises(ValueError, match="shape"):
        as_limb_array(np.zeros((3, 3), dtype=np.uint64))
    with pytest.raises(ValueError, match="shape"):
        as_limb_array(np.zeros(4, dtype=np.uint64))
    with pytest.raises(TypeError, match="dtype"):
        as_limb_array(np.zeros((3, 4), dtype=np.int64))
    with pytest.raises(TypeError, match="numpy array"):
        as_limb_array([[0, 0, 0, 0]])  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        limbs_to_int(np.zeros(3, dtype=np.uint64))


def test_the_canonical_check_lets_other_threads_run() -> None:
    # A device process checks a 4 GB witness while its other prover threads launch kernels: the
    # check must not hold the GIL. Zeros read from the kernel's zero page, so this takes no memory.
    import threading
    import time

    arr = np.zeros((1 << 25, 4), dtype=np.uint64)
    check_canonical(arr[:1])
    ticks: list[int] = []
    done = threading.Event()

    def tick() -> None:
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.0005)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        time.sleep(0.01)
        before = len(ticks)
        assert check_canonical(arr) == -1
        during = len(ticks) - before
    finally:
        done.set()
        ticker.join()
    assert during >= 3


@pytest.mark.parametrize("bad_rows", [[], [0], [9], [10], [37], [99], [5, 60], [61, 3], [20, 40, 80]])
def test_check_canonical_in_parts_finds_the_first_bad_row(monkeypatch: pytest.MonkeyPatch, bad_rows: list[int]) -> None:
    # Parts of at least 10 rows: 100 rows in up to 10 ranges side by side (as many as numba's threads).
    from cuzk.field import limbs

    monkeypatch.setattr(limbs, "CHECK_PART_ROWS", 10)
    values = [r - 1 - i for i in range(100)]
    for row in bad_rows:
        values[row] = r + row
    arr = reference_limbs(values)
    want = min(bad_rows) if bad_rows else -1
    assert check_canonical(arr) == want
    assert all(limbs._first_geq_r(arr, parts) == want for parts in range(1, 11))  # more ranges than threads too
