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

from cuzk.field.constants import FR_LIMBS, R_MODULUS
from cuzk.field.limbs import ints_to_limbs
from cuzk.r1cs.lc import LinearCombination
from cuzk.r1cs.system import Annotation, ConstraintSystem, Value
from cuzk.r1cs.variable import Variable


@dataclass(frozen=True)
class CsrMatrix:
    """Sparse matrix over Fr: row i holds cols[row_ptr[i]:row_ptr[i+1]], entry k with coefficient
    coeff_table[coeff_idx[k]]. A, B and C of one recording share one table of distinct coefficients."""

    row_ptr: np.ndarray  #: int64, len rows + 1
    cols: np.ndarray  #: int64, len nnz
    coeff_idx: np.ndarray  #: uint32, len nnz: index into coeff_table
    coeff_table: np.ndarray  #: (distinct, 4) uint64 canonical limbs: 1, -1, then the rest in byte order
    num_cols: int

    @property
    def num_rows(self) -> int:
        return len(self.row_ptr) - 1

    @property
    def nnz(self) -> int:
        return len(self.cols)

    @property
    def coeffs(self) -> np.ndarray:
        """(nnz, 4) uint64 canonical limbs, one per entry (materialised on each call)."""
        return self.coeff_table[self.coeff_idx]


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

    @property
    def coeff_table(self) -> np.ndarray:
        return self.a.coeff_table


class CoefficientTable:
    """The distinct coefficients met while recording, each kept once as a Python int.

    The Filecoin circuits use a few hundred distinct coefficients across hundreds of millions of
    terms (nearly all ±1 and powers of two), so a term costs 12 bytes (column + index) instead of
    a Python int per term. 1 and -1 take slots 0 and 1, the convention of `cuzk.r1cs.spmv`.
    """

    __slots__ = ("index", "values")

    def __init__(self) -> None:
        self.values: list[int] = [1, R_MODULUS - 1]
        self.index: dict[int, int] = {1: 0, R_MODULUS - 1: 1}

    def intern(self, coeff: int) -> int:
        slot = self.index.get(coeff)
        if slot is None:
            slot = self.index[coeff] = len(self.values)
            self.values.append(coeff)
        return slot

    def canonical(self) -> tuple[np.ndarray, np.ndarray]:
        """The table in canonical order (1, -1, then the others by their little-endian bytes, the
        order a compiled circuit stores, so that recording order never changes a fingerprint) and
        the map from recording slots to canonical slots."""
        limbs = ints_to_limbs(self.values)
        rest = np.ascontiguousarray(limbs[2:])
        order = np.argsort(rest.view(np.dtype((np.void, 8 * FR_LIMBS))).reshape(-1), kind="stable")
        remap = np.empty(len(self.values), dtype=np.uint32)
        remap[:2] = (0, 1)
        remap[2 + order] = np.arange(2, len(self.values), dtype=np.uint32)
        return np.concatenate([limbs[:2], rest[order]]), remap


class _MatrixBuilder:
    __slots__ = ("coeff_idx", "row_ptr", "table", "vars")

    def __init__(self, table: CoefficientTable) -> None:
        self.table = table
        self.vars = array("q")
        self.coeff_idx = array("I")
        self.row_ptr = array("q", [0])

    def add_row(self, combination: LinearCombination) -> None:
        intern = self.table.intern
        for var, coeff in combination.terms:
            if coeff:
                self.vars.append(var)
                self.coeff_idx.append(intern(coeff))
        self.row_ptr.append(len(self.vars))

    def build(self, num_inputs: int, num_aux: int, table: np.ndarray, remap: np.ndarray) -> CsrMatrix:
        tagged = np.frombuffer(self.vars, dtype=np.int64) if self.vars else np.zeros(0, np.int64)
        # Undo the Variable encoding: input i stays i; aux j (stored as ~j) moves after the inputs.
        cols = np.where(tagged >= 0, tagged, num_inputs + np.invert(tagged))
        slots = np.frombuffer(self.coeff_idx, dtype=np.uint32) if self.coeff_idx else np.zeros(0, np.uint32)
        return CsrMatrix(
            row_ptr=np.frombuffer(self.row_ptr, dtype=np.int64).copy(),
            cols=cols.astype(np.int64),
            coeff_idx=remap[slots],
            coeff_table=table,
            num_cols=num_inputs + num_aux,
        )


class RecordingCS(ConstraintSystem):
    """Records every row; with `with_values=True` also the assignment (for compiled proving)."""

    def __init__(self, *, with_values: bool = False) -> None:
        super().__init__()
        self.needs_values = with_values
        # Values are kept only when asked for; otherwise allocation is a counter.
        self._inputs: list[int] = []
        self._aux: list[int] = []
        self._num_inputs = 0
        self._num_aux = 0
        self._table = CoefficientTable()
        self._a = _MatrixBuilder(self._table)
        self._b = _MatrixBuilder(self._table)
        self._c = _MatrixBuilder(self._table)

    def alloc(self, annotation: Annotation, value: Value = None) -> Variable:
        if self.needs_values:
            self._aux.append(self.resolve(annotation, value))
        self._num_aux += 1
        return Variable.aux(self._num_aux - 1)

    def alloc_input(self, annotation: Annotation, value: Value = None) -> Variable:
        if self.needs_values:
            self._inputs.append(self.resolve(annotation, value))
        self._num_inputs += 1
        return Variable.input(self._num_inputs - 1)

    def enforce(self, annotation: Annotation, a: LinearCombination, b: LinearCombination,
                c: LinearCombination) -> None:
        self._a.add_row(a)
        self._b.add_row(b)
        self._c.add_row(c)

    @property
    def num_inputs(self) -> int:
        return self._num_inputs

    @property
    def num_aux(self) -> int:
        return self._num_aux

    @property
    def num_constraints(self) -> int:
        return len(self._a.row_ptr) - 1

    def matrices(self) -> R1csMatrices:
        n_in, n_aux = self.num_inputs, self.num_aux
        table, remap = self._table.canonical()
        return R1csMatrices(
            num_inputs=n_in,
            num_aux=n_aux,
            a=self._a.build(n_in, n_aux, table, remap),
            b=self._b.build(n_in, n_aux, table, remap),
            c=self._c.build(n_in, n_aux, table, remap),
            assignment=ints_to_limbs(self._inputs + self._aux) if self.needs_values else None,
        )
