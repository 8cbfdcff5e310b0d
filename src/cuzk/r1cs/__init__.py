"""Rank-1 constraint systems in bellperson's model.

A circuit (`Circuit.synthesize(cs)`) allocates variables and enforces constraints a * b = c over
linear combinations; the back end decides what that means:

- `ProvingAssignment`: witness + A/B/C evaluations + densities (what the Groth16 prover needs);
- `WitnessCS`: the witness only;
- `ShapeCS`: sizes and densities only (no values computed);
- `RecordingCS`: the A, B, C matrices in CSR form (what key generation and compiled circuits need).
"""

from cuzk.r1cs.lc import LinearCombination, lc
from cuzk.r1cs.proving import ProvingAssignment
from cuzk.r1cs.recording import CsrMatrix, R1csMatrices, RecordingCS
from cuzk.r1cs.shape import CircuitShape, ShapeCS
from cuzk.r1cs.system import Circuit, ConstraintSystem
from cuzk.r1cs.variable import ONE, Variable
from cuzk.r1cs.witness import WitnessCS

__all__ = [
    "ONE",
    "Circuit",
    "CircuitShape",
    "ConstraintSystem",
    "CsrMatrix",
    "LinearCombination",
    "ProvingAssignment",
    "R1csMatrices",
    "RecordingCS",
    "ShapeCS",
    "Variable",
    "WitnessCS",
    "lc",
]
