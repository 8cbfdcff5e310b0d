"""Field-element gadgets, row for row as bellpepper-core's `num.rs` and storage-proofs-core's
`constraint.rs` / `insertion::pick` (docs/circuits.md §4).

An `AllocatedNum` is an aux (or input) variable with its value; `Num` is a linear combination with a
known value, used to pack bits without allocating. The A/B/C placement of every row matters (e.g.
`inputize` is input·ONE = x, not x·ONE = input), so each docstring states the row.
"""

from __future__ import annotations

from collections.abc import Callable

from cuzk.field.constants import R_MODULUS
from cuzk.gadgets.boolean import (
    IS_KIND,
    NOT_KIND,
    TRUE_KIND,
    AllocatedBit,
    Boolean,
    field_into_allocated_bits_le,
)
from cuzk.r1cs import ONE, ConstraintSystem, LinearCombination, Variable
from cuzk.r1cs.system import Annotation

_NEG_ONE = R_MODULUS - 1

NumValue = int | Callable[[], "int | None"] | None


class AllocatedNum:
    """A variable and its value (None on structure-only back ends or when unknown)."""

    __slots__ = ("value", "variable")

    def __init__(self, variable: Variable, value: int | None) -> None:
        self.variable = variable
        self.value = value

    def get_value(self) -> int | None:
        return self.value

    def get_variable(self) -> Variable:
        return self.variable

    @classmethod
    def alloc(cls, cs: ConstraintSystem, annotation: Annotation, value: NumValue) -> AllocatedNum:
        """One aux variable, no row. `value` may be lazy; it is only evaluated if the back end needs it."""
        v = _resolve(cs, value)
        return cls(cs.alloc(annotation, v), v)

    @classmethod
    def alloc_input(cls, cs: ConstraintSystem, annotation: Annotation, value: NumValue) -> AllocatedNum:
        """One public input, no row."""
        v = _resolve(cs, value)
        return cls(cs.alloc_input(annotation, v), v)

    def inputize(self, cs: ConstraintSystem, annotation: Annotation = "input variable") -> AllocatedNum:
        """Expose this value publicly: input y, row y * ONE = x. Returns y as a number."""
        y = cs.alloc_input(annotation, self.value)
        cs.enforce("enforce input is correct", LinearCombination([(y, 1)]), LinearCombination([(ONE, 1)]),
                   LinearCombination([(self.variable, 1)]))
        return AllocatedNum(y, self.value)

    def to_allocated_bits_le(self, cs: ConstraintSystem) -> list[AllocatedBit]:
        """255 AllocatedBits LSB first (each followed by its booleanity row), then the unpacking row
        0 * 0 = Σ 2^i·b_i - x (empty A and B). Non-strict: x and x + r both decompose; the honest
        witness is the canonical one."""
        bits = field_into_allocated_bits_le(cs, self.value)
        terms = [(bit.variable, 1 << i) for i, bit in enumerate(bits)]
        terms.append((self.variable, _NEG_ONE))
        cs.enforce("unpacking constraint", LinearCombination(), LinearCombination(), LinearCombination(terms))
        return bits

    def to_bits_le(self, cs: ConstraintSystem) -> list[Boolean]:
        """bellpepper's `to_bits_le`: as `to_allocated_bits_le`, as `Is` booleans."""
        return [Boolean(IS_KIND, bit) for bit in self.to_allocated_bits_le(cs)]

    def mul(self, cs: ConstraintSystem, other: AllocatedNum) -> AllocatedNum:
        """Aux y = a·b; row a * b = y."""
        value = None if self.value is None or other.value is None else self.value * other.value % R_MODULUS
        y = cs.alloc("product num", value)
        cs.enforce("multiplication constraint", LinearCombination([(self.variable, 1)]),
                   LinearCombination([(other.variable, 1)]), LinearCombination([(y, 1)]))
        return AllocatedNum(y, value)

    def square(self, cs: ConstraintSystem) -> AllocatedNum:
        """Aux y = x²; row x * x = y."""
        value = None if self.value is None else self.value * self.value % R_MODULUS
        y = cs.alloc("squared num", value)
        cs.enforce("squaring constraint", LinearCombination([(self.variable, 1)]),
                   LinearCombination([(self.variable, 1)]), LinearCombination([(y, 1)]))
        return AllocatedNum(y, value)

    def __repr__(self) -> str:
        return f"AllocatedNum({self.variable!r}, {self.value})"


def _resolve(cs: ConstraintSystem, value: NumValue) -> int | None:
    """Evaluate a (possibly lazy) value only when the back end computes values."""
    if not cs.needs_values:
        return None
    if callable(value):
        value = value()
    return None if value is None else int(value) % R_MODULUS


def _sum(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else (a + b) % R_MODULUS


def equal(cs: ConstraintSystem, a: AllocatedNum, b: AllocatedNum, annotation: Annotation = "equal") -> None:
    """constraint::equal: row a * ONE = b (A holds a, C holds b)."""
    cs.enforce(annotation, LinearCombination([(a.variable, 1)]), LinearCombination([(ONE, 1)]),
               LinearCombination([(b.variable, 1)]))


def sum_(cs: ConstraintSystem, a: AllocatedNum, b: AllocatedNum, total: AllocatedNum,
         annotation: Annotation = "sum constraint") -> None:
    """constraint::sum: row (a + b) * ONE = total."""
    cs.enforce(annotation, LinearCombination([(a.variable, 1), (b.variable, 1)]), LinearCombination([(ONE, 1)]),
               LinearCombination([(total.variable, 1)]))


def add(cs: ConstraintSystem, a: AllocatedNum, b: AllocatedNum) -> AllocatedNum:
    """constraint::add: aux s = a + b; row (a + b) * ONE = s."""
    s = AllocatedNum.alloc(cs, "add_num", lambda: _sum(a.value, b.value))
    sum_(cs, a, b, s)
    return s


def difference(cs: ConstraintSystem, a: AllocatedNum, b: AllocatedNum, diff: AllocatedNum,
               annotation: Annotation = "subtraction constraint") -> None:
    """constraint::difference: row (diff + b) * ONE = a."""
    cs.enforce(annotation, LinearCombination([(diff.variable, 1), (b.variable, 1)]), LinearCombination([(ONE, 1)]),
               LinearCombination([(a.variable, 1)]))


def sub(cs: ConstraintSystem, a: AllocatedNum, b: AllocatedNum) -> AllocatedNum:
    """constraint::sub: aux d = a - b; row (d + b) * ONE = a."""
    neg_b = None if b.value is None else -b.value % R_MODULUS
    d = AllocatedNum.alloc(cs, "sub_num", lambda: _sum(a.value, neg_b))
    difference(cs, a, b, d)
    return d


def pick(cs: ConstraintSystem, condition: Boolean, a: AllocatedNum, b: AllocatedNum) -> AllocatedNum:
    """insertion::pick, "a if condition else b": aux c; row (b - a) * condition = (b - c)."""

    def value() -> int | None:
        cond = condition.get_value()
        if cond is None:
            return None
        return a.value if cond else b.value

    c = AllocatedNum.alloc(cs, "pick result", value)
    cs.enforce("pick", LinearCombination([(b.variable, 1), (a.variable, _NEG_ONE)]), condition.lc(),
               LinearCombination([(b.variable, 1), (c.variable, _NEG_ONE)]))
    return c


class Num:
    """A linear combination with its value (bellpepper's `Num`): bits summed without allocating.

    `terms` never holds ONE; its coefficient is kept apart in `one` so repeated constants merge.
    """

    __slots__ = ("one", "terms", "value")

    def __init__(self, terms: list[tuple[Variable, int]] | None = None, one: int = 0,
                 value: int | None = 0) -> None:
        self.terms = [] if terms is None else terms
        self.one = one
        self.value = value

    @classmethod
    def zero(cls) -> Num:
        return cls()

    @classmethod
    def from_allocated(cls, num: AllocatedNum) -> Num:
        return cls([(num.variable, 1)], 0, num.value)

    def get_value(self) -> int | None:
        return self.value

    def add_bool_with_coeff(self, bit: Boolean, coeff: int) -> Num:
        """In place (unlike bellpepper, to avoid copying): self += coeff·bit. Returns self."""
        kind = bit.kind
        if kind == IS_KIND:
            self.terms.append((bit.bit.variable, coeff))  # type: ignore[union-attr]
        elif kind == NOT_KIND:
            self.terms.append((bit.bit.variable, -coeff % R_MODULUS))  # type: ignore[union-attr]
            self.one += coeff
        elif kind == TRUE_KIND:
            self.one += coeff
        if self.value is not None:
            bv = bit.get_value()
            if bv is None:
                self.value = None
            elif bv:
                self.value = (self.value + coeff) % R_MODULUS
        return self

    def add(self, other: Num) -> Num:
        """A new Num self + other; unknown if either value is unknown (bellpepper 0.2.1 instead kept
        the known one, a bug fixed upstream later; values never change the rows)."""
        return Num(self.terms + other.terms, self.one + other.one, _sum(self.value, other.value))

    def scale(self, scalar: int) -> Num:
        s = scalar % R_MODULUS
        return Num([(v, c * s % R_MODULUS) for v, c in self.terms], self.one * s % R_MODULUS,
                   None if self.value is None else self.value * s % R_MODULUS)

    def lc(self, coeff: int = 1) -> LinearCombination:
        """coeff · (this combination), ONE first."""
        k = coeff % R_MODULUS
        terms = self.terms if k == 1 else [(v, c * k % R_MODULUS) for v, c in self.terms]
        one = self.one * k % R_MODULUS
        return LinearCombination([(ONE, one), *terms] if one else terms)
