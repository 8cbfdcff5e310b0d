"""The proving back end: records the witness and the A/B/C evaluation of every constraint.

Mirrors bellperson's `ProvingAssignment`: A is evaluated with aux density tracking only (every input
is in the A query), B with input and aux density, C with none. A variable is "dense" in A (or B) once
it appears there with a non-zero coefficient, whatever its value: this is what decides which
parameter points the prover uses.
"""

from __future__ import annotations

from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.r1cs.lc import LinearCombination
from cuzk.r1cs.system import Annotation, ConstraintSystem, Value
from cuzk.r1cs.variable import Variable


class ProvingAssignment(ConstraintSystem):
    """Witness + per-constraint evaluations. With `check=True`, each row must hold (a*b == c)."""

    needs_values = True

    def __init__(self, *, check: bool = False) -> None:
        super().__init__()
        self.check = check
        self.input_assignment: list[int] = []
        self.aux_assignment: list[int] = []
        self.a: list[int] = []
        self.b: list[int] = []
        self.c: list[int] = []
        self.a_aux_density = bytearray()
        self.b_input_density = bytearray()
        self.b_aux_density = bytearray()

    def alloc(self, annotation: Annotation, value: Value = None) -> Variable:
        self.aux_assignment.append(self.resolve(annotation, value))
        self.a_aux_density.append(0)
        self.b_aux_density.append(0)
        return Variable.aux(len(self.aux_assignment) - 1)

    def alloc_input(self, annotation: Annotation, value: Value = None) -> Variable:
        self.input_assignment.append(self.resolve(annotation, value))
        self.b_input_density.append(0)
        return Variable.input(len(self.input_assignment) - 1)

    def enforce(self, annotation: Annotation, a: LinearCombination, b: LinearCombination,
                c: LinearCombination) -> None:
        inputs = self.input_assignment
        aux = self.aux_assignment
        # Written out three times on purpose: this loop is the synthesis hot path.
        a_aux_density = self.a_aux_density
        av = 0
        for var, coeff in a.terms:
            if coeff:
                if var >= 0:
                    av += inputs[var] * coeff
                else:
                    av += aux[~var] * coeff
                    a_aux_density[~var] = 1
        b_input_density = self.b_input_density
        b_aux_density = self.b_aux_density
        bv = 0
        for var, coeff in b.terms:
            if coeff:
                if var >= 0:
                    bv += inputs[var] * coeff
                    b_input_density[var] = 1
                else:
                    bv += aux[~var] * coeff
                    b_aux_density[~var] = 1
        cv = 0
        for var, coeff in c.terms:
            if coeff:
                cv += (inputs[var] if var >= 0 else aux[~var]) * coeff
        av %= R_MODULUS
        bv %= R_MODULUS
        cv %= R_MODULUS
        if self.check and av * bv % R_MODULUS != cv:
            raise SynthesisError(
                f"constraint {len(self.a)} ({self.path_of(annotation)!r}) is not satisfied: "
                f"a*b = {av * bv % R_MODULUS:#x}, c = {cv:#x}"
            )
        self.a.append(av)
        self.b.append(bv)
        self.c.append(cv)

    @property
    def num_inputs(self) -> int:
        return len(self.input_assignment)

    @property
    def num_aux(self) -> int:
        return len(self.aux_assignment)

    @property
    def num_constraints(self) -> int:
        return len(self.a)
