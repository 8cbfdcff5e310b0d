"""32-bit words of circuit booleans, as bellperson's `uint32.rs` (docs/circuits.md §7).

Bits are stored LSB first. Rotations and shifts are pure wiring; xor/ch/maj go bit by bit (bit 0
first) through the `Boolean` rules, so constant bits cost nothing. `addmany` allocates the sum's
bits and hands the equality to a `MultiEq`. `value` mirrors bellperson's `Option<u32>`: it decides
`addmany`'s all-constant short cut together with the bits, so it is tracked the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cuzk.field.constants import R_MODULUS
from cuzk.gadgets.boolean import (
    FALSE,
    IS_KIND,
    NOT_KIND,
    TRUE,
    TRUE_KIND,
    AllocatedBit,
    Boolean,
)
from cuzk.gadgets.multieq import MultiEq
from cuzk.r1cs import ONE, ConstraintSystem, LinearCombination, Variable

_MASK = 0xFFFFFFFF


class UInt32:
    """32 Booleans, least significant first, and the word's value when every bit is known."""

    __slots__ = ("bits", "value")

    def __init__(self, bits: list[Boolean], value: int | None) -> None:
        self.bits = bits
        self.value = value

    @classmethod
    def constant(cls, value: int) -> UInt32:
        """A word of constant bits: never allocated, folded by every operation."""
        return cls([TRUE if value >> i & 1 else FALSE for i in range(32)], value & _MASK)

    @classmethod
    def alloc(cls, cs: ConstraintSystem, value: int | None) -> UInt32:
        """32 AllocatedBits LSB first, each with its booleanity row."""
        known = value if cs.needs_values else None
        bits = [Boolean(IS_KIND, AllocatedBit.alloc(cs, None if known is None else bool(known >> i & 1)))
                for i in range(32)]
        return cls(bits, None if known is None else known & _MASK)

    @classmethod
    def from_bits_be(cls, bits: Sequence[Boolean]) -> UInt32:
        """From 32 stream-order bits (first = MSB)."""
        if len(bits) != 32:
            raise ValueError(f"a UInt32 needs 32 bits, got {len(bits)}")
        return cls(list(reversed(bits)), _value_of(bits[::-1]))

    @classmethod
    def from_bits(cls, bits: Sequence[Boolean]) -> UInt32:
        """From 32 bits LSB first."""
        if len(bits) != 32:
            raise ValueError(f"a UInt32 needs 32 bits, got {len(bits)}")
        return cls(list(bits), _value_of(bits))

    def into_bits_be(self) -> list[Boolean]:
        """MSB first (SHA-256 stream order)."""
        return self.bits[::-1]

    def into_bits(self) -> list[Boolean]:
        """LSB first."""
        return list(self.bits)

    def rotr(self, by: int) -> UInt32:
        by %= 32
        bits = self.bits
        value = None if self.value is None else ((self.value >> by) | (self.value << (32 - by))) & _MASK
        return UInt32(bits[by:] + bits[:by], value)

    def shr(self, by: int) -> UInt32:
        """Shift right; constant false bits come in at the top."""
        by %= 32
        value = None if self.value is None else self.value >> by
        return UInt32(self.bits[by:] + [FALSE] * by, value)

    def xor(self, cs: ConstraintSystem, other: UInt32) -> UInt32:
        """Bitwise xor, bit 0 first; self's bit is each xor's first operand."""
        xor = Boolean.xor
        bits = [xor(cs, a, b) for a, b in zip(self.bits, other.bits, strict=True)]
        value = None if self.value is None or other.value is None else self.value ^ other.value
        return UInt32(bits, value)

    @staticmethod
    def sha256_ch(cs: ConstraintSystem, a: UInt32, b: UInt32, c: UInt32) -> UInt32:
        """(a ∧ b) ⊕ (¬a ∧ c) bit by bit, bit 0 first."""
        return _triop(cs, a, b, c, Boolean.sha256_ch, lambda x, y, z: (x & y) ^ (~x & z))

    @staticmethod
    def sha256_maj(cs: ConstraintSystem, a: UInt32, b: UInt32, c: UInt32) -> UInt32:
        """(a ∧ b) ⊕ (a ∧ c) ⊕ (b ∧ c) bit by bit, bit 0 first."""
        return _triop(cs, a, b, c, Boolean.sha256_maj, lambda x, y, z: (x & y) ^ (x & z) ^ (y & z))

    @staticmethod
    def addmany(meq: MultiEq, operands: Sequence[UInt32]) -> UInt32:
        """Sum of 2..10 words mod 2^32.

        All bits constant (and the value known) → a constant word, nothing emitted. Otherwise the
        sum's n_bits = bitlength(#operands·(2^32 - 1)) bits are allocated LSB first (each with its
        booleanity row) and MultiEq records Σ_operands Σ_i 2^i·bit_i = Σ_i 2^i·result_i; the carry
        bits beyond 32 are constrained but dropped.
        """
        if not 2 <= len(operands) <= 10:
            raise ValueError(f"addmany takes 2 to 10 operands, got {len(operands)}")
        n_bits = (len(operands) * _MASK).bit_length()
        total: int | None = 0
        terms: list[tuple[Variable, int]] = []
        one = 0
        all_constants = True
        for op in operands:
            if total is not None:
                total = None if op.value is None else total + op.value
            coeff = 1
            for bit in op.bits:
                kind = bit.kind
                if kind == IS_KIND:
                    terms.append((bit.bit.variable, coeff))  # type: ignore[union-attr]
                    all_constants = False
                elif kind == NOT_KIND:
                    terms.append((bit.bit.variable, R_MODULUS - coeff))  # type: ignore[union-attr]
                    one += coeff
                    all_constants = False
                elif kind == TRUE_KIND:
                    one += coeff
                coeff <<= 1
        modular = None if total is None else total & _MASK
        if all_constants and modular is not None:
            return UInt32.constant(modular)
        cs = meq.cs
        alloc = AllocatedBit.alloc
        result_bits: list[Boolean] = []
        rhs: list[tuple[Variable, int]] = []
        for i in range(n_bits):
            bit = alloc(cs, None if total is None else bool(total >> i & 1))
            rhs.append((bit.variable, 1 << i))
            result_bits.append(Boolean(IS_KIND, bit))
        lhs = LinearCombination([(ONE, one), *terms] if one else terms)
        meq.enforce_equal(n_bits, lhs, LinearCombination(rhs))
        return UInt32(result_bits[:32], modular)

    def __repr__(self) -> str:
        return f"UInt32({self.value if self.value is None else hex(self.value)})"


def _value_of(bits_lsb_first: Sequence[Boolean]) -> int | None:
    value = 0
    for i, bit in enumerate(bits_lsb_first):
        v = bit.get_value()
        if v is None:
            return None
        if v:
            value |= 1 << i
    return value


def _triop(cs: ConstraintSystem, a: UInt32, b: UInt32, c: UInt32,
           circuit_fn: Callable[[ConstraintSystem, Boolean, Boolean, Boolean], Boolean],
           value_fn: Callable[[int, int, int], int]) -> UInt32:
    value = (None if a.value is None or b.value is None or c.value is None
             else value_fn(a.value, b.value, c.value) & _MASK)
    bits = [circuit_fn(cs, x, y, z) for x, y, z in zip(a.bits, b.bits, c.bits, strict=True)]
    return UInt32(bits, value)
