"""Circuit booleans, row for row as bellpepper-core 0.2.1's `boolean.rs` (docs/circuits.md §4, §7).

An `AllocatedBit` is an aux variable with its booleanity row. A `Boolean` is a *view*: a constant,
a bit (`Is`) or its negation (`Not`, free). Every boolean operation folds constants without emitting
anything, and picks its row from the operands' kinds in a fixed order; both decide which rows exist
at all, so published Filecoin parameters only match if these rules are followed literally. SHA-256
padding, IVs, round constants and the fr32 pad bits are constants, so the folding is what makes the
stated constraint counts come out.

Values follow bellperson's `Option<bool>`: `None` on structure-only back ends (`cs.needs_values` is
False), where no value is ever computed.
"""

from __future__ import annotations

from collections.abc import Sequence

from cuzk.errors import SynthesisError
from cuzk.field.constants import FR_BITS, R_MODULUS
from cuzk.r1cs import ONE, ConstraintSystem, LinearCombination, Variable

_NEG_ONE = R_MODULUS - 1

# Boolean kinds. The two constants come first so that `kind <= TRUE` means "constant".
FALSE_KIND = 0
TRUE_KIND = 1
IS_KIND = 2
NOT_KIND = 3


class AllocatedBit:
    """An aux variable constrained to 0 or 1, with its value (None when unknown or not computed)."""

    __slots__ = ("value", "variable")

    def __init__(self, variable: Variable, value: bool | None) -> None:
        self.variable = variable
        self.value = value

    def get_value(self) -> bool | None:
        return self.value

    @classmethod
    def alloc(cls, cs: ConstraintSystem, value: bool | None, annotation: str = "boolean") -> AllocatedBit:
        """Aux b, then the row (ONE - b) * b = 0."""
        known = value if cs.needs_values else None
        var = cs.alloc(annotation, None if known is None else int(known))
        cs.enforce("boolean constraint",
                   LinearCombination([(ONE, 1), (var, _NEG_ONE)]),
                   LinearCombination([(var, 1)]),
                   LinearCombination())
        return cls(var, None if known is None else bool(known))

    @classmethod
    def xor(cls, cs: ConstraintSystem, a: AllocatedBit, b: AllocatedBit) -> AllocatedBit:
        """Aux r = a ^ b; row (a + a) * b = a + b - r (`a + a` is the merged term 2a)."""
        value = None if a.value is None or b.value is None else a.value ^ b.value
        r = cs.alloc("xor result", None if value is None else int(value))
        av, bv = a.variable, b.variable
        cs.enforce("xor constraint",
                   LinearCombination([(av, 2)]),
                   LinearCombination([(bv, 1)]),
                   LinearCombination([(av, 1), (bv, 1), (r, _NEG_ONE)]))
        return cls(r, value)

    @classmethod
    def and_(cls, cs: ConstraintSystem, a: AllocatedBit, b: AllocatedBit) -> AllocatedBit:
        """Aux r = a & b; row a * b = r."""
        value = None if a.value is None or b.value is None else a.value and b.value
        r = cs.alloc("and result", None if value is None else int(value))
        cs.enforce("and constraint",
                   LinearCombination([(a.variable, 1)]),
                   LinearCombination([(b.variable, 1)]),
                   LinearCombination([(r, 1)]))
        return cls(r, value)

    @classmethod
    def and_not(cls, cs: ConstraintSystem, a: AllocatedBit, b: AllocatedBit) -> AllocatedBit:
        """Aux r = a & !b; row a * (ONE - b) = r."""
        value = None if a.value is None or b.value is None else a.value and not b.value
        r = cs.alloc("and not result", None if value is None else int(value))
        cs.enforce("and not constraint",
                   LinearCombination([(a.variable, 1)]),
                   LinearCombination([(ONE, 1), (b.variable, _NEG_ONE)]),
                   LinearCombination([(r, 1)]))
        return cls(r, value)

    @classmethod
    def nor(cls, cs: ConstraintSystem, a: AllocatedBit, b: AllocatedBit) -> AllocatedBit:
        """Aux r = !a & !b; row (ONE - a) * (ONE - b) = r."""
        value = None if a.value is None or b.value is None else not a.value and not b.value
        r = cs.alloc("nor result", None if value is None else int(value))
        cs.enforce("nor constraint",
                   LinearCombination([(ONE, 1), (a.variable, _NEG_ONE)]),
                   LinearCombination([(ONE, 1), (b.variable, _NEG_ONE)]),
                   LinearCombination([(r, 1)]))
        return cls(r, value)

    def __repr__(self) -> str:
        return f"AllocatedBit({self.variable!r}, {self.value})"


class Boolean:
    """Constant(bool) | Is(bit) | Not(bit). Build with `Constant`, `Is`, `Not`; never mutated."""

    __slots__ = ("bit", "kind")

    def __init__(self, kind: int, bit: AllocatedBit | None = None) -> None:
        self.kind = kind
        self.bit = bit

    # -- views ------------------------------------------------------------------------------
    @property
    def is_constant(self) -> bool:
        return self.kind <= TRUE_KIND

    def get_value(self) -> bool | None:
        kind = self.kind
        if kind <= TRUE_KIND:
            return kind == TRUE_KIND
        value = self.bit.value  # type: ignore[union-attr]
        if value is None:
            return None
        return value if kind == IS_KIND else not value

    def not_(self) -> Boolean:
        """The negated view; free (no row), as in bellpepper."""
        kind = self.kind
        if kind == FALSE_KIND:
            return TRUE
        if kind == TRUE_KIND:
            return FALSE
        return Boolean(NOT_KIND if kind == IS_KIND else IS_KIND, self.bit)

    def lc(self, one: Variable = ONE, coeff: int = 1) -> LinearCombination:
        """Is: +c·var; Not: c·ONE - c·var; Constant true: c·ONE; Constant false: nothing."""
        c = coeff % R_MODULUS
        kind = self.kind
        if kind == IS_KIND:
            return LinearCombination([(self.bit.variable, c)])  # type: ignore[union-attr]
        if kind == NOT_KIND:
            return LinearCombination([(one, c), (self.bit.variable, -c % R_MODULUS)])  # type: ignore[union-attr]
        if kind == TRUE_KIND:
            return LinearCombination([(one, c)])
        return LinearCombination()

    # -- operations (rules and operand orders of bellpepper-core, docs/circuits.md §7) ------
    @staticmethod
    def xor(cs: ConstraintSystem, a: Boolean, b: Boolean) -> Boolean:
        """false ⊕ x = x; true ⊕ x = ¬x; Is ⊕ Not = ¬xor(is, not's bit); same kinds: Is(xor(a, b))."""
        ka, kb = a.kind, b.kind
        if ka == FALSE_KIND:
            return b
        if kb == FALSE_KIND:
            return a
        if ka == TRUE_KIND:
            return b.not_()
        if kb == TRUE_KIND:
            return a.not_()
        if ka == kb:
            return Boolean(IS_KIND, AllocatedBit.xor(cs, a.bit, b.bit))  # type: ignore[arg-type]
        if ka == IS_KIND:
            return Boolean(NOT_KIND, AllocatedBit.xor(cs, a.bit, b.bit))  # type: ignore[arg-type]
        # (Not, Is): the Is operand is the row's first operand.
        return Boolean(NOT_KIND, AllocatedBit.xor(cs, b.bit, a.bit))  # type: ignore[arg-type]

    @staticmethod
    def and_(cs: ConstraintSystem, a: Boolean, b: Boolean) -> Boolean:
        """false ∧ x = false; true ∧ x = x; Is ∧ Not = and_not(is, not); Not ∧ Not = nor; Is ∧ Is = and."""
        ka, kb = a.kind, b.kind
        if ka == FALSE_KIND or kb == FALSE_KIND:
            return FALSE
        if ka == TRUE_KIND:
            return b
        if kb == TRUE_KIND:
            return a
        if ka == IS_KIND:
            if kb == NOT_KIND:
                return Boolean(IS_KIND, AllocatedBit.and_not(cs, a.bit, b.bit))  # type: ignore[arg-type]
            return Boolean(IS_KIND, AllocatedBit.and_(cs, a.bit, b.bit))  # type: ignore[arg-type]
        if kb == IS_KIND:
            return Boolean(IS_KIND, AllocatedBit.and_not(cs, b.bit, a.bit))  # type: ignore[arg-type]
        return Boolean(IS_KIND, AllocatedBit.nor(cs, a.bit, b.bit))  # type: ignore[arg-type]

    @staticmethod
    def sha256_ch(cs: ConstraintSystem, a: Boolean, b: Boolean, c: Boolean) -> Boolean:
        """(a ∧ b) ⊕ (¬a ∧ c), short cuts tested in bellpepper's order, else one aux and one row.

        General row: (b - c) * a = ch - c, with the Boolean LCs of a, b, c.
        """
        ka, kb, kc = a.kind, b.kind, c.kind
        va, vb, vc = a.get_value(), b.get_value(), c.get_value()
        value = None if va is None or vb is None or vc is None else (va and vb) ^ ((not va) and vc)
        if ka <= TRUE_KIND and kb <= TRUE_KIND and kc <= TRUE_KIND:
            return TRUE if value else FALSE
        if ka == FALSE_KIND:
            return c
        if kb == FALSE_KIND:
            return Boolean.and_(cs, a.not_(), c)
        if kc == FALSE_KIND:
            return Boolean.and_(cs, a, b)
        if kc == TRUE_KIND:
            return Boolean.and_(cs, a, b.not_()).not_()
        if kb == TRUE_KIND:
            return Boolean.and_(cs, a.not_(), c.not_()).not_()
        # a is true or a bit; b and c are bits.
        ch = cs.alloc("ch", None if value is None else int(value))
        row_a: list[tuple[Variable, int]] = []
        one_a = _add_signed(row_a, b, 1) + _add_signed(row_a, c, _NEG_ONE)
        row_b: list[tuple[Variable, int]] = []
        one_b = _add_signed(row_b, a, 1)
        row_c: list[tuple[Variable, int]] = [(ch, 1)]
        one_c = _add_signed(row_c, c, _NEG_ONE)
        cs.enforce("ch computation", _with_one(row_a, one_a), _with_one(row_b, one_b), _with_one(row_c, one_c))
        return Boolean(IS_KIND, AllocatedBit(ch, value))

    @staticmethod
    def sha256_maj(cs: ConstraintSystem, a: Boolean, b: Boolean, c: Boolean) -> Boolean:
        """(a ∧ b) ⊕ (a ∧ c) ⊕ (b ∧ c), short cuts in bellpepper's order, else aux maj, bc = b ∧ c
        (aux + row), then the row (2·bc - b - c) * a = bc - maj.
        """
        ka, kb, kc = a.kind, b.kind, c.kind
        va, vb, vc = a.get_value(), b.get_value(), c.get_value()
        value = (None if va is None or vb is None or vc is None
                 else (va and vb) ^ (va and vc) ^ (vb and vc))
        if ka <= TRUE_KIND and kb <= TRUE_KIND and kc <= TRUE_KIND:
            return TRUE if value else FALSE
        if ka == FALSE_KIND:
            return Boolean.and_(cs, b, c)
        if kb == FALSE_KIND:
            return Boolean.and_(cs, a, c)
        if kc == FALSE_KIND:
            return Boolean.and_(cs, a, b)
        if kc == TRUE_KIND:
            return Boolean.and_(cs, a.not_(), b.not_()).not_()
        if kb == TRUE_KIND:
            return Boolean.and_(cs, a.not_(), c.not_()).not_()
        if ka == TRUE_KIND:
            return Boolean.and_(cs, b.not_(), c.not_()).not_()
        maj = cs.alloc("maj", None if value is None else int(value))
        bc = Boolean.and_(cs, b, c)
        row_a: list[tuple[Variable, int]] = []
        one_a = _add_signed(row_a, bc, 2) + _add_signed(row_a, b, _NEG_ONE) + _add_signed(row_a, c, _NEG_ONE)
        row_b: list[tuple[Variable, int]] = []
        one_b = _add_signed(row_b, a, 1)
        row_c: list[tuple[Variable, int]] = []
        one_c = _add_signed(row_c, bc, 1)
        row_c.append((maj, _NEG_ONE))
        cs.enforce("maj computation", _with_one(row_a, one_a), _with_one(row_b, one_b), _with_one(row_c, one_c))
        return Boolean(IS_KIND, AllocatedBit(maj, value))

    @staticmethod
    def enforce_equal(cs: ConstraintSystem, a: Boolean, b: Boolean) -> None:
        """bellpepper's Boolean::enforce_equal: rows 0 * 0 = (difference), constants folded.

        Raises SynthesisError for two different constants (bellpepper: `Unsatisfiable`).
        """
        ka, kb = a.kind, b.kind
        if ka <= TRUE_KIND and kb <= TRUE_KIND:
            if ka != kb:
                raise SynthesisError("enforce_equal of two different constants is unsatisfiable")
            return
        if ka == TRUE_KIND or kb == TRUE_KIND:
            other = b if ka == TRUE_KIND else a
            c_terms: list[tuple[Variable, int]] = []
            one = 1 + _add_signed(c_terms, other, _NEG_ONE)
            cs.enforce("enforce equal to one", LinearCombination(), LinearCombination(), _with_one(c_terms, one))
            return
        if ka == FALSE_KIND or kb == FALSE_KIND:
            other = b if ka == FALSE_KIND else a
            cs.enforce("enforce equal to zero", LinearCombination(), LinearCombination(), other.lc())
            return
        terms: list[tuple[Variable, int]] = []
        one = _add_signed(terms, a, 1) + _add_signed(terms, b, _NEG_ONE)
        cs.enforce("enforce equal", LinearCombination(), LinearCombination(), _with_one(terms, one))

    def __repr__(self) -> str:
        kind = self.kind
        if kind <= TRUE_KIND:
            return f"Constant({kind == TRUE_KIND})"
        return f"{'Is' if kind == IS_KIND else 'Not'}({self.bit!r})"


FALSE = Boolean(FALSE_KIND)
TRUE = Boolean(TRUE_KIND)


def Constant(value: bool) -> Boolean:
    """Boolean::Constant: folded away by every operation, never allocated."""
    return TRUE if value else FALSE


def Is(bit: AllocatedBit) -> Boolean:
    return Boolean(IS_KIND, bit)


def Not(bit: AllocatedBit) -> Boolean:
    return Boolean(NOT_KIND, bit)


def _add_signed(terms: list[tuple[Variable, int]], b: Boolean, coeff: int) -> int:
    """Append b's variable term for `coeff * b.lc()`; return its ONE coefficient (not reduced).

    ONE contributions are returned rather than appended so callers can merge them into one term,
    as bellperson's map-based linear combinations do.
    """
    kind = b.kind
    if kind == IS_KIND:
        terms.append((b.bit.variable, coeff))  # type: ignore[union-attr]
        return 0
    if kind == NOT_KIND:
        terms.append((b.bit.variable, -coeff % R_MODULUS))  # type: ignore[union-attr]
        return coeff
    return coeff if kind == TRUE_KIND else 0


def _with_one(terms: list[tuple[Variable, int]], one: int) -> LinearCombination:
    """The combination `one·ONE + terms` (ONE first, like bellperson's inputs-then-aux order)."""
    one %= R_MODULUS
    return LinearCombination([(ONE, one), *terms] if one else terms)


# -- allocation helpers ------------------------------------------------------------------------

def _alloc_bits(cs: ConstraintSystem, values: Sequence[bool | None]) -> list[Boolean]:
    return [Boolean(IS_KIND, AllocatedBit.alloc(cs, v)) for v in values]


def u64_into_boolean_vec_le(cs: ConstraintSystem, value: int | None) -> list[Boolean]:
    """64 allocated bits, LSB first, each followed by its booleanity row (bellpepper's helper;
    Filecoin's UInt64 challenge)."""
    if value is None or not cs.needs_values:
        return _alloc_bits(cs, [None] * 64)
    if not 0 <= value < 1 << 64:
        raise ValueError(f"{value} does not fit in 64 bits")
    return _alloc_bits(cs, [bool(value >> i & 1) for i in range(64)])


def field_into_allocated_bits_le(cs: ConstraintSystem, value: int | None) -> list[AllocatedBit]:
    """255 allocated bits of a field element, LSB first (the canonical representation)."""
    if value is None or not cs.needs_values:
        return [AllocatedBit.alloc(cs, None) for _ in range(FR_BITS)]
    v = value % R_MODULUS
    return [AllocatedBit.alloc(cs, bool(v >> i & 1)) for i in range(FR_BITS)]


def field_into_boolean_vec_le(cs: ConstraintSystem, value: int | None) -> list[Boolean]:
    return [Boolean(IS_KIND, bit) for bit in field_into_allocated_bits_le(cs, value)]


def bytes_into_boolean_vec(cs: ConstraintSystem, data: bytes | None, size: int) -> list[Boolean]:
    """storage-proofs-core's helper: allocated bits of `data`, bytes in order, LSB of each byte first.

    With data, its length decides the bit count (8 per byte); `size` only sizes a blank vector.
    """
    if data is None or not cs.needs_values:
        count = size if data is None else 8 * len(data)
        return _alloc_bits(cs, [None] * count)
    return _alloc_bits(cs, [bool(byte >> i & 1) for byte in data for i in range(8)])


def bytes_into_boolean_vec_be(cs: ConstraintSystem, data: bytes | None, size: int) -> list[Boolean]:
    """As `bytes_into_boolean_vec`, MSB of each byte first (SHA-256 stream order)."""
    if data is None or not cs.needs_values:
        count = size if data is None else 8 * len(data)
        return _alloc_bits(cs, [None] * count)
    return _alloc_bits(cs, [bool(byte >> i & 1) for byte in data for i in range(7, -1, -1)])


def reverse_bit_numbering(bits: Sequence[Boolean]) -> list[Boolean]:
    """Pad to a multiple of 8 with constant false, then reverse the bits inside each byte.

    Turns the LE bits of an Fr into the SHA-256 bit stream of its 32-byte LE encoding, and a
    SHA-256 output into the LE bits of the digest read as a little-endian integer (docs/circuits.md §1).
    """
    padded = list(bits)
    padded.extend([FALSE] * (-len(padded) % 8))
    out: list[Boolean] = []
    for i in range(0, len(padded), 8):
        out.extend(reversed(padded[i:i + 8]))
    return out
