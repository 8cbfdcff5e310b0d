"""The Poseidon gadget emits neptune's legacy circuit row for row (filecoin-proofs.md §6.5)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import limbs_to_ints
from cuzk.gadgets.poseidon import poseidon_hash_circuit
from cuzk.hashes.poseidon import hash_custom_gr, poseidon_hash
from cuzk.hashes.poseidon_constants import custom_tag, merkle_tree_tag, poseidon_constants
from cuzk.r1cs import ProvingAssignment, RecordingCS, ShapeCS, Variable

# (arity, strength) -> rows; neptune circuit.rs test_poseidon_hash (§6.1, §6.5).
ROW_COUNTS = {
    (2, "standard"): 311,
    (4, "standard"): 377,
    (8, "standard"): 505,
    (11, "standard"): 598,
    (16, "standard"): 761,
    (24, "standard"): 1009,
    (36, "standard"): 1385,
    (2, "strengthened"): 367,
    (4, "strengthened"): 433,
    (8, "strengthened"): 565,
}


def _raise() -> int:
    raise AssertionError("a structure-only back end evaluated a witness value")


def _blank_shape(arity: int, strength: str = "standard") -> ShapeCS:
    cs = ShapeCS()
    cs.alloc_input("ONE", _raise)
    inputs = [cs.alloc(f"x{i}", _raise) for i in range(arity)]
    poseidon_hash_circuit(cs, inputs, poseidon_constants(arity, strength), merkle_tree_tag(arity))
    return cs


@pytest.mark.parametrize(("arity", "strength"), sorted(ROW_COUNTS))
def test_row_and_aux_counts(arity: int, strength: str) -> None:
    """Rows = neptune's formula; every row allocates one aux, so aux = rows (plus the inputs)."""
    c = poseidon_constants(arity, strength)
    sboxes = c.width * c.full_rounds + c.partial_rounds
    rows = ROW_COUNTS[arity, strength]
    assert rows == 3 * (sboxes - 1) + (sboxes - arity)
    shape = _blank_shape(arity, strength).shape()
    assert shape.num_constraints == rows
    assert shape.num_aux - arity == rows
    assert shape.num_inputs == 1
    # A holds each input x, q = (x+pre)^2, round-0 y and each later S-box's v, v^2, y; B holds x, q,
    # q^2 and each later v, v^2, v^4; ONE is in both. (Only the digest is in neither.)
    later_sboxes = sboxes - c.width
    assert shape.a_aux_density == shape.b_aux_density == 3 * (arity + later_sboxes)
    assert shape.a_input_density == shape.b_input_density == 1


AUX_PER_ARITY = {2: 311, 4: 377, 8: 505, 11: 598}


def test_aux_allocations_per_arity() -> None:
    for arity, aux in AUX_PER_ARITY.items():
        assert _blank_shape(arity).num_aux - arity == aux


def _prove(arity: int, tag: int, values: list[int]) -> tuple[ProvingAssignment, int | None, Variable]:
    cs = ProvingAssignment(check=True)
    cs.alloc_input("ONE", 1)
    inputs = [cs.alloc(f"x{i}", v) for i, v in enumerate(values)]
    out = poseidon_hash_circuit(cs, inputs, poseidon_constants(arity), tag, values)
    return cs, out.value, out.variable


@pytest.mark.parametrize("arity", [2, 4, 8, 11])
def test_satisfied_and_equal_to_native_hash(arity: int) -> None:
    rng = random.Random(arity)
    for _ in range(2):
        values = [rng.randrange(R_MODULUS) for _ in range(arity)]
        cs, value, variable = _prove(arity, merkle_tree_tag(arity), values)
        expected = poseidon_hash(values)
        assert value == expected
        assert cs.aux_assignment[variable.index] == expected
        assert not variable.is_input and variable.index == cs.num_aux - 1  # the last allocation


def test_custom_tag_matches_snapdeals_hash() -> None:
    rng = random.Random(7)
    a, b = rng.randrange(R_MODULUS), rng.randrange(R_MODULUS)
    cs, value, _ = _prove(2, custom_tag(1), [a, b])
    assert value == hash_custom_gr(a, b)
    assert cs.num_constraints == 311


def test_inputs_may_be_public_inputs() -> None:
    cs = ProvingAssignment(check=True)
    cs.alloc_input("ONE", 1)
    inputs = [cs.alloc_input("x0", 5), cs.alloc("x1", 6)]
    out = poseidon_hash_circuit(cs, inputs, poseidon_constants(2), 3, [5, 6])
    assert out.value == poseidon_hash([5, 6])


def test_missing_values_are_reported() -> None:
    cs = ProvingAssignment()
    cs.alloc_input("ONE", 1)
    inputs = [cs.alloc("x0", 1), cs.alloc("x1", 2)]
    with pytest.raises(ValueError, match="values"):
        poseidon_hash_circuit(cs, inputs, poseidon_constants(2), 3)
    with pytest.raises(ValueError, match="exactly 2 inputs"):
        poseidon_hash_circuit(cs, inputs[:1], poseidon_constants(2), 3, [1])


def test_blank_recording_never_evaluates_values() -> None:
    cs = RecordingCS()
    cs.alloc_input("ONE", _raise)
    inputs = [cs.alloc(f"x{i}", _raise) for i in range(8)]
    out = poseidon_hash_circuit(cs, inputs, poseidon_constants(8), merkle_tree_tag(8))
    assert out.value is None and cs.num_constraints == 505


def _record(arity: int, tag: int) -> object:
    cs = RecordingCS()
    cs.alloc_input("ONE", 1)
    inputs = [cs.alloc(f"x{i}") for i in range(arity)]
    poseidon_hash_circuit(cs, inputs, poseidon_constants(arity), tag)
    return cs.matrices()


@pytest.mark.parametrize("arity", [2, 11])
def test_recording_is_deterministic(arity: int) -> None:
    first, second = _record(arity, merkle_tree_tag(arity)), _record(arity, merkle_tree_tag(arity))
    for name in ("a", "b", "c"):
        m1, m2 = getattr(first, name), getattr(second, name)
        assert np.array_equal(m1.row_ptr, m2.row_ptr)
        assert np.array_equal(m1.cols, m2.cols)
        assert np.array_equal(m1.coeffs, m2.coeffs)
        # bellpepper's canonical LC: one term per variable, inputs then aux, each by index.
        for row in range(m1.num_rows):
            cols = m1.cols[m1.row_ptr[row]:m1.row_ptr[row + 1]]
            assert np.all(np.diff(cols) > 0)
    assert (first.num_inputs, first.num_aux) == (1, arity + (311 if arity == 2 else 598))


def _row(matrices: object, name: str, row: int) -> dict[int, int]:
    """Row `row` of matrix `name` as {column: coefficient}; column = input i or 1 + aux j."""
    m = getattr(matrices, name)
    lo, hi = m.row_ptr[row], m.row_ptr[row + 1]
    return dict(zip(m.cols[lo:hi].tolist(), limbs_to_ints(m.coeffs[lo:hi]), strict=True))


def test_rows_follow_section_6_5_literally() -> None:
    """Arity 2, derived by hand from §6.4-6.5 (columns: 0 = ONE, 1, 2 = inputs x1, x2, 3.. = gadget aux)."""
    c = poseidon_constants(2)
    crc, m, t = c.compressed_round_constants, c.mds, c.width
    rec = _record(2, 3)
    x1, q, q2, y1 = 1, 3, 4, 5
    # Round 0, input 1: (x + pre)^2 = q; q * q = q2; (x + pre) * q2 = y - post.
    shifted = {0: crc[1], x1: 1}
    assert (_row(rec, "a", 0), _row(rec, "b", 0), _row(rec, "c", 0)) == (shifted, shifted, {q: 1})
    assert (_row(rec, "a", 1), _row(rec, "b", 1), _row(rec, "c", 1)) == ({q: 1}, {q: 1}, {q2: 1})
    post = (-crc[t + 1]) % R_MODULUS
    assert (_row(rec, "a", 2), _row(rec, "b", 2), _row(rec, "c", 2)) == (shifted, {q2: 1}, {0: post, y1: 1})
    # Round 1, element 0 "ensure allocated": (M column 0 applied to [tag S-box constant, y1, y2]) * ONE = v.
    y2, v = 8, 9
    folded = (pow(3 + crc[0], 5, R_MODULUS) + crc[t]) % R_MODULUS
    ensure = {0: folded * m[0][0] % R_MODULUS, y1: m[1][0], y2: m[2][0]}
    assert (_row(rec, "a", 6), _row(rec, "b", 6), _row(rec, "c", 6)) == (ensure, {0: 1}, {v: 1})
    # Then v * v = v2, v2 * v2 = v4, v * v4 = y - post with post = crc[2t].
    v2, v4, y = 10, 11, 12
    assert (_row(rec, "a", 7), _row(rec, "b", 7), _row(rec, "c", 7)) == ({v: 1}, {v: 1}, {v2: 1})
    assert (_row(rec, "a", 8), _row(rec, "b", 8), _row(rec, "c", 8)) == ({v2: 1}, {v2: 1}, {v4: 1})
    post = (-crc[2 * t]) % R_MODULUS
    assert (_row(rec, "a", 9), _row(rec, "b", 9), _row(rec, "c", 9)) == ({v: 1}, {v4: 1}, {0: post, y: 1})
    # Terminal round: no key in C; output = (M column 1 applied to the terminal y's) * ONE = out.
    last = rec.num_constraints - 1
    out = rec.num_inputs + rec.num_aux - 1
    terminal_ys = [out - 1 - 4 * (t - 1 - i) for i in range(t)]
    assert _row(rec, "c", last - 1) == {terminal_ys[-1]: 1}
    assert _row(rec, "a", last) == {y: m[i][1] for i, y in enumerate(terminal_ys)}
    assert (_row(rec, "b", last), _row(rec, "c", last)) == ({0: 1}, {out: 1})
