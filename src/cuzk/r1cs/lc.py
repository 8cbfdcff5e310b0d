"""Linear combinations: sums of (coefficient x variable) terms over Fr.

Like bellperson's `LinearCombination`, a combination is an ordered list of terms in which a variable
may repeat; evaluation sums the repeats. Order and repeats are kept because they are observable in
recorded constraint matrices; coefficients are ints reduced mod r.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cuzk.field.constants import R_MODULUS
from cuzk.r1cs.variable import ONE, Variable

Term = tuple[Variable, int]


class LinearCombination:
    """An ordered sum of terms. `+`/`-` return new combinations; `add_term` extends in place."""

    __slots__ = ("terms",)

    def __init__(self, terms: Iterable[Term] = ()) -> None:
        self.terms: list[Term] = list(terms)

    @classmethod
    def zero(cls) -> LinearCombination:
        return cls()

    @classmethod
    def of(cls, var: Variable, coeff: int = 1) -> LinearCombination:
        return cls([(var, coeff % R_MODULUS)])

    @classmethod
    def constant(cls, value: int) -> LinearCombination:
        """`value * ONE`."""
        return cls([(ONE, value % R_MODULUS)])

    def add_term(self, var: Variable, coeff: int = 1) -> LinearCombination:
        self.terms.append((var, coeff % R_MODULUS))
        return self

    def scaled(self, factor: int) -> LinearCombination:
        f = factor % R_MODULUS
        return LinearCombination([(v, c * f % R_MODULUS) for v, c in self.terms])

    def __add__(self, other: LinearCombination | Variable) -> LinearCombination:
        if isinstance(other, LinearCombination):
            return LinearCombination(self.terms + other.terms)
        if isinstance(other, Variable):
            return LinearCombination([*self.terms, (other, 1)])
        return NotImplemented

    def __sub__(self, other: LinearCombination | Variable) -> LinearCombination:
        if isinstance(other, LinearCombination):
            return LinearCombination(self.terms + [(v, -c % R_MODULUS) for v, c in other.terms])
        if isinstance(other, Variable):
            return LinearCombination([*self.terms, (other, R_MODULUS - 1)])
        return NotImplemented

    def __neg__(self) -> LinearCombination:
        return self.scaled(-1)

    def __rmul__(self, factor: int) -> LinearCombination:
        return self.scaled(factor)

    def __iter__(self) -> Iterator[Term]:
        return iter(self.terms)

    def __len__(self) -> int:
        return len(self.terms)

    def __repr__(self) -> str:
        return " + ".join(f"{c}*{v!r}" for v, c in self.terms) or "0"


def lc(*items: Variable | Term | LinearCombination) -> LinearCombination:
    """Build a combination from variables, (variable, coeff) pairs and other combinations.

    `lc(x, (y, 2), ONE)` is x + 2y + 1.
    """
    out = LinearCombination()
    for item in items:
        if isinstance(item, LinearCombination):
            out.terms.extend(item.terms)
        elif isinstance(item, Variable):
            out.terms.append((item, 1))
        else:
            var, coeff = item
            out.terms.append((var, coeff % R_MODULUS))
    return out
