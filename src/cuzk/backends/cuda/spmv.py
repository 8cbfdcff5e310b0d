"""A compiled circuit's a = A·w, b = B·w, c = C·w on the device (driving kernels/spmv.cu).

The matrices keep their compiled layout (`cuzk.r1cs.compiled.CompiledMatrix`): row pointers (u32,
or u64 past 2^32 entries), u32 columns in bellperson's combined order and u16/u32 indices into the
coefficient table, which goes up twice, in Montgomery form and canonical. Witness and results are
(n, 8) u32 canonical arrays, the bytes of the CPU's (n, 4) uint64 arrays, so a, b, c come out
bit-identical to `CompiledCircuit.evaluate` and can go straight into the prover's device buffers.

`DeviceSpmv.prepare` uploads a compiled circuit's tables and, where asked, its matrices; a matrix
left on the host is uploaded for each `evaluate` and dropped after its product (one matrix at a
time, for devices where the whole CSR does not fit next to a key). Rows of more than `long_row`
entries are listed once per matrix when it is uploaded (on the device) and summed by a block each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cuzk.errors import SynthesisError
from cuzk.field.fr_vec import from_montgomery
from cuzk.r1cs.compiled import CompiledCircuit, CompiledMatrix

__all__ = ["LONG_ROW", "LONG_ROW_THREADS", "DeviceCompiled", "DeviceMatrix", "DeviceSpmv", "matrix_bytes"]

#: Rows with more entries than this are summed by a block of LONG_ROW_THREADS threads instead of one thread.
LONG_ROW = 32
LONG_ROW_THREADS = 32
_BLOCK = 256
_FR_WORDS = 8
_MATRIX_NAMES = ("A", "B", "C")


def matrix_bytes(compiled: CompiledCircuit) -> int:
    """Device bytes of a compiled circuit's three matrices (the long-row lists, a fraction of a
    percent of the rows, aside)."""
    return sum(matrix_bytes_of(m) for m in (compiled.a, compiled.b, compiled.c))


def matrix_bytes_of(mat: CompiledMatrix) -> int:
    """Bytes of one matrix's three arrays."""
    return mat.row_ptr.nbytes + mat.cols.nbytes + mat.coeff_idx.nbytes


def largest_matrix_bytes(compiled: CompiledCircuit) -> int:
    """Device bytes of the largest of the three matrices: what a proof holds of them at once when
    they are not resident (each goes up for its product and is dropped after)."""
    return max(matrix_bytes_of(m) for m in (compiled.a, compiled.b, compiled.c))


def _kernel_suffix(mat: CompiledMatrix, name: str) -> str:
    ptr = {np.dtype(np.uint32): "p32", np.dtype(np.int64): "p64", np.dtype(np.uint64): "p64"}.get(mat.row_ptr.dtype)
    idx = {np.dtype(np.uint16): "i16", np.dtype(np.uint32): "i32"}.get(mat.coeff_idx.dtype)
    if ptr is None or idx is None or mat.cols.dtype != np.uint32:
        raise ValueError(f"matrix {name}: row_ptr {mat.row_ptr.dtype}, cols {mat.cols.dtype}, coeff_idx "
                         f"{mat.coeff_idx.dtype} is not a compiled layout (u32/i64, u32, u16/u32)")
    return f"{ptr}_{idx}"


@dataclass
class DeviceMatrix:
    """One compiled matrix on the device."""

    suffix: str  #: kernel name suffix (index types)
    rows: int
    row_ptr: Any
    cols: Any
    coeff_idx: Any
    long_rows: Any  #: u32 indices of the rows of more than `long_row` entries

    @property
    def nbytes(self) -> int:
        return sum(int(x.nbytes) for x in (self.row_ptr, self.cols, self.coeff_idx, self.long_rows))


@dataclass
class DeviceCompiled:
    """A compiled circuit prepared for `DeviceSpmv.evaluate`: its tables on the device, and each of
    A, B, C either resident (a DeviceMatrix) or None (uploaded by each evaluation, from its copy in
    `host` when it has one: pinned host memory, which the link reads at its full rate, where the
    compiled file's pages go through a staging copy first)."""

    compiled: CompiledCircuit
    table_mont: Any
    table_canonical: Any
    matrices: list[DeviceMatrix | None] = field(default_factory=list)
    host: list[CompiledMatrix | None] = field(default_factory=list)
    owner: Any = None  #: the proving key whose memory plan this residency was decided beside

    @property
    def nbytes(self) -> int:
        return int(self.table_mont.nbytes) * 2 + sum(m.nbytes for m in self.matrices if m is not None)

    @property
    def host_bytes(self) -> int:
        """Host bytes of the matrices' pinned copies."""
        return sum(matrix_bytes_of(m) for m in self.host if m is not None)

    @property
    def resident(self) -> tuple[bool, ...]:
        return tuple(m is not None for m in self.matrices)


class DeviceSpmv:
    """Sparse products of compiled circuits on one device (the "synthesis" kernel unit)."""

    def __init__(self, kernels: Any, *, long_row: int = LONG_ROW, long_row_threads: int = LONG_ROW_THREADS) -> None:
        if long_row < 0:
            raise ValueError(f"long_row must be >= 0, got {long_row}")
        if long_row_threads < 1 or long_row_threads & (long_row_threads - 1) or long_row_threads > 1024:
            raise ValueError(f"long_row_threads must be a power of two in [1, 1024], got {long_row_threads}")
        self.k = kernels
        self.xp = kernels.xp
        self.long_row = long_row
        self.long_row_threads = long_row_threads

    # -- uploads --------------------------------------------------------------------------------------

    def _copy(self, host: np.ndarray, copy: Callable[[np.ndarray], Any] | None) -> Any:
        host = np.ascontiguousarray(host)
        return copy(host) if copy is not None else self.k.to_device(host)

    def upload_matrix(self, mat: CompiledMatrix, name: str = "M",
                      copy: Callable[[np.ndarray], Any] | None = None) -> DeviceMatrix:
        """One matrix on the device, with the list of its long rows (found there). `copy` turns a
        host array into a device array (default: the kernel module's `to_device`)."""
        suffix = _kernel_suffix(mat, name)
        row_ptr = mat.row_ptr.view(np.uint64) if mat.row_ptr.dtype == np.int64 else mat.row_ptr
        dev_ptr = self._copy(row_ptr, copy)
        xp = self.xp
        lengths = dev_ptr[1:] - dev_ptr[:-1]
        long_rows = self.k.flatnonzero(lengths > self.long_row).astype(xp.uint32)
        del lengths
        return DeviceMatrix(suffix=suffix, rows=mat.num_rows, row_ptr=dev_ptr, cols=self._copy(mat.cols, copy),
                            coeff_idx=self._copy(mat.coeff_idx, copy), long_rows=long_rows)

    def prepare(self, compiled: CompiledCircuit, resident: bool | Sequence[bool] = True,
                copy: Callable[[np.ndarray], Any] | None = None) -> DeviceCompiled:
        """Upload the coefficient tables and the matrices marked resident (one flag, or one per A, B, C)."""
        flags = [resident] * 3 if isinstance(resident, bool) else list(resident)
        if len(flags) != 3:
            raise ValueError(f"resident needs one flag or three (A, B, C), got {len(flags)}")
        table = np.ascontiguousarray(compiled.coeff_table)
        out = DeviceCompiled(compiled=compiled, table_mont=self.k.to_device(table.view(np.uint32)),
                             table_canonical=self.k.to_device(
                                 np.ascontiguousarray(from_montgomery(table)).view(np.uint32)))
        for name, mat, keep in zip(_MATRIX_NAMES, (compiled.a, compiled.b, compiled.c), flags, strict=True):
            out.matrices.append(self.upload_matrix(mat, name, copy) if keep else None)
        return out

    # -- products -------------------------------------------------------------------------------------

    def multiply(self, mat: DeviceMatrix, prepared: DeviceCompiled, inputs: Any, aux: Any, out: Any) -> None:
        """out = M·w on the current stream (out: (rows, 8) u32, C-contiguous; every row is written)."""
        n_in = int(inputs.shape[0])
        args = (mat.row_ptr, mat.cols, mat.coeff_idx)
        tail = (prepared.table_mont, prepared.table_canonical, inputs, aux, n_in, out)
        self.k.launch1d(f"spmv_rows_{mat.suffix}", mat.rows, (*args, mat.rows, self.long_row, *tail), _BLOCK)
        n_long = int(mat.long_rows.shape[0])
        if n_long:
            self.k.launch(f"spmv_long_rows_{mat.suffix}", n_long, self.long_row_threads,
                          (*args, mat.long_rows, *tail), shared_mem=self.long_row_threads * _FR_WORDS * 4)

    def evaluate(self, prepared: DeviceCompiled, inputs: Any, aux: Any, out: Sequence[Any] | None = None,
                 copy: Callable[[np.ndarray], Any] | None = None,
                 pinned_copy: Callable[[np.ndarray], Any] | None = None) -> list[Any]:
        """[a, b, c] for the witness (inputs, aux: (n, 8) u32 canonical device arrays), into `out`
        (three C-contiguous (constraints, 8) u32 device arrays) or new arrays. Matrices that are not
        resident are uploaded for their product and released after it: from their pinned copy in
        `prepared.host` through `pinned_copy` where both exist, else through `copy`."""
        compiled = prepared.compiled
        xp = self.xp
        for arr, name, n in ((inputs, "inputs", compiled.num_inputs), (aux, "aux", compiled.num_aux)):
            if tuple(arr.shape) != (n, _FR_WORDS) or arr.dtype != xp.uint32:
                raise ValueError(f"{name} must be a ({n}, {_FR_WORDS}) u32 device array for compiled circuit "
                                 f"{compiled.circuit_id!r}, got {arr.dtype} {tuple(arr.shape)}")
        rows = compiled.num_constraints
        if out is None:
            out = [xp.empty((rows, _FR_WORDS), dtype=xp.uint32) for _ in range(3)]
        elif len(out) != 3:
            raise ValueError(f"out needs three arrays (a, b, c), got {len(out)}")
        for name, dst in zip("abc", out, strict=True):
            if tuple(dst.shape) != (rows, _FR_WORDS) or dst.dtype != xp.uint32 or not dst.flags.c_contiguous:
                raise ValueError(f"out {name} must be a C-contiguous ({rows}, {_FR_WORDS}) u32 device array")
        if rows == 0:
            return list(out)
        pinned = prepared.host or [None] * 3
        for name, host, dev, dst, pin in zip(_MATRIX_NAMES, (compiled.a, compiled.b, compiled.c), prepared.matrices,
                                             out, pinned, strict=True):
            if dev is not None:
                mat = dev
            elif pin is not None and pinned_copy is not None:
                mat = self.upload_matrix(pin, name, pinned_copy)
            else:
                mat = self.upload_matrix(host, name, copy)
            self.multiply(mat, prepared, inputs, aux, dst)
            del mat
        return list(out)

    # -- checks ---------------------------------------------------------------------------------------

    def unsatisfied_rows(self, a: Any, b: Any, c: Any) -> np.ndarray:
        """Indices (ascending, on the host) of the rows where a·b != c."""
        rows = int(a.shape[0])
        if not tuple(a.shape) == tuple(b.shape) == tuple(c.shape) == (rows, _FR_WORDS):
            raise ValueError(f"a, b, c must be (rows, {_FR_WORDS}) arrays of one shape, got {tuple(a.shape)}, "
                             f"{tuple(b.shape)}, {tuple(c.shape)}")
        bad = self.xp.zeros(rows, dtype=self.xp.uint8)
        self.k.launch1d("spmv_unsatisfied", rows, (a, b, c, rows, bad), _BLOCK)
        return np.asarray(self.k.to_host(self.k.flatnonzero(bad)), dtype=np.int64)

    def first_noncanonical(self, values: Any) -> int:
        """The index of the first element >= r of an (n, 8) u32 device array, or -1."""
        n = int(values.shape[0])
        if n == 0:
            return -1
        bad = self.xp.zeros(n, dtype=self.xp.uint8)
        self.k.launch1d("fr_noncanonical", n, (values, n, bad), _BLOCK)
        idx = self.k.to_host(self.k.flatnonzero(bad)[:1])
        return int(idx[0]) if idx.size else -1

    def check_witness(self, inputs: Any, aux: Any) -> None:
        """Refuse a witness that is not canonical (ValueError, worded as `Assignment.from_compiled`)."""
        for arr, name in ((inputs, "inputs"), (aux, "aux")):
            if (bad := self.first_noncanonical(arr)) >= 0:
                raise ValueError(f"witness {name}[{bad}] is not a canonical field element")

    def check_rows(self, prepared: DeviceCompiled, a: Any, b: Any, c: Any) -> None:
        """Refuse rows where a·b != c (SynthesisError, worded as `CompiledCircuit.check_satisfied`)."""
        bad_rows = self.unsatisfied_rows(a, b, c)
        if bad_rows.size:
            compiled = prepared.compiled
            listed = ", ".join(str(int(r)) for r in bad_rows[:8])
            raise SynthesisError(f"compiled circuit {compiled.circuit_id!r}: {bad_rows.size} of "
                                 f"{compiled.num_constraints} constraints are not satisfied by the witness (rows "
                                 f"{listed}{', ...' if bad_rows.size > 8 else ''})")
