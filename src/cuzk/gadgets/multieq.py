"""MultiEq: many small equalities packed into one row, as bellperson's `multieq.rs` (docs/circuits.md §7).

UInt32 additions inside a SHA-256 compression each need "Σ operand bits = Σ result bits" over at most
36 bits; MultiEq shifts each new equality above the previous ones and emits one row
(LHS) * ONE = (RHS) whenever the next one would reach CAPACITY (254) bits. Where a row is flushed
decides the row order, so the rule is reproduced literally: flush *before* adding when
254 <= bits_used + n, and flush the pending row when the compression function ends.
"""

from __future__ import annotations

from types import TracebackType

from cuzk.field.constants import R_MODULUS
from cuzk.r1cs import ONE, ConstraintSystem, LinearCombination, Variable

CAPACITY = 254


class MultiEq:
    """Accumulates equalities for one compression function. Use as a context manager, or call
    `finish()` where bellperson drops it."""

    __slots__ = ("_lhs", "_lhs_one", "_rhs", "_rhs_one", "bits_used", "cs", "ops")

    def __init__(self, cs: ConstraintSystem) -> None:
        self.cs = cs
        self.ops = 0
        self.bits_used = 0
        self._lhs: list[tuple[Variable, int]] = []
        self._rhs: list[tuple[Variable, int]] = []
        # ONE coefficients kept apart (unreduced) so all constants merge into one term, as in bellperson.
        self._lhs_one = 0
        self._rhs_one = 0

    def _accumulate(self) -> None:
        one_l, one_r = self._lhs_one % R_MODULUS, self._rhs_one % R_MODULUS
        lhs = [(ONE, one_l), *self._lhs] if one_l else self._lhs
        rhs = [(ONE, one_r), *self._rhs] if one_r else self._rhs
        self.cs.enforce("multieq", LinearCombination(lhs), LinearCombination([(ONE, 1)]), LinearCombination(rhs))
        self._lhs, self._rhs = [], []
        self._lhs_one = self._rhs_one = 0
        self.bits_used = 0
        self.ops += 1

    def enforce_equal(self, num_bits: int, lhs: LinearCombination, rhs: LinearCombination) -> None:
        """Record lhs = rhs, both known to be < 2^num_bits; may first emit the pending row."""
        if self.bits_used + num_bits >= CAPACITY:
            self._accumulate()
        if self.bits_used + num_bits >= CAPACITY:
            raise ValueError(f"an equality of {num_bits} bits does not fit in one field element")
        shift = 1 << self.bits_used
        one = 0
        out = self._lhs
        for var, coeff in lhs.terms:
            if var == ONE:
                one += coeff
            else:
                out.append((var, coeff * shift % R_MODULUS))
        self._lhs_one += one * shift
        one = 0
        out = self._rhs
        for var, coeff in rhs.terms:
            if var == ONE:
                one += coeff
            else:
                out.append((var, coeff * shift % R_MODULUS))
        self._rhs_one += one * shift
        self.bits_used += num_bits

    def finish(self) -> None:
        """Emit the pending row, if any (bellperson's Drop)."""
        if self.bits_used > 0:
            self._accumulate()

    def __enter__(self) -> MultiEq:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.finish()
