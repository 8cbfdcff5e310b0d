"""The shape-counting back end: sizes and densities of a circuit, without values.

Answers "how big is this circuit and which variables reach the A and B queries" cheaply; these
numbers equal the vector lengths in a `.params` header, so they check a circuit against published
parameters without proving anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from cuzk.r1cs.lc import LinearCombination
from cuzk.r1cs.system import Annotation, ConstraintSystem, Value
from cuzk.r1cs.variable import Variable


@dataclass(frozen=True)
class CircuitShape:
    num_inputs: int
    num_aux: int
    num_constraints: int
    a_input_density: int  #: inputs with a non-zero A coefficient somewhere
    a_aux_density: int
    b_input_density: int
    b_aux_density: int

    @property
    def a_query_len(self) -> int:
        return self.a_input_density + self.a_aux_density

    @property
    def b_query_len(self) -> int:
        return self.b_input_density + self.b_aux_density


class ShapeCS(ConstraintSystem):
    needs_values = False

    def __init__(self) -> None:
        super().__init__()
        self._inputs = 0
        self._aux = 0
        self._constraints = 0
        self.a_input = bytearray()
        self.a_aux = bytearray()
        self.b_input = bytearray()
        self.b_aux = bytearray()

    def alloc(self, annotation: Annotation, value: Value = None) -> Variable:
        self._aux += 1
        self.a_aux.append(0)
        self.b_aux.append(0)
        return Variable.aux(self._aux - 1)

    def alloc_input(self, annotation: Annotation, value: Value = None) -> Variable:
        self._inputs += 1
        self.a_input.append(0)
        self.b_input.append(0)
        return Variable.input(self._inputs - 1)

    def enforce(self, annotation: Annotation, a: LinearCombination, b: LinearCombination,
                c: LinearCombination) -> None:
        self._constraints += 1
        for dens_in, dens_aux, terms in ((self.a_input, self.a_aux, a.terms),
                                         (self.b_input, self.b_aux, b.terms)):
            for var, coeff in terms:
                if coeff:
                    if var >= 0:
                        dens_in[var] = 1
                    else:
                        dens_aux[~var] = 1

    @property
    def num_inputs(self) -> int:
        return self._inputs

    @property
    def num_aux(self) -> int:
        return self._aux

    @property
    def num_constraints(self) -> int:
        return self._constraints

    def shape(self) -> CircuitShape:
        return CircuitShape(
            num_inputs=self._inputs,
            num_aux=self._aux,
            num_constraints=self._constraints,
            a_input_density=sum(self.a_input),
            a_aux_density=sum(self.a_aux),
            b_input_density=sum(self.b_input),
            b_aux_density=sum(self.b_aux),
        )
