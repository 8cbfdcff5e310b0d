"""Fr (single elements) against plain Python int arithmetic mod r."""

from __future__ import annotations

import pickle
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuzk.errors import FormatError
from cuzk.field import Fr, fr_inv, fr_pow
from cuzk.field.constants import R_MODULUS

r = R_MODULUS

EDGE = [0, 1, 2, r - 1, r - 2, (r - 1) // 2, (1 << 255) % r, (1 << 254), (1 << 64) - 1, 1 << 64]
field_ints = st.one_of(st.sampled_from(EDGE), st.integers(0, r - 1))
any_ints = st.one_of(
    field_ints, st.integers(-(1 << 300), 1 << 300), st.sampled_from([r, r + 1, -1, -r, 2 * r])
)


@given(any_ints)
def test_constructor_reduces(x: int) -> None:
    assert int(Fr(x)) == x % r
    assert Fr(Fr(x)) == Fr(x)
    assert Fr.from_int(x) == Fr(x)
    assert 0 <= Fr(x).value < r


@given(field_ints, field_ints)
def test_ring_operations_match_ints(x: int, y: int) -> None:
    a, b = Fr(x), Fr(y)
    assert int(a + b) == (x + y) % r
    assert int(a - b) == (x - y) % r
    assert int(a * b) == (x * y) % r
    assert int(-a) == (-x) % r
    assert int(+a) == x


@given(field_ints, any_ints)
def test_mixed_int_operands(x: int, y: int) -> None:
    a = Fr(x)
    assert a + y == Fr(x + y)
    assert y + a == Fr(x + y)
    assert a - y == Fr(x - y)
    assert y - a == Fr(y - x)
    assert a * y == Fr(x * y)
    assert y * a == Fr(x * y)


@given(field_ints, field_ints.filter(lambda v: v != 0))
def test_division(x: int, y: int) -> None:
    q = Fr(x) / Fr(y)
    assert int(q * Fr(y)) == x
    assert int(q) == x * pow(y, r - 2, r) % r
    assert Fr(x) / y == q
    if x:
        assert int(y / Fr(x)) == y * pow(x, r - 2, r) % r


def test_division_by_zero_raises() -> None:
    with pytest.raises(ZeroDivisionError):
        Fr(5) / Fr(0)
    with pytest.raises(ZeroDivisionError):
        3 / Fr(0)
    with pytest.raises(ZeroDivisionError):
        Fr(0).inverse()
    with pytest.raises(ZeroDivisionError):
        Fr(r) ** -1


@given(field_ints, st.integers(-300, 300))
def test_pow(x: int, e: int) -> None:
    if x == 0 and e < 0:
        with pytest.raises(ZeroDivisionError):
            Fr(x) ** e
        return
    expected = pow(x, e, r) if e >= 0 else pow(pow(x, r - 2, r), -e, r)
    assert int(Fr(x) ** e) == expected
    assert fr_pow(x, e) == expected


def test_pow_edge_cases() -> None:
    assert Fr(0) ** 0 == Fr(1)
    assert Fr(r - 1) ** 2 == Fr(1)
    assert Fr(7) ** (r - 1) == Fr(1)
    assert Fr(2) ** -1 * 2 == Fr(1)


@given(field_ints.filter(lambda v: v != 0))
def test_fr_inv(x: int) -> None:
    assert x * fr_inv(x) % r == 1
    assert fr_inv(x + r) == fr_inv(x)
    assert Fr(x).inverse() == Fr(fr_inv(x))


def test_fr_inv_zero_raises() -> None:
    with pytest.raises(ZeroDivisionError):
        fr_inv(0)
    with pytest.raises(ZeroDivisionError):
        fr_inv(r)


@given(field_ints)
def test_equality_and_hash(x: int) -> None:
    assert Fr(x) == Fr(x + r)
    assert Fr(x) == x
    assert Fr(x) == x + r
    assert hash(Fr(x)) == hash(Fr(x + r)) == hash(x)
    assert Fr(x) != Fr(x + 1)
    assert len({Fr(x), Fr(x + r), Fr(x + 1)}) == 2


def test_equality_with_other_types_is_false() -> None:
    assert Fr(1) != "1"
    assert Fr(1) != 1.0
    assert Fr(0) != None  # noqa: E711 (the operator itself is under test)


def test_constants_and_repr() -> None:
    assert Fr.zero() == 0 and not Fr.zero()
    assert Fr.one() == 1 and Fr.one()
    assert repr(Fr(42)) == "Fr(42)"
    assert repr(Fr(-1)) == f"Fr({r - 1})"


def test_immutable_and_picklable() -> None:
    a = Fr(123)
    with pytest.raises(AttributeError):
        a._value = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        a.other = 5  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(a)) == a


def test_rejects_non_integers() -> None:
    with pytest.raises(TypeError):
        Fr(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Fr(1) + 1.5  # type: ignore[operator]
    with pytest.raises(TypeError):
        Fr(2) ** Fr(3)  # type: ignore[operator]


@given(field_ints)
def test_bytes_round_trip(x: int) -> None:
    data = Fr(x).to_bytes_le()
    assert data == x.to_bytes(32, "little")
    assert Fr.from_bytes_le(data) == Fr(x)
    assert Fr.from_bytes_le(memoryview(bytearray(data))) == Fr(x)


@pytest.mark.parametrize("value", [r, r + 1, (1 << 256) - 1, (1 << 255)])
def test_from_bytes_rejects_non_canonical(value: int) -> None:
    with pytest.raises(FormatError, match="not canonical: value >= r"):
        Fr.from_bytes_le(value.to_bytes(32, "little"))


@pytest.mark.parametrize("length", [0, 31, 33, 64])
def test_from_bytes_rejects_wrong_length(length: int) -> None:
    with pytest.raises(FormatError, match=f"must be 32 bytes, got {length}"):
        Fr.from_bytes_le(bytes(length))


def test_from_bytes_error_names_location() -> None:
    with pytest.raises(FormatError) as info:
        Fr.from_bytes_le(r.to_bytes(32, "little"), source="key.params", offset=96, field="alpha")
    assert str(info.value) == "key.params: offset 96: alpha: Fr element is not canonical: value >= r"
    assert info.value.offset == 96


def test_random() -> None:
    assert Fr.random(random.Random(5)) == Fr.random(random.Random(5))
    assert Fr.random(random.Random(5)) != Fr.random(random.Random(6))
    values = {Fr.random() for _ in range(20)}
    assert len(values) == 20
    assert all(0 <= v.value < r for v in values)
