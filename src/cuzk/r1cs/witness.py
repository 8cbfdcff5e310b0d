"""The witness-only back end: assignments without constraint evaluation (bellperson's WitnessCS).

Used when only the values are wanted, e.g. to produce public inputs or to feed a compiled circuit
whose A/B/C matrices are already known.
"""

from __future__ import annotations

from cuzk.r1cs.lc import LinearCombination
from cuzk.r1cs.system import Annotation, ConstraintSystem, Value
from cuzk.r1cs.variable import Variable


class WitnessCS(ConstraintSystem):
    needs_values = True

    def __init__(self) -> None:
        super().__init__()
        self.input_assignment: list[int] = []
        self.aux_assignment: list[int] = []
        self._num_constraints = 0

    def alloc(self, annotation: Annotation, value: Value = None) -> Variable:
        self.aux_assignment.append(self.resolve(annotation, value))
        return Variable.aux(len(self.aux_assignment) - 1)

    def alloc_input(self, annotation: Annotation, value: Value = None) -> Variable:
        self.input_assignment.append(self.resolve(annotation, value))
        return Variable.input(len(self.input_assignment) - 1)

    def enforce(self, annotation: Annotation, a: LinearCombination, b: LinearCombination,
                c: LinearCombination) -> None:
        self._num_constraints += 1

    @property
    def num_inputs(self) -> int:
        return len(self.input_assignment)

    @property
    def num_aux(self) -> int:
        return len(self.aux_assignment)

    @property
    def num_constraints(self) -> int:
        return self._num_constraints
