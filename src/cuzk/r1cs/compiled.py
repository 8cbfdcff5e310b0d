"""Compiled circuits: a circuit's A, B, C matrices recorded once, evaluated per proof by SpMV.

A circuit's R1CS does not depend on its witness, so instead of evaluating every linear combination
constraint by constraint in Python (`ProvingAssignment.enforce`), a compiled circuit keeps A, B
and C as CSR matrices over bellperson's combined variable order (inputs, then aux) and computes
a = A·w, b = B·w, c = C·w with a parallel numba kernel (`cuzk.r1cs.spmv`) from a witness w that
`WitnessCS` produced without evaluating anything.

Exactly the ProvingAssignment result: rows keep the recorded terms (repeats included, zero
coefficients dropped, as `RecordingCS` records them), so each row is the same sum; the density
bitmaps are the ones `ProvingAssignment` computes (a variable is dense in A or B once it appears
there with a non-zero coefficient, whatever the sum).

Compact form: each entry is a uint32 column and an index (uint16, or uint32 beyond 65,536) into a
table of distinct coefficients in Montgomery form, 1 and -1 first (see `cuzk.r1cs.spmv`); densities
are packed bitmaps. `fingerprint` is a BLAKE2b digest of the counts and every array, i.e. of the
circuit's exact R1CS; `code_digest` names the synthesis code the circuit was recorded from, so a
compiled file made by other code is recognised as stale (see `cuzk.r1cs.compiled_file`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from cuzk.errors import CuzkError, SynthesisError
from cuzk.field.constants import FR_LIMBS
from cuzk.field.fr_vec import from_montgomery, to_montgomery
from cuzk.field.limbs import check_canonical
from cuzk.r1cs.recording import CsrMatrix, R1csMatrices
from cuzk.r1cs.shape import CircuitShape
from cuzk.r1cs.spmv import check_rows, spmv3_table

#: Rows in each part of `CompiledCircuit.evaluate(..., ready=)`: a part's a, b, c (0.8 GB) leave a
#: staging buffer quickly on a PCIe 5 link, and the parts cost nothing against one pass
#: (benchmarks/HISTORY.md; docs/memory.md, section 8).
PART_ROWS = 1 << 23

__all__ = [
    "CompiledCircuit",
    "CompiledMatrix",
    "CompiledMismatchError",
    "compile_matrices",
]

_MAX_U32 = (1 << 32) - 1


class CompiledMismatchError(CuzkError):
    """A witness does not fit a compiled circuit (other counts: another circuit or other code)."""


@dataclass(frozen=True)
class CompiledMatrix:
    """One of A, B, C: row i's entries are cols / coeff_idx[row_ptr[i]:row_ptr[i + 1]]."""

    row_ptr: np.ndarray  #: uint32 (int64 when nnz >= 2^32), len rows + 1
    cols: np.ndarray  #: uint32, combined variable index
    coeff_idx: np.ndarray  #: uint16 or uint32, index into the coefficient table

    @property
    def num_rows(self) -> int:
        return self.row_ptr.shape[0] - 1

    @property
    def nnz(self) -> int:
        return self.cols.shape[0]

    def check(self, name: str, rows: int, num_cols: int, table_len: int) -> None:
        """Structural checks the SpMV kernel relies on (it does no bounds checks of its own)."""
        if self.row_ptr.ndim != 1 or self.row_ptr.shape[0] != rows + 1:
            raise ValueError(f"matrix {name}: row_ptr has {self.row_ptr.shape[0]} entries, expected {rows + 1}")
        if self.cols.ndim != 1 or self.cols.shape != self.coeff_idx.shape:
            raise ValueError(f"matrix {name}: cols {self.cols.shape} and coeff_idx {self.coeff_idx.shape} differ")
        if int(self.row_ptr[0]) != 0 or int(self.row_ptr[-1]) != self.nnz:
            raise ValueError(f"matrix {name}: row_ptr must run from 0 to nnz = {self.nnz}")
        if rows and np.any(self.row_ptr[1:] < self.row_ptr[:-1]):
            raise ValueError(f"matrix {name}: row_ptr decreases")
        if self.nnz and int(self.cols.max()) >= num_cols:
            raise ValueError(f"matrix {name}: column {int(self.cols.max())} out of range [0, {num_cols})")
        if self.nnz and int(self.coeff_idx.max()) >= table_len:
            raise ValueError(f"matrix {name}: coefficient index {int(self.coeff_idx.max())} beyond the table of "
                             f"{table_len}")


@dataclass(frozen=True)
class CompiledCircuit:
    """A circuit's R1CS in compact CSR form, densities and counts; see the module docstring."""

    circuit_id: str
    num_inputs: int
    num_aux: int
    num_constraints: int
    a: CompiledMatrix
    b: CompiledMatrix
    c: CompiledMatrix
    coeff_table: np.ndarray  #: (k, 4) uint64 Montgomery form; [0] = 1, [1] = -1
    a_aux_density_bits: np.ndarray  #: uint8, np.packbits(bitorder="little") of a bool (num_aux,)
    b_input_density_bits: np.ndarray
    b_aux_density_bits: np.ndarray
    a_input_density: int  #: inputs with a non-zero A coefficient (all of them, via the input rows)
    code_digest: str = ""  #: the synthesis code it was recorded from ("" = not stated)
    fingerprint: str = field(default="", compare=False)  #: set by `with_fingerprint`

    # -- arrays by name, as the file format stores them -------------------------------------------
    ARRAY_NAMES = ("a_row_ptr", "a_cols", "a_coeff_idx", "b_row_ptr", "b_cols", "b_coeff_idx", "c_row_ptr",
                   "c_cols", "c_coeff_idx", "coeff_table", "a_aux_density_bits", "b_input_density_bits",
                   "b_aux_density_bits")

    def arrays(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for name, mat in (("a", self.a), ("b", self.b), ("c", self.c)):
            out[f"{name}_row_ptr"] = mat.row_ptr
            out[f"{name}_cols"] = mat.cols
            out[f"{name}_coeff_idx"] = mat.coeff_idx
        out["coeff_table"] = self.coeff_table
        out["a_aux_density_bits"] = self.a_aux_density_bits
        out["b_input_density_bits"] = self.b_input_density_bits
        out["b_aux_density_bits"] = self.b_aux_density_bits
        return out

    def counts(self) -> dict[str, int]:
        return {"num_inputs": self.num_inputs, "num_aux": self.num_aux, "num_constraints": self.num_constraints,
                "a_input_density": self.a_input_density}

    @classmethod
    def from_arrays(cls, circuit_id: str, counts: dict[str, int], arrays: dict[str, np.ndarray],
                    code_digest: str) -> CompiledCircuit:
        """Reassemble from `arrays()` / `counts()` output and check the structure (ValueError)."""
        missing = [n for n in cls.ARRAY_NAMES if n not in arrays]
        if missing:
            raise ValueError(f"missing arrays: {', '.join(missing)}")
        mats = [CompiledMatrix(arrays[f"{n}_row_ptr"], arrays[f"{n}_cols"], arrays[f"{n}_coeff_idx"])
                for n in "abc"]
        out = cls(circuit_id=circuit_id, num_inputs=counts["num_inputs"], num_aux=counts["num_aux"],
                  num_constraints=counts["num_constraints"], a=mats[0], b=mats[1], c=mats[2],
                  coeff_table=arrays["coeff_table"], a_aux_density_bits=arrays["a_aux_density_bits"],
                  b_input_density_bits=arrays["b_input_density_bits"],
                  b_aux_density_bits=arrays["b_aux_density_bits"], a_input_density=counts["a_input_density"],
                  code_digest=code_digest)
        out.check()
        return out

    def check(self) -> None:
        """Structural consistency (ValueError naming the problem)."""
        table = self.coeff_table
        if table.ndim != 2 or table.shape[1] != FR_LIMBS or table.dtype != np.uint64 or table.shape[0] < 2:
            raise ValueError(f"coefficient table must be (k >= 2, 4) uint64, got {table.shape} {table.dtype}")
        if check_canonical(table) >= 0:
            raise ValueError(f"coefficient table entry {check_canonical(table)} is not a field element")
        for name, mat in (("A", self.a), ("B", self.b), ("C", self.c)):
            mat.check(name, self.num_constraints, self.num_variables, table.shape[0])
        for name, bits, n in (("a_aux", self.a_aux_density_bits, self.num_aux),
                              ("b_input", self.b_input_density_bits, self.num_inputs),
                              ("b_aux", self.b_aux_density_bits, self.num_aux)):
            if bits.shape != ((n + 7) // 8,) or bits.dtype != np.uint8:
                raise ValueError(f"{name} density bitmap has shape {bits.shape}, expected ({(n + 7) // 8},) uint8")

    # -- identity ---------------------------------------------------------------------------------
    def array_digests(self) -> dict[str, str]:
        return {name: array_digest(arr) for name, arr in self.arrays().items()}

    def compute_fingerprint(self, digests: dict[str, str] | None = None) -> str:
        """BLAKE2b-256 over the circuit id, counts and every array's dtype, shape and content digest."""
        digests = digests or self.array_digests()
        arrays = self.arrays()
        desc = {"circuit_id": self.circuit_id, "counts": self.counts(),
                "arrays": [[name, arrays[name].dtype.str, list(arrays[name].shape), digests[name]]
                           for name in self.ARRAY_NAMES]}
        return hashlib.blake2b(json.dumps(desc, sort_keys=True).encode(), digest_size=32).hexdigest()

    def with_fingerprint(self, fingerprint: str | None = None) -> CompiledCircuit:
        from dataclasses import replace

        return replace(self, fingerprint=fingerprint or self.compute_fingerprint())

    # -- sizes --------------------------------------------------------------------------------------
    @property
    def num_variables(self) -> int:
        return self.num_inputs + self.num_aux

    @property
    def nnz(self) -> int:
        return self.a.nnz + self.b.nnz + self.c.nnz

    @property
    def nbytes(self) -> int:
        return sum(arr.nbytes for arr in self.arrays().values())

    @cached_property
    def coeff_table_canonical(self) -> np.ndarray:
        return from_montgomery(self.coeff_table)

    # -- densities --------------------------------------------------------------------------------
    @cached_property
    def a_aux_density(self) -> np.ndarray:
        return _unpack(self.a_aux_density_bits, self.num_aux)

    @cached_property
    def b_input_density(self) -> np.ndarray:
        return _unpack(self.b_input_density_bits, self.num_inputs)

    @cached_property
    def b_aux_density(self) -> np.ndarray:
        return _unpack(self.b_aux_density_bits, self.num_aux)

    def shape(self) -> CircuitShape:
        return CircuitShape(num_inputs=self.num_inputs, num_aux=self.num_aux, num_constraints=self.num_constraints,
                            a_input_density=self.a_input_density, a_aux_density=int(self.a_aux_density.sum()),
                            b_input_density=int(self.b_input_density.sum()),
                            b_aux_density=int(self.b_aux_density.sum()))

    # -- evaluation -------------------------------------------------------------------------------
    def check_witness(self, num_inputs: int, num_aux: int, num_constraints: int | None = None) -> None:
        """Refuse a witness of other counts than the compiled circuit (CompiledMismatchError)."""
        want = (self.num_inputs, self.num_aux, self.num_constraints)
        check_witness_counts(self.circuit_id, want, (num_inputs, num_aux, want[2] if num_constraints is None
                                                     else num_constraints))

    def evaluate(self, inputs: np.ndarray, aux: np.ndarray,
                 out: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None, *, check: bool = False,
                 ready: Callable[[int], None] | None = None, part_rows: int | None = None,
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """a, b, c (canonical (constraints, 4) uint64) for the witness (canonical limb arrays),
        written into `out` when given (a prover's pinned staging); with `check`, in the same pass,
        SynthesisError naming the first rows where a·b != c (`check_satisfied`'s). With `ready`, the
        rows go in parts of `part_rows` (default `PART_ROWS`), each after `ready(end)` has returned:
        `out` may still be read (by a transfer) below that row until then."""
        self.check_witness(inputs.shape[0], aux.shape[0])
        mats = tuple((m.row_ptr, m.cols, m.coeff_idx) for m in (self.a, self.b, self.c))
        rows = self.num_constraints
        a, b, c = out if out is not None else tuple(np.empty((rows, 4), dtype=np.uint64) for _ in range(3))
        # Without `ready`, one part of all the rows.
        found, step = [], max(1, rows if ready is None else part_rows or PART_ROWS)
        for lo in range(0, rows, step):
            hi = min(rows, lo + step)
            if ready is not None:
                ready(hi)
            # A row range's row pointers index the whole cols and coefficients as they are.
            part = tuple((ptr[lo:hi + 1], cols, idx) for ptr, cols, idx in mats)
            *_, bad = spmv3_table(part, self.coeff_table, inputs, aux, (a[lo:hi], b[lo:hi], c[lo:hi]),
                                  check=check, table_canonical=self.coeff_table_canonical)
            found.append(bad + lo)
        bad = np.concatenate(found) if found else np.empty(0, dtype=np.int64)
        if bad.size:
            self._refuse(bad)
        return a, b, c

    def check_satisfied(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
        """Raise SynthesisError naming the first rows where a·b != c."""
        bad = check_rows(a, b, c)
        if bad.size:
            self._refuse(bad)

    def _refuse(self, bad: np.ndarray) -> None:
        """SynthesisError naming the first of the unsatisfied rows `bad`."""
        rows = ", ".join(str(int(r)) for r in bad[:8])
        raise SynthesisError(f"compiled circuit {self.circuit_id!r}: {bad.size} of {self.num_constraints} "
                             f"constraints are not satisfied by the witness (rows {rows}"
                             f"{', ...' if bad.size > 8 else ''})")


def check_witness_counts(circuit_id: str, want: tuple[int, int, int], got: tuple[int, int, int]) -> None:
    """CompiledMismatchError unless a witness's (inputs, aux, constraints) are the compiled circuit's."""
    if got != want:
        raise CompiledMismatchError(
            f"compiled circuit {circuit_id!r} has {want[0]} inputs, {want[1]} aux variables and {want[2]} "
            f"constraints; the witness has {got[0]}, {got[1]} and {got[2]} (another circuit, or the compiled "
            "file is stale)")


def array_digest(arr: np.ndarray) -> str:
    """BLAKE2b-256 of an array's bytes (C order), without copying a contiguous array."""
    h = hashlib.blake2b(digest_size=32)
    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    step = 1 << 26  # hashlib releases the GIL on large updates; chunks keep memoryviews small
    for start in range(0, flat.size, step):
        h.update(memoryview(flat[start:start + step]))
    return h.hexdigest()


def _unpack(bits: np.ndarray, n: int) -> np.ndarray:
    return np.unpackbits(bits, count=n, bitorder="little").astype(bool)


def _pack(mask: np.ndarray) -> np.ndarray:
    return np.packbits(mask.astype(np.uint8), bitorder="little")


def _compact(mat: CsrMatrix, idx: np.ndarray) -> CompiledMatrix:
    nnz = mat.nnz
    ptr_dtype = np.uint32 if nnz <= _MAX_U32 else np.int64
    return CompiledMatrix(row_ptr=mat.row_ptr.astype(ptr_dtype), cols=mat.cols.astype(np.uint32),
                          coeff_idx=np.ascontiguousarray(idx))


def compile_matrices(matrices: R1csMatrices, circuit_id: str, *, code_digest: str = "") -> CompiledCircuit:
    """The compact compiled form of recorded matrices (`record_circuit` output, input rows included)."""
    n_in, n_aux = matrices.num_inputs, matrices.num_aux
    if n_in + n_aux > _MAX_U32:
        raise CuzkError(f"{circuit_id}: {n_in + n_aux} variables do not fit the uint32 columns of a compiled circuit")
    # The recording's shared table is already in the compiled order (1, -1, the rest by bytes).
    table = matrices.coeff_table
    idx_dtype = np.uint16 if table.shape[0] <= 1 << 16 else np.uint32
    ia, ib, ic = (m.coeff_idx.astype(idx_dtype) for m in (matrices.a, matrices.b, matrices.c))
    a_cols, b_cols = matrices.a.cols, matrices.b.cols
    a_aux = np.zeros(n_aux, dtype=bool)
    a_aux[a_cols[a_cols >= n_in] - n_in] = True
    b_input = np.zeros(n_in, dtype=bool)
    b_input[b_cols[b_cols < n_in]] = True
    b_aux = np.zeros(n_aux, dtype=bool)
    b_aux[b_cols[b_cols >= n_in] - n_in] = True
    a_input = int(np.unique(a_cols[a_cols < n_in]).size)
    compiled = CompiledCircuit(
        circuit_id=circuit_id, num_inputs=n_in, num_aux=n_aux, num_constraints=matrices.num_constraints,
        a=_compact(matrices.a, ia), b=_compact(matrices.b, ib), c=_compact(matrices.c, ic),
        coeff_table=to_montgomery(table), a_aux_density_bits=_pack(a_aux), b_input_density_bits=_pack(b_input),
        b_aux_density_bits=_pack(b_aux), a_input_density=a_input, code_digest=code_digest)
    compiled.check()
    return compiled.with_fingerprint()
