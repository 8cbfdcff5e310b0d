"""The recording back end: the circuit's A, B, C matrices in CSR form.

Rows are constraints in emission order; columns are variables in bellperson's global order
(inputs first, then aux), i.e. column = input index, or num_inputs + aux index. Terms with a zero
coefficient are dropped (they contribute nothing anywhere); repeated variables in a row are kept,
so a recorded matrix reproduces evaluation term by term.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np

from cuzk.field.limbs import ints_to_limbs
from cuzk.r1cs.lc import LinearCombination
from cuzk.r1cs.system import Annotation, ConstraintSystem, Value
from cuzk.r1cs.variable import Variable


@dataclass(frozen=True)
class CsrMatrix:
    """Sparse matrix over Fr: row i holds cols[row_ptr[i]:row_ptr[i+1]] with those coefficients."""

    row_ptr: np.ndarray  #: int64, len rows + 1
    cols: np.ndarray  #: int64, len nnz
    coeffs: np.ndarray  #: (nnz, 4) uint64, canonical little-endian limbs
    num_cols: int

    @property
    def num_rows(self) -> int:
        return len(self.row_ptr) - 1

    @property
    def nnz(self) -> int:
        return len(self.cols)


@dataclass(frozen=True)
class R1csMatrices:
    num_inputs: int
    num_aux: int
    a: CsrMatrix
    b: CsrMatrix
    c: CsrMatrix
    #: The witness (inputs then aux, canonical limbs) when recorded with values, else None.
    assignment: np.ndarray | None = None

    @property
    def num_constraints(self) -> int:
        return self.a.num_rows

    @property
    def num_variables(self) -> int:
        return self.num_inputs + self.num_aux


class _MatrixBuilder:
    __slots__ = ("coeffs", "row_ptr", "vars")

    def __init__(self) -> None:
        self.vars = array("q")
        self.coeffs: list[int] = []
        self.row_ptr = array("q", [0])

    def add_row(self, combination: LinearCombination) -> None:
        for var, coeff in combination.terms:
            if coeff:
                self.vars.append(var)
                self.coeffs.append(coeff)
        self.row_ptr.append(len(self.coeffs))

    def build(self, num_inputs: int, num_aux: int) -> CsrMatrix:
        tagged = np.frombuffer(self.vars, dtype=np.int64) if self.vars else np.zeros(0, np.int64)
        # Undo the Variable encoding: input i stays i; aux j (stored as ~j) moves after the inputs.
        cols = np.where(tagged >= 0, tagged, num_inputs + np.invert(tagged))
        return CsrMatrix(
            row_ptr=np.frombuffer(self.row_ptr, dtype=np.int64).copy(),
            cols=cols.astype(np.int64),
            coeffs=ints_to_limbs(self.coeffs),
            num_cols=num_inputs + num_aux,
        )


class RecordingCS(ConstraintSystem):
    """Records every row; with `with_values=True` also the assignment (for compiled proving)."""

    def __init__(self, *, with_values: bool = False) -> None:
        super().__init__()
        self.needs_values = with_values
        self._inputs: list[int] = []
        self._aux: list[int] = []
        self._a = _MatrixBuilder()
        self._b = _MatrixBuilder()
        self._c = _MatrixBuilder()

    def alloc(self, annotation: Annotation, value: Value = None) -> Variable:
        self._aux.append(self.resolve(annotation, value) if self.needs_values else 0)
        return Variable.aux(len(self._aux) - 1)

    def alloc_input(self, annotation: Annotation, value: Value = None) -> Variable:
        self._inputs.append(self.resolve(annotation, value) if self.needs_values else 0)
        return Variable.input(len(self._inputs) - 1)

    def enforce(self, annotation: Annotation, a: LinearCombination, b: LinearCombination,
                c: LinearCombination) -> None:
        self._a.add_row(a)
        self._b.add_row(b)
        self._c.add_row(c)

    @property
    def num_inputs(self) -> int:
        return len(self._inputs)

    @property
    def num_aux(self) -> int:
        return len(self._aux)

    @property
    def num_constraints(self) -> int:
        return len(self._a.row_ptr) - 1

    def matrices(self) -> R1csMatrices:
        n_in, n_aux = self.num_inputs, self.num_aux
        return R1csMatrices(
            num_inputs=n_in,
            num_aux=n_aux,
            a=self._a.build(n_in, n_aux),
            b=self._b.build(n_in, n_aux),
            c=self._c.build(n_in, n_aux),
            assignment=ints_to_limbs(self._inputs + self._aux) if self.needs_values else None,
        )
