"""UInt32 (bellperson uint32.rs, docs/circuits.md §7): wiring, per-bit operations, addmany's
constant short cut, result width, row layout and values."""

from __future__ import annotations

import random

import pytest

from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import limbs_to_ints
from cuzk.gadgets.boolean import FALSE, TRUE, AllocatedBit, Is, Not
from cuzk.gadgets.multieq import MultiEq
from cuzk.gadgets.uint32 import UInt32
from cuzk.r1cs import ONE, ProvingAssignment, RecordingCS, ShapeCS, Variable

MASK = 0xFFFFFFFF


def proving() -> ProvingAssignment:
    cs = ProvingAssignment(check=True)
    cs.alloc_input("ONE", 1)
    return cs


def shape() -> ShapeCS:
    cs = ShapeCS()
    cs.alloc_input("ONE", 1)
    return cs


def word_value(word: UInt32) -> int:
    """The value read off the bits (independently of `word.value`)."""
    return sum(int(b.get_value()) << i for i, b in enumerate(word.bits))


def test_constant_bits_lsb_first() -> None:
    w = UInt32.constant(0x80000001)
    assert w.bits[0] is TRUE and w.bits[31] is TRUE and all(b is FALSE for b in w.bits[1:31])
    assert w.value == 0x80000001


def test_bits_be_round_trip_and_wiring_costs_nothing() -> None:
    cs = proving()
    w = UInt32.alloc(cs, 0x12345678)
    assert cs.num_constraints == 32 and word_value(w) == 0x12345678 == w.value
    be = w.into_bits_be()
    assert be[0] is w.bits[31]
    back = UInt32.from_bits_be(be)
    assert back.value == 0x12345678 and all(x is y for x, y in zip(back.bits, w.bits, strict=True))
    assert UInt32.from_bits(w.into_bits()).value == 0x12345678
    for n in (0, 1, 7, 31, 32, 45):
        r = w.rotr(n)
        assert r.value == word_value(r) == ((0x12345678 >> n % 32) | (0x12345678 << (32 - n % 32))) & MASK
        s = w.shr(n)
        assert s.value == word_value(s) == 0x12345678 >> n % 32
        assert all(b is FALSE for b in s.bits[32 - n % 32:])
    assert cs.num_constraints == 32


def test_blank_words_have_no_value() -> None:
    cs = shape()
    w = UInt32.alloc(cs, 5)
    assert w.value is None and UInt32.from_bits_be(w.into_bits_be()).value is None
    assert w.rotr(3).value is None and w.shr(3).value is None


def test_xor_per_bit_lsb_first_with_self_as_first_operand() -> None:
    cs = RecordingCS()
    cs.alloc_input("ONE", 1)
    a, b = UInt32.alloc(cs, None), UInt32.alloc(cs, None)
    a.xor(cs, b)
    m = cs.matrices()
    # 64 booleanity rows, then 32 xor rows: row i has A = 2·a_i, B = b_i.
    for i in range(32):
        r = 64 + i
        assert [int(c) - 1 for c in m.a.cols[m.a.row_ptr[r]:m.a.row_ptr[r + 1]]] == [i]
        assert [int(c) - 1 for c in m.b.cols[m.b.row_ptr[r]:m.b.row_ptr[r + 1]]] == [32 + i]
    assert m.num_constraints == 96


def test_xor_values_and_constant_folding() -> None:
    rng = random.Random(1)
    for _ in range(10):
        x, y, k = rng.getrandbits(32), rng.getrandbits(32), rng.getrandbits(32)
        cs = proving()
        a, b = UInt32.alloc(cs, x), UInt32.alloc(cs, y)
        n = cs.num_constraints
        assert a.xor(cs, b).value == x ^ y == word_value(a.xor(cs, b))
        assert cs.num_constraints == n + 64
        n = cs.num_constraints
        folded = a.xor(cs, UInt32.constant(k))
        assert folded.value == word_value(folded) == x ^ k and cs.num_constraints == n
        assert UInt32.constant(x).xor(cs, UInt32.constant(k)).value == x ^ k and cs.num_constraints == n


@pytest.mark.parametrize(("op", "fn"), [
    ("sha256_ch", lambda a, b, c: (a & b) ^ (~a & c) & MASK),
    ("sha256_maj", lambda a, b, c: (a & b) ^ (a & c) ^ (b & c)),
])
def test_ch_maj_values(op, fn) -> None:
    rng = random.Random(2)
    for _ in range(5):
        x, y, z = (rng.getrandbits(32) for _ in range(3))
        cs = proving()
        a, b, c = UInt32.alloc(cs, x), UInt32.alloc(cs, y), UInt32.alloc(cs, z)
        out = getattr(UInt32, op)(cs, a, b, c)
        assert out.value == word_value(out) == fn(x, y, z) & MASK
        half = getattr(UInt32, op)(cs, a, UInt32.constant(y), c)
        assert half.value == word_value(half) == fn(x, y, z) & MASK


def test_addmany_of_constants_emits_nothing() -> None:
    cs = shape()
    with MultiEq(cs) as meq:
        out = UInt32.addmany(meq, [UInt32.constant(MASK), UInt32.constant(2), UInt32.constant(7)])
    assert out.value == 8 and all(b.is_constant for b in out.bits) and cs.num_constraints == 0


@pytest.mark.parametrize(("operands", "n_bits"), [(2, 33), (3, 34), (4, 34), (5, 35), (8, 35), (9, 36), (10, 36)])
def test_addmany_result_width(operands, n_bits) -> None:
    cs = shape()
    words = [UInt32.alloc(cs, None) for _ in range(operands)]
    before_aux, before_rows = cs.num_aux, cs.num_constraints
    meq = MultiEq(cs)
    out = UInt32.addmany(meq, words)
    assert cs.num_aux - before_aux == n_bits and cs.num_constraints - before_rows == n_bits
    assert meq.bits_used == n_bits and len(out.bits) == 32
    meq.finish()
    assert cs.num_constraints - before_rows == n_bits + 1


def test_addmany_rejects_bad_operand_counts() -> None:
    meq = MultiEq(shape())
    with pytest.raises(ValueError):
        UInt32.addmany(meq, [UInt32.constant(1)])
    with pytest.raises(ValueError):
        UInt32.addmany(meq, [UInt32.constant(1)] * 11)


def test_addmany_row_layout() -> None:
    """Result bits LSB first with booleanity rows, then (after finish) one MultiEq row
    (Σ operand bits, constants merged into ONE) * ONE = Σ 2^i·result_i."""
    cs = RecordingCS()
    cs.alloc_input("ONE", 1)
    x = AllocatedBit.alloc(cs, None)
    y = AllocatedBit.alloc(cs, None)
    # operand 1: bit0 = Is x, bit1 = TRUE, rest false; operand 2: bit0 = Not y, bit3 = TRUE.
    w1 = UInt32([Is(x), TRUE] + [FALSE] * 30, None)
    w2 = UInt32([Not(y), FALSE, FALSE, TRUE] + [FALSE] * 28, None)
    with MultiEq(cs) as meq:
        out = UInt32.addmany(meq, [w1, w2])
    m = cs.matrices()
    assert m.num_constraints == 2 + 33 + 1 and m.num_aux == 2 + 33
    result = [Variable.aux(2 + i) for i in range(33)]
    assert [b.bit.variable for b in out.bits] == result[:32]
    last = m.num_constraints - 1

    def row_map(mat, r):
        coeffs = limbs_to_ints(mat.coeffs)
        out = {}
        for k in range(int(mat.row_ptr[r]), int(mat.row_ptr[r + 1])):
            col = int(mat.cols[k])
            var = Variable.input(col) if col < 1 else Variable.aux(col - 1)
            out[var] = (out.get(var, 0) + coeffs[k]) % R_MODULUS
        return out

    # Booleanity rows of the result bits, in order.
    for i in range(33):
        assert row_map(m.a, 2 + i) == {ONE: 1, result[i]: R_MODULUS - 1}
    assert row_map(m.a, last) == {ONE: 2 + 1 + 8, x.variable: 1, y.variable: R_MODULUS - 1}
    assert row_map(m.b, last) == {ONE: 1}
    assert row_map(m.c, last) == {v: 1 << i for i, v in enumerate(result)}


def test_addmany_values_wrap_mod_2_32() -> None:
    rng = random.Random(3)
    for count in (2, 4, 7, 10):
        cs = proving()
        values = [rng.getrandbits(32) | 0x80000000 for _ in range(count)]
        words = [UInt32.alloc(cs, v) for v in values[:-1]] + [UInt32.constant(values[-1])]
        with MultiEq(cs) as meq:
            out = UInt32.addmany(meq, words)
        assert out.value == word_value(out) == sum(values) & MASK
        # The carry bits were allocated with the full sum (and the MultiEq row held under check=True).
        carries = cs.aux_assignment[-((count * MASK).bit_length() - 32):]
        assert sum(c << i for i, c in enumerate(carries)) == sum(values) >> 32
