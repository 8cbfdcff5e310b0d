"""Boolean gadgets: exact rows (bellpepper-core 0.2.1 / docs/circuits.md §4, §7), constant folding,
witness values on every operand kind, and the bit-allocation helpers."""

from __future__ import annotations

import itertools
import random

import pytest

from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import limbs_to_ints
from cuzk.gadgets.boolean import (
    FALSE,
    IS_KIND,
    NOT_KIND,
    TRUE,
    AllocatedBit,
    Boolean,
    Constant,
    Is,
    Not,
    bytes_into_boolean_vec,
    bytes_into_boolean_vec_be,
    field_into_boolean_vec_le,
    reverse_bit_numbering,
    u64_into_boolean_vec_le,
)
from cuzk.r1cs import ONE, ProvingAssignment, RecordingCS, ShapeCS, Variable

Row = tuple[dict[Variable, int], dict[Variable, int], dict[Variable, int]]


def recorded_rows(cs: RecordingCS) -> list[Row]:
    """Each row as three {variable: coefficient} maps, repeats summed and zeros dropped (the
    mathematical row, which is what bellperson's map-based linear combinations hold)."""
    m = cs.matrices()

    def maps(mat) -> list[dict[Variable, int]]:
        coeffs = limbs_to_ints(mat.coeffs)
        out = []
        for i in range(mat.num_rows):
            d: dict[Variable, int] = {}
            for k in range(int(mat.row_ptr[i]), int(mat.row_ptr[i + 1])):
                col = int(mat.cols[k])
                var = Variable.input(col) if col < m.num_inputs else Variable.aux(col - m.num_inputs)
                d[var] = (d.get(var, 0) + coeffs[k]) % R_MODULUS
            out.append({v: c for v, c in d.items() if c})
        return out

    return list(zip(maps(m.a), maps(m.b), maps(m.c), strict=True))


def row(a: dict, b: dict, c: dict) -> Row:
    """An expected row with small signed coefficients."""
    return tuple({v: k % R_MODULUS for v, k in d.items() if k % R_MODULUS} for d in (a, b, c))  # type: ignore[return-value]


def recording() -> RecordingCS:
    cs = RecordingCS()
    cs.alloc_input("ONE", 1)
    return cs


def proving() -> ProvingAssignment:
    cs = ProvingAssignment(check=True)
    cs.alloc_input("ONE", 1)
    return cs


# -- AllocatedBit -------------------------------------------------------------------------------

def test_alloc_emits_the_booleanity_row() -> None:
    cs = recording()
    bit = AllocatedBit.alloc(cs, None)
    assert bit.variable == Variable.aux(0) and bit.value is None
    assert recorded_rows(cs) == [row({ONE: 1, bit.variable: -1}, {bit.variable: 1}, {})]


@pytest.mark.parametrize(("op", "expected"), [
    ("xor", lambda x, y, r: row({x: 2}, {y: 1}, {x: 1, y: 1, r: -1})),
    ("and_", lambda x, y, r: row({x: 1}, {y: 1}, {r: 1})),
    ("and_not", lambda x, y, r: row({x: 1}, {ONE: 1, y: -1}, {r: 1})),
    ("nor", lambda x, y, r: row({ONE: 1, x: -1}, {ONE: 1, y: -1}, {r: 1})),
])
def test_allocated_bit_operation_rows(op, expected) -> None:
    cs = recording()
    x, y = AllocatedBit.alloc(cs, None), AllocatedBit.alloc(cs, None)
    r = getattr(AllocatedBit, op)(cs, x, y)
    assert r.variable == Variable.aux(2)
    assert recorded_rows(cs)[2:] == [expected(x.variable, y.variable, r.variable)]


@pytest.mark.parametrize(("op", "fn"), [
    ("xor", lambda a, b: a ^ b),
    ("and_", lambda a, b: a and b),
    ("and_not", lambda a, b: a and not b),
    ("nor", lambda a, b: not a and not b),
])
def test_allocated_bit_operation_values(op, fn) -> None:
    for va, vb in itertools.product([False, True], repeat=2):
        cs = proving()
        r = getattr(AllocatedBit, op)(cs, AllocatedBit.alloc(cs, va), AllocatedBit.alloc(cs, vb))
        assert r.value == fn(va, vb)
        assert cs.aux_assignment[-1] == int(fn(va, vb))


# -- Boolean views and folding ------------------------------------------------------------------

KINDS = ("F", "T", "Is", "Not")


def make(kind: str, bit: AllocatedBit) -> Boolean:
    return {"F": FALSE, "T": TRUE, "Is": Is(bit), "Not": Not(bit)}[kind]


def test_lc_of_each_kind() -> None:
    x = AllocatedBit(Variable.aux(3), None)
    assert Is(x).lc(ONE, 5).terms == [(x.variable, 5)]
    assert Not(x).lc(ONE, 5).terms == [(ONE, 5), (x.variable, R_MODULUS - 5)]
    assert TRUE.lc(ONE, 5).terms == [(ONE, 5)]
    assert FALSE.lc(ONE, 5).terms == []
    assert Constant(True) is TRUE and Constant(False) is FALSE
    assert TRUE.not_() is FALSE and Is(x).not_().kind == NOT_KIND and Not(x).not_().kind == IS_KIND
    assert Not(x).not_().bit is x and TRUE.is_constant and not Is(x).is_constant


def test_values_of_views() -> None:
    x = AllocatedBit(Variable.aux(0), True)
    assert Is(x).get_value() is True and Not(x).get_value() is False
    assert Is(AllocatedBit(Variable.aux(0), None)).get_value() is None
    assert TRUE.get_value() is True and FALSE.get_value() is False


def _binary_case(op: str, ka: str, kb: str, va: bool, vb: bool) -> tuple[Boolean, int]:
    cs = proving()
    x, y = AllocatedBit.alloc(cs, va), AllocatedBit.alloc(cs, vb)
    before = cs.num_constraints
    out = getattr(Boolean, op)(cs, make(ka, x), make(kb, y))
    return out, cs.num_constraints - before


@pytest.mark.parametrize(("op", "fn"), [("xor", lambda a, b: a ^ b), ("and_", lambda a, b: a and b)])
def test_binary_operations_fold_constants_and_compute_values(op, fn) -> None:
    for ka, kb in itertools.product(KINDS, repeat=2):
        for va, vb in itertools.product([False, True], repeat=2):
            out, rows = _binary_case(op, ka, kb, va, vb)
            a = {"F": False, "T": True, "Is": va, "Not": not va}[ka]
            b = {"F": False, "T": True, "Is": vb, "Not": not vb}[kb]
            assert out.get_value() == fn(a, b), (op, ka, kb, va, vb)
            constant_operand = ka in ("F", "T") or kb in ("F", "T")
            assert rows == (0 if constant_operand else 1), (op, ka, kb)
            if constant_operand:
                # Folded: the result is a constant or one of the operands' views, never a new bit.
                assert out.is_constant or out.bit.variable in (Variable.aux(0), Variable.aux(1))


def _rows_of(op: str, ka: str, kb: str) -> tuple[Boolean, list[Row], Variable, Variable]:
    cs = recording()
    x, y = AllocatedBit.alloc(cs, None), AllocatedBit.alloc(cs, None)
    out = getattr(Boolean, op)(cs, make(ka, x), make(kb, y))
    return out, recorded_rows(cs)[2:], x.variable, y.variable


def test_xor_rows_put_the_is_operand_first() -> None:
    for ka, kb, first, result_kind in [("Is", "Is", 0, IS_KIND), ("Not", "Not", 0, IS_KIND),
                                       ("Is", "Not", 0, NOT_KIND), ("Not", "Is", 1, NOT_KIND)]:
        out, rows, x, y = _rows_of("xor", ka, kb)
        a, b = (x, y) if first == 0 else (y, x)
        r = Variable.aux(2)
        assert rows == [row({a: 2}, {b: 1}, {a: 1, b: 1, r: -1})], (ka, kb)
        assert out.kind == result_kind and out.bit.variable == r


def test_and_rows_pick_and_not_nor_and() -> None:
    r = Variable.aux(2)
    out, rows, x, y = _rows_of("and_", "Is", "Is")
    assert rows == [row({x: 1}, {y: 1}, {r: 1})]
    out, rows, x, y = _rows_of("and_", "Is", "Not")
    assert rows == [row({x: 1}, {ONE: 1, y: -1}, {r: 1})]
    out, rows, x, y = _rows_of("and_", "Not", "Is")  # and_not(is = y, not = x)
    assert rows == [row({y: 1}, {ONE: 1, x: -1}, {r: 1})]
    out, rows, x, y = _rows_of("and_", "Not", "Not")
    assert rows == [row({ONE: 1, x: -1}, {ONE: 1, y: -1}, {r: 1})]
    assert out.kind == IS_KIND and out.bit.variable == r


# -- sha256_ch / sha256_maj -------------------------------------------------------------------------

def _and_rows(x: str, y: str) -> int:
    return 0 if x in ("F", "T") or y in ("F", "T") else 1


def _neg(k: str) -> str:
    return {"F": "T", "T": "F", "Is": "Not", "Not": "Is"}[k]


def expected_ch_rows(a: str, b: str, c: str) -> int:
    """docs/circuits.md §7's rule list for ch, in its order."""
    if all(k in ("F", "T") for k in (a, b, c)) or a == "F":
        return 0
    if b == "F":
        return _and_rows(_neg(a), c)
    if c == "F":
        return _and_rows(a, b)
    if c == "T":
        return _and_rows(a, _neg(b))
    if b == "T":
        return _and_rows(_neg(a), _neg(c))
    return 1


def expected_maj_rows(a: str, b: str, c: str) -> int:
    """docs/circuits.md §7's rule list for maj, in its order."""
    if all(k in ("F", "T") for k in (a, b, c)):
        return 0
    for first, (x, y) in ((a, (b, c)), (b, (a, c)), (c, (a, b))):
        if first == "F":
            return _and_rows(x, y)
    for first, (x, y) in ((c, (a, b)), (b, (a, c)), (a, (b, c))):
        if first == "T":
            return _and_rows(x, y)
    return 2


@pytest.mark.parametrize(("op", "fn", "expected_rows"), [
    ("sha256_ch", lambda a, b, c: (a and b) ^ ((not a) and c), expected_ch_rows),
    ("sha256_maj", lambda a, b, c: (a and b) ^ (a and c) ^ (b and c), expected_maj_rows),
])
def test_ch_maj_on_every_kind_combination(op, fn, expected_rows) -> None:
    for kinds in itertools.product(KINDS, repeat=3):
        for values in itertools.product([False, True], repeat=3):
            cs = proving()
            bits = [AllocatedBit.alloc(cs, v) for v in values]
            ops = [make(k, bit) for k, bit in zip(kinds, bits, strict=True)]
            before = cs.num_constraints
            out = getattr(Boolean, op)(cs, *ops)
            assert out.get_value() == fn(*(o.get_value() for o in ops)), (op, kinds, values)
            assert cs.num_constraints - before == expected_rows(*kinds), (op, kinds)


def test_ch_general_row() -> None:
    cs = recording()
    a, b, c = (AllocatedBit.alloc(cs, None).variable for _ in range(3))
    ch = Boolean.sha256_ch(cs, Is(AllocatedBit(a, None)), Not(AllocatedBit(b, None)), Is(AllocatedBit(c, None)))
    r = Variable.aux(3)
    assert ch.kind == IS_KIND and ch.bit.variable == r
    # (b - c) * a = ch - c with b = Not: (1 - b - c) * a = ch - c
    assert recorded_rows(cs)[3:] == [row({ONE: 1, b: -1, c: -1}, {a: 1}, {r: 1, c: -1})]


def test_ch_with_a_true_uses_the_general_row() -> None:
    cs = recording()
    b, c = (AllocatedBit.alloc(cs, None).variable for _ in range(2))
    Boolean.sha256_ch(cs, TRUE, Is(AllocatedBit(b, None)), Not(AllocatedBit(c, None)))
    r = Variable.aux(2)
    # (b - (1 - c)) * 1 = ch - (1 - c)
    assert recorded_rows(cs)[2:] == [row({ONE: -1, b: 1, c: 1}, {ONE: 1}, {ONE: -1, r: 1, c: 1})]


def test_maj_general_rows_allocate_maj_before_bc() -> None:
    cs = recording()
    a, b, c = (AllocatedBit.alloc(cs, None).variable for _ in range(3))
    out = Boolean.sha256_maj(cs, Not(AllocatedBit(a, None)), Is(AllocatedBit(b, None)), Is(AllocatedBit(c, None)))
    maj, bc = Variable.aux(3), Variable.aux(4)
    assert out.kind == IS_KIND and out.bit.variable == maj
    assert recorded_rows(cs)[3:] == [
        row({b: 1}, {c: 1}, {bc: 1}),  # bc = and(b, c)
        row({bc: 2, b: -1, c: -1}, {ONE: 1, a: -1}, {bc: 1, maj: -1}),
    ]


def test_enforce_equal_rows() -> None:
    cs = recording()
    x, y = AllocatedBit.alloc(cs, None), AllocatedBit.alloc(cs, None)
    Boolean.enforce_equal(cs, Is(x), Not(y))
    Boolean.enforce_equal(cs, TRUE, Is(x))
    Boolean.enforce_equal(cs, Not(y), FALSE)
    Boolean.enforce_equal(cs, TRUE, TRUE)
    assert recorded_rows(cs)[2:] == [
        row({}, {}, {x.variable: 1, ONE: -1, y.variable: 1}),
        row({}, {}, {ONE: 1, x.variable: -1}),
        row({}, {}, {ONE: 1, y.variable: -1}),
    ]
    with pytest.raises(SynthesisError):
        Boolean.enforce_equal(cs, TRUE, FALSE)


def test_blank_operations_need_no_values() -> None:
    cs = ShapeCS()
    cs.alloc_input("ONE", 1)
    x, y, z = (Is(AllocatedBit.alloc(cs, True)) for _ in range(3))
    assert x.get_value() is None  # values are never computed on structure-only back ends
    Boolean.xor(cs, x, y.not_())
    Boolean.and_(cs, x, y)
    Boolean.sha256_ch(cs, x, y, z)
    Boolean.sha256_maj(cs, x, y, z)
    assert cs.num_constraints == 3 + 1 + 1 + 1 + 2


# -- allocation helpers ---------------------------------------------------------------------------

def _values(bits: list[Boolean]) -> list[bool]:
    return [b.get_value() for b in bits]


def test_u64_bits_lsb_first() -> None:
    cs = proving()
    v = 0x8000_0000_0000_0005
    bits = u64_into_boolean_vec_le(cs, v)
    assert _values(bits) == [bool(v >> i & 1) for i in range(64)]
    assert cs.num_constraints == 64 and cs.num_aux == 64


def test_field_bits_are_canonical_and_255_long() -> None:
    cs = proving()
    bits = field_into_boolean_vec_le(cs, R_MODULUS - 1)
    assert len(bits) == 255 and sum(b << i for i, b in enumerate(_values(bits))) == R_MODULUS - 1


def test_bytes_into_boolean_vectors() -> None:
    cs = proving()
    assert _values(bytes_into_boolean_vec(cs, b"\x01\x80", 16)) == [True] + [False] * 14 + [True]
    assert _values(bytes_into_boolean_vec_be(cs, b"\x01\x80", 16)) == [False] * 7 + [True, True] + [False] * 7
    blank = ShapeCS()
    blank.alloc_input("ONE", 1)
    assert len(bytes_into_boolean_vec_be(blank, None, 24)) == 24 and blank.num_constraints == 24


def test_reverse_bit_numbering_turns_le_bits_into_the_byte_stream() -> None:
    rng = random.Random(4)
    for _ in range(5):
        x = rng.randrange(R_MODULUS)
        le = [Constant(bool(x >> i & 1)) for i in range(255)]
        stream = reverse_bit_numbering(le)
        assert len(stream) == 256 and stream[248] is FALSE  # the pad bit is the MSB of byte 31
        expected = [bool(byte >> i & 1) for byte in x.to_bytes(32, "little") for i in range(7, -1, -1)]
        assert _values(stream) == expected
        # ... and back: the same map applied to a stream gives the LE bits.
        assert _values(reverse_bit_numbering(stream)) == [bool(x >> i & 1) for i in range(256)]
