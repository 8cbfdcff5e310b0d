"""Compiling a circuit made of identical blocks without recording all of it.

Recording costs Python work and memory per constraint, far too much for a 130M-row partition. But
the big Filecoin partitions are a header followed by N identical blocks (one per challenge or
sector), then bellperson's input rows (one per input, `groth16.synthesis._run`). Block k's rows are
block 0's rows with block 0's own input columns moved by k·block_inputs, its own aux columns by
k·block_aux, and columns that point into the header unchanged.

So two small recordings suffice: the circuit with one block and with two. `compile_blocks` reads
the header and block sizes off their counts, checks that they really have that structure (the
one-block rows are the two-block rows' header and block 0; block 1 is block 0 shifted; no row
reaches forward into a later block) and refuses them otherwise (`BlockStructureError`), then writes
the N-block compiled circuit's arrays directly with numpy: one block-sized template of columns,
coefficient indices and per-entry shifts, stamped N times. The result is the very `CompiledCircuit`
`compile_matrices` makes from a full recording (same arrays, same fingerprint).

Some circuits hand each block its own header variables: a SnapDeals challenge's random bits are
bits of digests computed in the header, challenge k taking the k-th slice of them, which no fixed
shift describes. For those the circuit side lists, per block, the header aux variables that block
uses in place of block 0's (`per_block_header_aux`); block 0's entries on those variables are
stamped with block k's, and the two-block recording must agree for block 1.

When the one-block version costs as much as the two-block one to record (a big header: SnapDeals'
apex tree), the circuit side can instead note where the two-block circuit's first block ends and
cut the one-block recording out of it (`first_block_of`); the checks below then rest on the block
1 comparison alone.

Nothing here knows a circuit: a circuit made of identical blocks says how to build its one- and
two-block versions (`BlockVersions`) through a `block_versions()` method, which `block_versions`
reads (the Filecoin circuits have one: `cuzk.circuits.filecoin`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cuzk.errors import CuzkError
from cuzk.field.fr_vec import to_montgomery
from cuzk.r1cs.compiled import _MAX_U32, CompiledCircuit, CompiledMatrix, _pack
from cuzk.r1cs.recording import CsrMatrix, R1csMatrices

if TYPE_CHECKING:
    from cuzk.r1cs.system import Circuit

__all__ = ["BlockLayout", "BlockStructureError", "BlockVersions", "block_layout", "block_versions", "compile_blocks",
           "first_block_of"]


class BlockStructureError(CuzkError):
    """The one- and two-block recordings are not a header followed by identical shifted blocks."""


@dataclass(frozen=True)
class BlockVersions:
    """The blank one- and two-block circuits of a circuit made of `blocks` identical blocks.

    `one` is None where the one-block recording is cut out of the two-block one: `first_block`
    does that, once `two` has been recorded. `per_block_header_aux`, for blocks that each use their
    own header variables (SnapDeals), gives the table `compile_blocks` takes, also once `two` has
    been recorded."""

    one: Circuit | None
    two: Circuit
    blocks: int
    what: str  #: what a block is ("challenge", "sector"), for messages
    per_block_header_aux: Callable[[], np.ndarray] | None = None
    first_block: Callable[[R1csMatrices], R1csMatrices] | None = None

    def __post_init__(self) -> None:
        if (self.one is None) == (self.first_block is None):
            raise ValueError("block versions need either a one-block circuit or a way to cut it from two blocks")


def block_versions(circuit: object) -> BlockVersions | None:
    """The small blank versions of `circuit`, from its `block_versions()` method (a partition
    instance, which holds its circuit as `.circuit`, is unwrapped), or None when it has no such
    method or is not a circuit made of identical blocks. Values never matter: the R1CS depends only
    on the config."""
    inner = getattr(circuit, "circuit", circuit)  # compound.PartitionInstance wraps the circuit
    versions = getattr(inner, "block_versions", None)
    return versions() if versions is not None else None


@dataclass(frozen=True)
class BlockLayout:
    """Sizes of the header and of one block (rows exclude bellperson's trailing input rows)."""

    header_rows: int
    header_inputs: int  #: ONE included
    header_aux: int
    block_rows: int
    block_inputs: int
    block_aux: int

    def num_inputs(self, blocks: int) -> int:
        return self.header_inputs + blocks * self.block_inputs

    def num_aux(self, blocks: int) -> int:
        return self.header_aux + blocks * self.block_aux

    def num_constraints(self, blocks: int) -> int:
        """Rows of the N-block circuit, its input rows included."""
        return self.header_rows + blocks * self.block_rows + self.num_inputs(blocks)


def block_layout(one: R1csMatrices, two: R1csMatrices) -> BlockLayout:
    """Header and block sizes from the counts of the one- and two-block recordings."""
    rows1, rows2 = one.num_constraints - one.num_inputs, two.num_constraints - two.num_inputs
    layout = BlockLayout(header_rows=2 * rows1 - rows2, header_inputs=2 * one.num_inputs - two.num_inputs,
                         header_aux=2 * one.num_aux - two.num_aux, block_rows=rows2 - rows1,
                         block_inputs=two.num_inputs - one.num_inputs, block_aux=two.num_aux - one.num_aux)
    if min(layout.header_rows, layout.header_inputs, layout.header_aux, layout.block_inputs, layout.block_aux) < 0 \
            or layout.block_rows <= 0 or layout.header_inputs < 1:
        raise BlockStructureError(
            f"the one-block circuit ({one.num_constraints} rows, {one.num_inputs} inputs, {one.num_aux} aux) and the "
            f"two-block circuit ({two.num_constraints} rows, {two.num_inputs} inputs, {two.num_aux} aux) do not "
            "differ by one block of rows and variables")
    return layout


def first_block_of(two: R1csMatrices, rows: int, inputs: int, aux: int) -> R1csMatrices:
    """The one-block recording cut out of the two-block one: its first `rows` rows (header and block
    0; `two`'s input rows aside), the variables below `inputs` (ONE included) and `aux`, then
    bellperson's input rows for those inputs, as `record_circuit` of the one-block circuit gives.
    The counts are the constraint system's after block 0 (the circuit side notes them);
    BlockStructureError when they do not fit `two` or a row before them uses a later variable."""
    body = two.num_constraints - two.num_inputs
    if not (0 < rows <= body and 1 <= inputs <= two.num_inputs and 0 <= aux <= two.num_aux):
        raise BlockStructureError(f"a first block ending at {rows} rows, {inputs} inputs and {aux} aux does not fit "
                                  f"a circuit of {body} rows, {two.num_inputs} inputs and {two.num_aux} aux")
    mats = []
    for name, m in (("A", two.a), ("B", two.b), ("C", two.c)):
        end = int(m.row_ptr[rows])
        cols = m.cols[:end]
        is_aux = cols >= two.num_inputs
        if np.any(np.where(is_aux, cols - two.num_inputs >= aux, cols >= inputs)):
            raise BlockStructureError(f"matrix {name}: a row of the header or the first block uses a variable "
                                      "allocated after the first block")
        # Without block inputs the aux columns keep their numbers: B and C stay views into `two`.
        cut_cols = cols if inputs == two.num_inputs else np.where(is_aux, cols - (two.num_inputs - inputs), cols)
        del is_aux
        coeff_idx = m.coeff_idx[:end]
        row_ptr = m.row_ptr[:rows + 1]
        if name == "A":  # bellperson's input rows: input i with coefficient 1 (slot 0 of the table)
            cut_cols = np.concatenate([cut_cols, np.arange(inputs, dtype=cut_cols.dtype)])
            coeff_idx = np.concatenate([coeff_idx, np.zeros(inputs, dtype=coeff_idx.dtype)])
            row_ptr = np.concatenate([row_ptr, end + np.arange(1, inputs + 1, dtype=row_ptr.dtype)])
        else:
            row_ptr = np.concatenate([row_ptr, np.full(inputs, end, dtype=row_ptr.dtype)])
        mats.append(CsrMatrix(row_ptr=row_ptr, cols=cut_cols, coeff_idx=coeff_idx, coeff_table=m.coeff_table,
                              num_cols=inputs + aux))
    return R1csMatrices(num_inputs=inputs, num_aux=aux, a=mats[0], b=mats[1], c=mats[2])


def compile_blocks(one: R1csMatrices, two: R1csMatrices, blocks: int, circuit_id: str, *,
                   code_digest: str = "", per_block_header_aux: np.ndarray | None = None) -> CompiledCircuit:
    """The compiled `blocks`-block circuit from recordings of its one- and two-block versions
    (`record_circuit` output, input rows included); BlockStructureError when they do not have the
    header + identical blocks structure of the module docstring.

    `per_block_header_aux`, for circuits whose blocks each use their own header variables: an
    integer array of at least max(blocks, 2) rows, row k the header aux indices block k uses where
    block 0 uses row 0's (same order)."""
    if blocks < 1:
        raise CuzkError(f"{circuit_id}: a block circuit needs at least one block, got {blocks}")
    layout = block_layout(one, two)
    moving = None if per_block_header_aux is None else _per_block_header_aux(per_block_header_aux, blocks, layout,
                                                                           circuit_id)
    n_in, n_aux = layout.num_inputs(blocks), layout.num_aux(blocks)
    if n_in + n_aux > _MAX_U32:
        raise CuzkError(f"{circuit_id}: {n_in + n_aux} variables do not fit the uint32 columns of a compiled circuit")
    if not np.array_equal(one.coeff_table, two.coeff_table):
        raise BlockStructureError(f"{circuit_id}: the one- and two-block circuits use different coefficients")
    table = two.coeff_table
    idx_dtype = np.uint16 if table.shape[0] <= 1 << 16 else np.uint32
    mats = []
    templates = []
    for name, m1, m2 in (("A", one.a, two.a), ("B", one.b, two.b), ("C", one.c, two.c)):
        template = _Template.derive(name, m1, m2, layout, one.num_inputs, two.num_inputs, moving)
        templates.append(template)
        mats.append(template.assemble(blocks, n_in, idx_dtype, input_rows=name == "A"))
    a_tpl, b_tpl = templates[0], templates[1]
    compiled = CompiledCircuit(
        circuit_id=circuit_id, num_inputs=n_in, num_aux=n_aux, num_constraints=layout.num_constraints(blocks),
        a=mats[0], b=mats[1], c=mats[2], coeff_table=to_montgomery(table),
        a_aux_density_bits=_pack(a_tpl.aux_density(blocks)), b_input_density_bits=_pack(b_tpl.input_density(blocks)),
        b_aux_density_bits=_pack(b_tpl.aux_density(blocks)),
        # bellperson's input rows put every input into A.
        a_input_density=n_in, code_digest=code_digest)
    compiled.check()
    return compiled.with_fingerprint()


def _per_block_header_aux(table: np.ndarray, blocks: int, layout: BlockLayout, circuit_id: str) -> np.ndarray:
    """`compile_blocks`' per_block_header_aux, checked: int64 (rows, m), header aux indices, row 0 distinct."""
    arr = np.asarray(table)
    rows_needed = max(blocks, 2)
    if arr.ndim != 2 or arr.shape[0] < rows_needed or arr.shape[1] == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise CuzkError(f"{circuit_id}: per-block header variables must be a non-empty integer table of at least "
                        f"{rows_needed} rows (one per block), got shape {arr.shape} of {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.min() < 0 or arr.max() >= layout.header_aux:
        raise BlockStructureError(f"{circuit_id}: per-block header variables must be header aux variables "
                                  f"(0..{layout.header_aux - 1}), got {arr.min()}..{arr.max()}")
    if np.unique(arr[0]).size != arr.shape[1]:
        raise BlockStructureError(f"{circuit_id}: block 0's per-block header variables repeat")
    return arr


@dataclass(frozen=True)
class _Template:
    """One matrix as header + block 0, in variable terms independent of the block count.

    Variables are coded as (kind, index): inputs by input index, aux by aux index, and each block
    entry carries its shift kind (0 header, 1 block input, 2 block aux, 3 the block's own header
    aux: column `block_slot` of the per-block header table).
    """

    layout: BlockLayout
    header_ptr: np.ndarray  #: int64, header_rows + 1
    header_is_aux: np.ndarray  #: bool per header entry
    header_index: np.ndarray  #: int64 input or aux index per header entry
    header_coeff: np.ndarray
    block_ptr: np.ndarray  #: int64, block_rows + 1, relative to the block's first entry
    block_is_aux: np.ndarray
    block_index: np.ndarray  #: block 0's index
    block_shift: np.ndarray  #: int8: 0 header variable, 1 block input, 2 block aux, 3 per-block header aux
    block_coeff: np.ndarray
    block_slot: np.ndarray  #: int64 per block entry: its column of `moving`, -1 unless shift 3
    moving: np.ndarray | None  #: the per-block header aux table (`compile_blocks`), None without one

    @classmethod
    def derive(cls, name: str, m1: CsrMatrix, m2: CsrMatrix, layout: BlockLayout, in1: int,
               in2: int, moving: np.ndarray | None) -> _Template:
        hr, br = layout.header_rows, layout.block_rows
        ptr2 = m2.row_ptr
        # The one-block rows (input rows aside) must be the two-block header and block 0.
        end1 = int(m1.row_ptr[hr + br])
        if int(ptr2[hr + br]) != end1 or not np.array_equal(m1.row_ptr[:hr + br + 1], ptr2[:hr + br + 1]):
            raise BlockStructureError(f"matrix {name}: the one-block circuit's rows are not the two-block circuit's "
                                      "header and first block")
        aux1, idx1 = _split(m1.cols[:end1], in1)
        aux2, idx2 = _split(m2.cols[:end1], in2)
        if not (np.array_equal(aux1, aux2) and np.array_equal(idx1, idx2)
                and np.array_equal(m1.coeff_idx[:end1], m2.coeff_idx[:end1])):
            raise BlockStructureError(f"matrix {name}: the one-block circuit's rows use other variables or "
                                      "coefficients than the two-block circuit's header and first block")
        h_end, b_end = int(ptr2[hr]), end1
        h_aux, h_idx = aux2[:h_end], idx2[:h_end]
        if np.any(h_idx >= np.where(h_aux, layout.header_aux, layout.header_inputs)):
            raise BlockStructureError(f"matrix {name}: a header row uses a variable allocated in a block")
        b_aux, b_idx = aux2[h_end:b_end], idx2[h_end:b_end]
        h_limit = np.where(b_aux, layout.header_aux, layout.header_inputs)
        own_end = h_limit + np.where(b_aux, layout.block_aux, layout.block_inputs)
        if np.any(b_idx >= own_end):
            raise BlockStructureError(f"matrix {name}: a row of the first block uses a variable of a later block")
        shift = np.where(b_idx < h_limit, 0, np.where(b_aux, 2, 1)).astype(np.int8)
        slot = np.full(b_idx.size, -1, dtype=np.int64)
        if moving is not None:
            slot_of_aux = np.full(layout.header_aux, -1, dtype=np.int64)
            slot_of_aux[moving[0]] = np.arange(moving.shape[1])
            in_header = b_aux & (shift == 0)
            slot[in_header] = slot_of_aux[b_idx[in_header]]
            shift[slot >= 0] = 3
        # Block 1 must be block 0 with its own variables moved by one block (and its own header aux swapped in).
        b1_start, b1_end = int(ptr2[hr + br]), int(ptr2[hr + 2 * br])
        rel0 = ptr2[hr:hr + br + 1] - ptr2[hr]
        rel1 = ptr2[hr + br:hr + 2 * br + 1] - ptr2[hr + br]
        aux_1, idx_1 = _split(m2.cols[b1_start:b1_end], in2)
        step = np.where(shift == 2, layout.block_aux, np.where(shift == 1, layout.block_inputs, 0))
        expected = b_idx + step
        if moving is not None:
            expected[slot >= 0] = moving[1][slot[slot >= 0]]
        if not (np.array_equal(rel0, rel1) and np.array_equal(aux_1, b_aux)
                and np.array_equal(idx_1, expected)
                and np.array_equal(m2.coeff_idx[b1_start:b1_end], m2.coeff_idx[h_end:b_end])):
            raise BlockStructureError(f"matrix {name}: the second block is not the first block with its own "
                                      "variables shifted (the circuit is not made of identical blocks)")
        return cls(layout, ptr2[:hr + 1].astype(np.int64), h_aux, h_idx, m2.coeff_idx[:h_end], rel0.astype(np.int64),
                   b_aux, b_idx, shift, m2.coeff_idx[h_end:b_end], slot, moving)

    def assemble(self, blocks: int, n_in: int, idx_dtype: type, *, input_rows: bool) -> CompiledMatrix:
        """The N-block matrix; A gets bellperson's input rows (input i, coefficient 1), B and C empty ones."""
        lay = self.layout
        h_nnz, b_nnz = self.header_index.size, self.block_index.size
        tail_nnz = n_in if input_rows else 0
        nnz = h_nnz + blocks * b_nnz + tail_nnz
        ptr_dtype = np.uint32 if nnz <= _MAX_U32 else np.int64
        rows = lay.header_rows + blocks * lay.block_rows + n_in
        row_ptr = np.empty(rows + 1, dtype=ptr_dtype)
        cols = np.empty(nnz, dtype=np.uint32)
        coeff_idx = np.empty(nnz, dtype=idx_dtype)

        # Columns in the N-block order: inputs first, then aux after all n_in inputs.
        cols[:h_nnz] = self.header_index + np.where(self.header_is_aux, n_in, 0)
        coeff_idx[:h_nnz] = self.header_coeff
        row_ptr[:lay.header_rows + 1] = self.header_ptr
        base = (self.block_index + np.where(self.block_is_aux, n_in, 0)).astype(np.uint32)
        step = np.where(self.block_shift == 2, lay.block_aux,
                        np.where(self.block_shift == 1, lay.block_inputs, 0)).astype(np.uint32)
        block_coeff = self.block_coeff.astype(idx_dtype)
        rel_ptr = self.block_ptr[1:]
        moved = np.flatnonzero(self.block_slot >= 0)
        moved_cols = None if self.moving is None else (self.moving[:, self.block_slot[moved]] + n_in).astype(np.uint32)
        for k in range(blocks):
            start = h_nnz + k * b_nnz
            out = cols[start:start + b_nnz]
            np.multiply(step, np.uint32(k), out=out)
            out += base
            if moved_cols is not None:
                out[moved] = moved_cols[k]
            coeff_idx[start:start + b_nnz] = block_coeff
            r0 = lay.header_rows + k * lay.block_rows
            row_ptr[r0 + 1:r0 + lay.block_rows + 1] = rel_ptr + start
        r0 = lay.header_rows + blocks * lay.block_rows
        body = h_nnz + blocks * b_nnz
        if input_rows:
            cols[body:] = np.arange(n_in, dtype=np.uint32)
            coeff_idx[body:] = 0  # slot 0 of the table is 1
            row_ptr[r0 + 1:] = np.arange(body + 1, body + n_in + 1, dtype=np.int64)
        else:
            row_ptr[r0 + 1:] = body
        return CompiledMatrix(row_ptr=row_ptr, cols=cols, coeff_idx=coeff_idx)

    def aux_density(self, blocks: int) -> np.ndarray:
        """Aux variables with an entry here: the header's from any row, each block's own tiled."""
        lay = self.layout
        header = np.zeros(lay.header_aux, dtype=bool)
        header[self.header_index[self.header_is_aux]] = True
        header[self.block_index[self.block_is_aux & (self.block_shift == 0)]] = True
        if self.moving is not None:
            header[self.moving[:blocks, self.block_slot[self.block_slot >= 0]]] = True
        block = np.zeros(lay.block_aux, dtype=bool)
        block[self.block_index[self.block_shift == 2] - lay.header_aux] = True
        return np.concatenate([header, np.tile(block, blocks)])

    def input_density(self, blocks: int) -> np.ndarray:
        """Inputs with an entry here (input rows aside, which only A has)."""
        lay = self.layout
        header = np.zeros(lay.header_inputs, dtype=bool)
        header[self.header_index[~self.header_is_aux]] = True
        header[self.block_index[~self.block_is_aux & (self.block_shift == 0)]] = True
        block = np.zeros(lay.block_inputs, dtype=bool)
        block[self.block_index[self.block_shift == 1] - lay.header_inputs] = True
        return np.concatenate([header, np.tile(block, blocks)])


def _split(cols: np.ndarray, num_inputs: int) -> tuple[np.ndarray, np.ndarray]:
    """Combined columns -> (is_aux, input or aux index)."""
    is_aux = cols >= num_inputs
    return is_aux, np.where(is_aux, cols - num_inputs, cols).astype(np.int64)
