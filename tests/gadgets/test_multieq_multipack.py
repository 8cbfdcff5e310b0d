"""MultiEq flushing (docs/circuits.md §7), bit packing (bellperson multipack.rs) and the AllocatedNum
gadgets of docs/circuits.md §4 (to_bits_le layout, inputize, equal/add/sub, pick, mul/square): exact
rows and values."""

from __future__ import annotations

import random

import pytest

from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import limbs_to_ints
from cuzk.gadgets.boolean import FALSE, TRUE, AllocatedBit, Boolean, Is, Not, u64_into_boolean_vec_le
from cuzk.gadgets.multieq import MultiEq
from cuzk.gadgets.multipack import (
    bytes_to_bits,
    bytes_to_bits_le,
    compute_multipacking,
    pack_bits,
    pack_into_inputs,
)
from cuzk.gadgets.num import AllocatedNum, Num, add, equal, pick, sub
from cuzk.gadgets.uint32 import UInt32
from cuzk.r1cs import ONE, LinearCombination, ProvingAssignment, RecordingCS, ShapeCS, Variable

Row = tuple[dict[Variable, int], dict[Variable, int], dict[Variable, int]]


def recorded_rows(cs: RecordingCS) -> list[Row]:
    """Rows as {variable: coefficient} maps, repeats summed, zeros dropped."""
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
    return tuple({v: k % R_MODULUS for v, k in d.items() if k % R_MODULUS} for d in (a, b, c))  # type: ignore[return-value]


def recording() -> RecordingCS:
    cs = RecordingCS()
    cs.alloc_input("ONE", 1)
    return cs


def proving() -> ProvingAssignment:
    cs = ProvingAssignment(check=True)
    cs.alloc_input("ONE", 1)
    return cs


# -- MultiEq -----------------------------------------------------------------------------------------

def test_multieq_flushes_before_reaching_capacity() -> None:
    cs = recording()
    xs = [cs.alloc(f"x{i}") for i in range(9)]
    ys = [cs.alloc(f"y{i}") for i in range(9)]
    meq = MultiEq(cs)
    # 7 × 35 = 245 bits fit; the 8th (245 + 35 >= 254) flushes first.
    for i in range(7):
        meq.enforce_equal(35, LinearCombination([(xs[i], 1)]), LinearCombination([(ys[i], 1)]))
    assert cs.num_constraints == 0 and meq.bits_used == 245
    meq.enforce_equal(35, LinearCombination([(xs[7], 3)]), LinearCombination([(ys[7], 1), (ONE, 5)]))
    assert cs.num_constraints == 1 and meq.bits_used == 35
    meq.enforce_equal(8, LinearCombination([(xs[8], 1)]), LinearCombination([(ys[8], 1)]))
    meq.finish()
    meq.finish()  # nothing pending: no second row
    rows = recorded_rows(cs)
    assert rows[0] == row({xs[i]: 1 << (35 * i) for i in range(7)}, {ONE: 1}, {ys[i]: 1 << (35 * i) for i in range(7)})
    assert rows[1] == row({xs[7]: 3, xs[8]: 1 << 35}, {ONE: 1}, {ONE: 5, ys[7]: 1, ys[8]: 1 << 35})
    assert len(rows) == 2


@pytest.mark.parametrize(("used", "n", "flushes"), [(219, 35, True), (218, 35, False), (253, 1, True)])
def test_multieq_boundary(used, n, flushes) -> None:
    cs = ShapeCS()
    cs.alloc_input("ONE", 1)
    meq = MultiEq(cs)
    meq.enforce_equal(used, LinearCombination(), LinearCombination())
    meq.enforce_equal(n, LinearCombination(), LinearCombination())
    assert cs.num_constraints == int(flushes)


def test_multieq_context_manager_emits_the_pending_row() -> None:
    cs = ShapeCS()
    cs.alloc_input("ONE", 1)
    with MultiEq(cs) as meq:
        meq.enforce_equal(3, LinearCombination(), LinearCombination())
    assert cs.num_constraints == 1
    with MultiEq(cs):
        pass
    assert cs.num_constraints == 1


def test_packed_row_follows_the_booleanity_rows_of_the_overflowing_addmany() -> None:
    cs = ShapeCS()
    cs.alloc_input("ONE", 1)
    words = [UInt32.alloc(cs, None) for _ in range(4)]
    base = cs.num_constraints
    meq = MultiEq(cs)
    for _ in range(7):  # 7 × 34 = 238 bits pending, no row yet
        UInt32.addmany(meq, words)
    assert cs.num_constraints == base + 7 * 34
    UInt32.addmany(meq, words)  # 34 more bits: rows = its 34 booleanity rows, then the flushed row
    assert cs.num_constraints == base + 8 * 34 + 1 and meq.bits_used == 34


# -- packing -------------------------------------------------------------------------------------------

def test_pack_bits_row_and_capacity() -> None:
    cs = recording()
    bits = [Is(AllocatedBit.alloc(cs, None)) for _ in range(300)]
    packed = pack_bits(cs, bits)
    rows = recorded_rows(cs)
    assert len(rows) == 301 and packed.variable == Variable.aux(300)
    assert rows[300] == row({bits[i].bit.variable: 1 << i for i in range(254)}, {ONE: 1}, {packed.variable: 1})


def test_pack_bits_lc_of_constants_and_negations() -> None:
    cs = recording()
    x = AllocatedBit.alloc(cs, None)
    packed = pack_bits(cs, [Not(x), TRUE, FALSE, Is(x)])
    # (1 - x) + 2 + 8x = 3 + 7x
    assert recorded_rows(cs)[1] == row({ONE: 3, x.variable: 7}, {ONE: 1}, {packed.variable: 1})


def test_pack_bits_value() -> None:
    cs = proving()
    rng = random.Random(5)
    v = rng.getrandbits(256)
    bits = [Is(AllocatedBit.alloc(cs, bool(v >> i & 1))) for i in range(256)]
    assert pack_bits(cs, bits).value == v % (1 << 254)


def test_pack_into_inputs_matches_compute_multipacking() -> None:
    rng = random.Random(6)
    for n in (0, 1, 64, 254, 255, 600):
        cs = proving()
        values = [rng.random() < 0.5 for _ in range(n)]
        bits = [Is(AllocatedBit.alloc(cs, v)) for v in values]
        inputs = pack_into_inputs(cs, bits)
        assert cs.input_assignment[1:] == compute_multipacking(values) == [y.value for y in inputs]
        assert cs.num_constraints == n + -(-n // 254)


def test_pack_into_inputs_rows() -> None:
    cs = recording()
    bits = u64_into_boolean_vec_le(cs, None)
    (y,) = pack_into_inputs(cs, bits)
    assert y.variable == Variable.input(1)
    assert recorded_rows(cs)[64] == row({b.bit.variable: 1 << i for i, b in enumerate(bits)}, {ONE: 1}, {y.variable: 1})


def test_byte_bit_orders() -> None:
    assert bytes_to_bits(b"\x01\x80") == [False] * 7 + [True, True] + [False] * 7
    assert bytes_to_bits_le(b"\x01\x80") == [True] + [False] * 14 + [True]


def test_num_accumulates_bits_and_values() -> None:
    x = AllocatedBit(Variable.aux(0), True)
    num = Num.zero().add_bool_with_coeff(Is(x), 4).add_bool_with_coeff(Not(x), 2).add_bool_with_coeff(TRUE, 1)
    assert num.value == 5
    assert num.lc().terms == [(ONE, 3), (x.variable, 4), (x.variable, R_MODULUS - 2)]
    assert num.scale(2).value == 10 and num.add(num).value == 10
    assert Num.zero().add_bool_with_coeff(Is(AllocatedBit(Variable.aux(0), None)), 1).value is None


# -- AllocatedNum ----------------------------------------------------------------------------------------

def test_to_bits_le_row_layout() -> None:
    cs = recording()
    x = AllocatedNum.alloc(cs, "x", None)
    bits = x.to_bits_le(cs)
    rows = recorded_rows(cs)
    assert len(bits) == 255 and len(rows) == 256 and cs.num_aux == 256
    for i, b in enumerate(bits):
        v = b.bit.variable
        assert v == Variable.aux(1 + i)  # allocated LSB first, right after x
        assert rows[i] == row({ONE: 1, v: -1}, {v: 1}, {})  # each followed by its booleanity row
    assert rows[255] == row({}, {}, {**{b.bit.variable: 1 << i for i, b in enumerate(bits)}, x.variable: -1})


@pytest.mark.parametrize("value", [0, 1, R_MODULUS - 1, 1 << 254, 0x1234567890ABCDEF << 190])
def test_to_bits_le_canonical_witness(value) -> None:
    cs = proving()
    x = AllocatedNum.alloc(cs, "x", value)
    bits = x.to_bits_le(cs)
    assert sum(int(b.get_value()) << i for i, b in enumerate(bits)) == value


def test_alloc_values_are_lazy_and_blank_safe() -> None:
    blank = ShapeCS()
    blank.alloc_input("ONE", 1)

    def boom() -> int:
        raise AssertionError("evaluated on a structure-only back end")

    x = AllocatedNum.alloc(blank, "x", boom)
    assert x.value is None
    x.to_bits_le(blank)
    assert blank.num_constraints == 256
    with pytest.raises(SynthesisError):
        AllocatedNum.alloc(proving(), "x", None)
    assert AllocatedNum.alloc(proving(), "x", lambda: R_MODULUS + 3).value == 3


def test_inputize_row() -> None:
    cs = recording()
    x = AllocatedNum.alloc(cs, "x", None)
    y = x.inputize(cs)
    assert y.variable == Variable.input(1)
    assert recorded_rows(cs) == [row({y.variable: 1}, {ONE: 1}, {x.variable: 1})]
    cs = proving()
    AllocatedNum.alloc(cs, "x", 42).inputize(cs)
    assert cs.input_assignment == [1, 42]


def test_equal_add_sub_mul_square_rows() -> None:
    cs = recording()
    a, b = AllocatedNum.alloc(cs, "a", None), AllocatedNum.alloc(cs, "b", None)
    equal(cs, a, b)
    s = add(cs, a, b)
    d = sub(cs, a, b)
    p = a.mul(cs, b)
    q = a.square(cs)
    av, bv = a.variable, b.variable
    assert recorded_rows(cs) == [
        row({av: 1}, {ONE: 1}, {bv: 1}),
        row({av: 1, bv: 1}, {ONE: 1}, {s.variable: 1}),
        row({d.variable: 1, bv: 1}, {ONE: 1}, {av: 1}),
        row({av: 1}, {bv: 1}, {p.variable: 1}),
        row({av: 1}, {av: 1}, {q.variable: 1}),
    ]


def test_num_gadget_values() -> None:
    cs = proving()
    a, b = AllocatedNum.alloc(cs, "a", 7), AllocatedNum.alloc(cs, "b", R_MODULUS - 2)
    assert add(cs, a, b).value == 5 and sub(cs, a, b).value == 9
    assert a.mul(cs, b).value == R_MODULUS - 14 and a.square(cs).value == 49
    equal(cs, a, AllocatedNum.alloc(cs, "a'", 7))


@pytest.mark.parametrize("kind", ["Is", "Not", "T", "F"])
def test_pick_row_and_values(kind) -> None:
    cs = recording()
    bit = AllocatedBit.alloc(cs, None)
    cond: Boolean = {"Is": Is(bit), "Not": Not(bit), "T": TRUE, "F": FALSE}[kind]
    a, b = AllocatedNum.alloc(cs, "a", None), AllocatedNum.alloc(cs, "b", None)
    c = pick(cs, cond, a, b)
    cond_map = {"Is": {bit.variable: 1}, "Not": {ONE: 1, bit.variable: -1}, "T": {ONE: 1}, "F": {}}[kind]
    assert recorded_rows(cs)[1] == row({b.variable: 1, a.variable: -1}, cond_map, {b.variable: 1, c.variable: -1})
    for flag in (False, True):
        cs2 = proving()
        bit2 = AllocatedBit.alloc(cs2, flag)
        cond2 = {"Is": Is(bit2), "Not": Not(bit2), "T": TRUE, "F": FALSE}[kind]
        picked = pick(cs2, cond2, AllocatedNum.alloc(cs2, "a", 11), AllocatedNum.alloc(cs2, "b", 22))
        assert picked.value == (11 if cond2.get_value() else 22)
