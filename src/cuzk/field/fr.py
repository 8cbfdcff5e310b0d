"""Single elements of the scalar field Fr, backed by Python ints.

``Fr`` is for readable code that handles a handful of values (keys, public inputs, test oracles);
bulk work uses the array kernels of :mod:`cuzk.field.fr_vec`. Modules that keep plain ints for speed
use the helpers :func:`fr_inv` and :func:`fr_pow`.
"""

from __future__ import annotations

import operator
import random as _random
import secrets

from cuzk.errors import FormatError
from cuzk.field.constants import FR_BYTES, R_MODULUS

__all__ = ["Fr", "fr_inv", "fr_pow"]


def fr_inv(x: int) -> int:
    """1/x mod r; raises ``ZeroDivisionError`` for x = 0 mod r."""
    x %= R_MODULUS
    if x == 0:
        raise ZeroDivisionError("0 has no inverse in Fr")
    return pow(x, -1, R_MODULUS)


def fr_pow(x: int, e: int) -> int:
    """x^e mod r for any integer e; a negative e inverts first (``ZeroDivisionError`` for x = 0)."""
    if e < 0:
        return pow(fr_inv(x), -e, R_MODULUS)
    return pow(x, e, R_MODULUS)


def _value_of(other: object) -> int | None:
    """The reduced int behind an ``Fr`` or an integer operand, or ``None`` for anything else."""
    if isinstance(other, Fr):
        return other._value
    if isinstance(other, int):
        return other % R_MODULUS
    return None


class Fr:
    """An element of Fr: immutable, hashable, always reduced (0 <= value < r).

    Arithmetic accepts ``Fr`` or ``int`` operands on either side; ints are reduced mod r. An ``Fr``
    equals an ``int`` with the same residue, and hashes like its value so such pairs hash alike.
    """

    __slots__ = ("_value",)
    _value: int

    def __init__(self, value: int | Fr = 0) -> None:
        v = value._value if isinstance(value, Fr) else operator.index(value) % R_MODULUS
        object.__setattr__(self, "_value", v)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Fr is immutable")

    def __reduce__(self) -> tuple[type[Fr], tuple[int]]:
        # Pickle through the constructor: the default slot-state path would hit __setattr__.
        return (Fr, (self._value,))

    # -- constructors ------------------------------------------------------------------------------

    @classmethod
    def zero(cls) -> Fr:
        return cls(0)

    @classmethod
    def one(cls) -> Fr:
        return cls(1)

    @classmethod
    def from_int(cls, x: int) -> Fr:
        """Reduce any integer mod r."""
        return cls(x)

    @classmethod
    def random(cls, rng: _random.Random | None = None) -> Fr:
        """A uniform element. Without ``rng`` it comes from ``secrets``: proof blinding needs that."""
        return cls(secrets.randbelow(R_MODULUS) if rng is None else rng.randrange(R_MODULUS))

    @classmethod
    def from_bytes_le(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        source: str | None = None,
        offset: int | None = None,
        field: str | None = None,
    ) -> Fr:
        """Decode 32 little-endian bytes, rejecting values >= r (a file must hold canonical values).

        ``source``, ``offset`` and ``field`` only locate the problem in the ``FormatError`` message.
        """
        where = {"source": source, "offset": offset, "field": field}
        if len(data) != FR_BYTES:
            raise FormatError(f"Fr element must be {FR_BYTES} bytes, got {len(data)}", **where)
        value = int.from_bytes(data, "little")
        if value >= R_MODULUS:
            raise FormatError("Fr element is not canonical: value >= r", **where)
        return cls(value)

    # -- conversions ---------------------------------------------------------------------------------

    @property
    def value(self) -> int:
        """The canonical integer, 0 <= value < r."""
        return self._value

    def to_bytes_le(self) -> bytes:
        return self._value.to_bytes(FR_BYTES, "little")

    def __int__(self) -> int:
        return self._value

    def __repr__(self) -> str:
        return f"Fr({self._value})"

    def __bool__(self) -> bool:
        return self._value != 0

    # -- comparison ----------------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        v = _value_of(other)
        return NotImplemented if v is None else self._value == v

    def __hash__(self) -> int:
        return hash(self._value)

    # -- arithmetic ----------------------------------------------------------------------------------

    def __add__(self, other: Fr | int) -> Fr:
        v = _value_of(other)
        return NotImplemented if v is None else Fr(self._value + v)

    __radd__ = __add__

    def __sub__(self, other: Fr | int) -> Fr:
        v = _value_of(other)
        return NotImplemented if v is None else Fr(self._value - v)

    def __rsub__(self, other: Fr | int) -> Fr:
        v = _value_of(other)
        return NotImplemented if v is None else Fr(v - self._value)

    def __mul__(self, other: Fr | int) -> Fr:
        v = _value_of(other)
        return NotImplemented if v is None else Fr(self._value * v)

    __rmul__ = __mul__

    def __truediv__(self, other: Fr | int) -> Fr:
        v = _value_of(other)
        return NotImplemented if v is None else Fr(self._value * fr_inv(v))

    def __rtruediv__(self, other: Fr | int) -> Fr:
        v = _value_of(other)
        return NotImplemented if v is None else Fr(v * fr_inv(self._value))

    def __neg__(self) -> Fr:
        return Fr(-self._value)

    def __pos__(self) -> Fr:
        return self

    def __pow__(self, exponent: int) -> Fr:
        if not isinstance(exponent, int):
            return NotImplemented
        return Fr(fr_pow(self._value, exponent))

    def inverse(self) -> Fr:
        """1/self; ``ZeroDivisionError`` for zero."""
        return Fr(fr_inv(self._value))
