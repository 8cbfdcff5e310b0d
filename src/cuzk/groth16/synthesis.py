"""Running a circuit the way bellperson's Groth16 generator and prover do.

Both allocate input 0 = ONE before the circuit runs and, afterwards, append one constraint per
input (A = input_i, B = 0, C = 0) so that every input lands in the A query and the inputs are
linearly independent. Published parameters depend on this exact order.
"""

from __future__ import annotations

from cuzk.r1cs import (
    Circuit,
    CircuitShape,
    ConstraintSystem,
    LinearCombination,
    ProvingAssignment,
    R1csMatrices,
    RecordingCS,
    ShapeCS,
    Variable,
)


def _run(circuit: Circuit, cs: ConstraintSystem) -> None:
    cs.alloc_input("ONE", 1)
    circuit.synthesize(cs)
    for i in range(cs.num_inputs):
        cs.enforce("input constraint", LinearCombination.of(Variable.input(i)), LinearCombination(),
                   LinearCombination())


def synthesize_for_proving(circuit: Circuit, *, check: bool = False) -> ProvingAssignment:
    """Witness, A/B/C evaluations and densities; `check` verifies every row as it is emitted."""
    cs = ProvingAssignment(check=check)
    _run(circuit, cs)
    return cs


def record_circuit(circuit: Circuit, *, with_values: bool = False) -> R1csMatrices:
    """The circuit's A, B, C matrices (input constraints included), as key generation sees them."""
    cs = RecordingCS(with_values=with_values)
    _run(circuit, cs)
    return cs.matrices()


def circuit_shape(circuit: Circuit) -> CircuitShape:
    cs = ShapeCS()
    _run(circuit, cs)
    return cs.shape()
