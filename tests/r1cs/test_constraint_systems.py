"""The four constraint-system back ends agree with each other and with bellperson's rules."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cuzk.circuits.examples import BitsCircuit, MimcCircuit
from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs, limbs_to_ints
from cuzk.groth16.synthesis import circuit_shape, record_circuit, synthesize_for_proving
from cuzk.r1cs import (
    ONE,
    LinearCombination,
    ProvingAssignment,
    RecordingCS,
    ShapeCS,
    Variable,
    WitnessCS,
    lc,
)


def test_variable_encoding_keeps_two_index_spaces() -> None:
    assert Variable.input(0) == ONE and ONE.is_input and ONE.index == 0
    aux = Variable.aux(7)
    assert not aux.is_input and aux.index == 7 and repr(aux) == "Aux(7)"
    assert Variable.input(3).index == 3 and repr(Variable.input(3)) == "Input(3)"


def test_linear_combination_keeps_order_and_repeats() -> None:
    x, y = Variable.aux(0), Variable.aux(1)
    combo = lc(x, (y, 2)) + x - y
    assert combo.terms == [(x, 1), (y, 2), (x, 1), (y, R_MODULUS - 1)]
    assert (3 * LinearCombination.of(x)).terms == [(x, 3)]
    assert (-LinearCombination.constant(1)).terms == [(ONE, R_MODULUS - 1)]


def _toy(cs) -> tuple[Variable, Variable, Variable]:
    """x*y = z with x = 3, y = 5 public z; B uses the input."""
    x = cs.alloc("x", 3)
    z = cs.alloc_input("z", 15)
    y = cs.alloc("y", lambda: 5)
    cs.enforce("x*y=z", lc(x), lc(y), lc(z))
    cs.enforce("z*1=z", lc(z), lc(ONE), lc(z))
    return x, y, z


def test_proving_assignment_evaluates_rows_and_tracks_densities() -> None:
    cs = ProvingAssignment(check=True)
    cs.alloc_input("ONE", 1)
    _toy(cs)
    assert cs.input_assignment == [1, 15]
    assert cs.aux_assignment == [3, 5]
    assert cs.a == [3, 15] and cs.b == [5, 1] and cs.c == [15, 15]
    # A: aux density only (x in A); B: inputs and aux (ONE and y in B).
    assert list(cs.a_aux_density) == [1, 0]
    assert list(cs.b_aux_density) == [0, 1]
    assert list(cs.b_input_density) == [1, 0]


def test_zero_coefficients_do_not_make_a_variable_dense() -> None:
    cs = ProvingAssignment()
    x = cs.alloc("x", 2)
    cs.enforce("zero coeff", lc((x, 0)), lc((x, R_MODULUS)), lc())
    assert list(cs.a_aux_density) == [0] and list(cs.b_aux_density) == [0]


def test_check_mode_names_the_unsatisfied_constraint() -> None:
    cs = ProvingAssignment(check=True)
    cs.alloc_input("ONE", 1)
    x = cs.alloc("x", 2)
    with cs.namespace("gadget"), pytest.raises(SynthesisError, match=r"constraint 0 \('gadget/x\*x=5'\)"):
        cs.enforce("x*x=5", lc(x), lc(x), LinearCombination.constant(5))


def test_missing_value_names_the_variable() -> None:
    cs = ProvingAssignment()
    with cs.namespace("outer"), pytest.raises(SynthesisError, match="assignment missing for 'outer/w'"):
        cs.alloc("w", None)


def test_shape_and_recording_never_evaluate_values() -> None:
    def explode() -> int:
        raise AssertionError("value computed by a structure-only back end")

    for cs in (ShapeCS(), RecordingCS()):
        v = cs.alloc("v", explode)
        cs.enforce("v*v=v", lc(v), lc(v), lc(v))
        assert cs.num_constraints == 1


@pytest.mark.parametrize("circuit", [
    MimcCircuit(rounds=20, extra=2, preimage=12345),
    BitsCircuit.random(3, random.Random(1)),
])
def test_back_ends_agree(circuit) -> None:
    prover = synthesize_for_proving(circuit, check=True)
    shape = circuit_shape(circuit)
    assert (shape.num_inputs, shape.num_aux, shape.num_constraints) == (
        prover.num_inputs, prover.num_aux, prover.num_constraints)
    assert shape.a_aux_density == sum(prover.a_aux_density)
    assert shape.b_aux_density == sum(prover.b_aux_density)
    assert shape.b_input_density == sum(prover.b_input_density)
    assert shape.a_input_density == shape.num_inputs  # every input has its A row

    witness = WitnessCS()
    witness.alloc_input("ONE", 1)
    circuit.synthesize(witness)
    assert witness.input_assignment == prover.input_assignment
    assert witness.aux_assignment == prover.aux_assignment

    # The recorded matrices reproduce every evaluation term by term.
    rec = record_circuit(circuit, with_values=True)
    assert rec.num_constraints == prover.num_constraints
    w = limbs_to_ints(rec.assignment)
    assert w == prover.input_assignment + prover.aux_assignment
    for matrix, expected in ((rec.a, prover.a), (rec.b, prover.b), (rec.c, prover.c)):
        coeffs = limbs_to_ints(matrix.coeffs)
        got = [sum(coeffs[k] * w[matrix.cols[k]] for k in range(matrix.row_ptr[i], matrix.row_ptr[i + 1]))
               % R_MODULUS for i in range(matrix.num_rows)]
        assert got == expected
        assert matrix.num_cols == rec.num_variables


def test_recording_maps_aux_after_inputs() -> None:
    cs = RecordingCS()
    a0 = cs.alloc("a0")
    i1 = cs.alloc_input("i1")
    a1 = cs.alloc("a1")
    cs.enforce("row", lc(a1, (i1, 2)), lc(a0), lc())
    m = cs.matrices()
    assert m.num_inputs == 1 and m.num_aux == 2
    # inputs: i1 -> column 0; aux a0 -> 1, a1 -> 2
    assert list(m.a.cols) == [2, 0] and list(m.b.cols) == [1]
    assert limbs_to_ints(m.a.coeffs) == [1, 2]
    assert np.array_equal(m.c.row_ptr, [0, 0])


def test_mimc_sizes_are_exact() -> None:
    for total in (1 << 10, (1 << 10) + 1, (1 << 10) + 2):
        circuit = MimcCircuit.with_total_constraints(total, preimage=7)
        assert circuit_shape(circuit).num_constraints == total == circuit.num_constraints


def test_recording_interns_coefficients_in_canonical_order() -> None:
    """A, B and C share one table of distinct coefficients: 1 and -1 first, then the others by their
    little-endian bytes whatever order the circuit used them in, so the recorded table (and a compiled
    circuit's fingerprint) never depends on emission order; `coeffs` expands it per entry."""
    big, small = (1 << 200) + 5, 3
    for first, second in ((big, small), (small, big)):
        cs = RecordingCS()
        x = cs.alloc("x")
        y = cs.alloc("y")
        cs.enforce("r0", LinearCombination([(x, first), (y, R_MODULUS - 1)]), LinearCombination.of(y),
                   LinearCombination([(x, 0), (y, second)]))
        cs.enforce("r1", LinearCombination.of(x), LinearCombination([(y, first), (x, 1)]), LinearCombination())
        m = cs.matrices()
        assert m.coeff_table.tolist() == ints_to_limbs([1, R_MODULUS - 1, small, big]).tolist()
        assert m.a.coeff_table is m.b.coeff_table is m.c.coeff_table
        assert m.a.coeffs.tolist() == ints_to_limbs([first, R_MODULUS - 1, 1]).tolist()
        assert m.b.coeffs.tolist() == ints_to_limbs([1, first, 1]).tolist()
        assert m.c.coeffs.tolist() == ints_to_limbs([second]).tolist()  # the zero term is dropped
        assert m.c.row_ptr.tolist() == [0, 1, 1] and cs.num_aux == 2 and m.assignment is None
