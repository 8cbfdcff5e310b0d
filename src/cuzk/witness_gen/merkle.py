"""Merkle-path witnesses for many openings at once, without a constraint system.

`cuzk.gadgets.por` opens a leaf level by level: log2(arity) index bits (each an aux 0/1), the
arity - 1 siblings, the insertion network placing the current node among them (`insertion.insert`:
2 / 8 / 22 aux for arity 2 / 4 / 8) and the node hash, for tree_c / tree_r_last the MerkleTree-tagged
Poseidon hash of that arity. This module produces exactly the aux values those calls allocate, in
their order, for N independent paths of one tree shape (base, sub and top arities: 8, 8-8, 8-8-2,
...); for Poseidon trees in parallel over paths (numba `prange`), with each level's hash computed by
the Poseidon gadget's own witness kernel.

The circuits allocate a path in three ways (`PathLayout`):

* `INCLUSION`: `enforce_inclusion` (PoRep's openings): the leaf is allocated elsewhere; per level
  the bits, the siblings, the insertion and the hash;
* `LEAF_FIRST`: `alloc_leaf_and_enforce_inclusion` (PoSt): the leaf, then as `INCLUSION`;
* `SIBLINGS_FIRST`: `alloc_path_values` + `por_no_challenge_input` (SnapDeals): every level's
  siblings first, then per level the insertion and the hash; the index bits are allocated by the
  caller (they are the challenge's bits), so none here.

`pack_into_inputs` and the root row allocate no aux, so they add nothing.

The insertion network is not written out again here: `insertion_program` traces `insert` once per
arity on a recording back end and reads each row back as the operation that produced its aux
(pick, and, nor), so the generator follows the gadget's own order by construction.

SHA-256 trees (tree_d, and SnapDeals' path to its apex leaf) are covered too: per level the
bits, siblings and insertion as above, then `node_hash_circuit`'s SHA-256 branch: each child's 255
LE bits (`to_bits_le`), then the aux of `hash_circuit` over their byte-reversed concatenation, from
`cuzk.witness_gen.sha256` (its plan derived from the same message the gadget builds), the last being
the fr32-packed digest. These levels run one batched call per level (numpy and the SHA-256 kernel),
the Poseidon ones as one numba kernel over whole paths.

As in `cuzk.witness_gen.poseidon`, numba's cache of `_path_kernel` does not notice edits to the
gadget's `_witness_kernel`: delete this package's `__pycache__/*.nbi` / `*.nbc` after changing it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numba import njit, prange

from cuzk.errors import SynthesisError
from cuzk.field.constants import FR_BITS, R_MODULUS
from cuzk.field.limbs import check_canonical, ints_to_limbs
from cuzk.gadgets.boolean import IS_KIND, AllocatedBit, Boolean, reverse_bit_numbering
from cuzk.gadgets.insertion import insert
from cuzk.gadgets.num import AllocatedNum
from cuzk.gadgets.por import POSEIDON, SHA256, PathLevel, TreeShape
from cuzk.gadgets.poseidon import _witness_kernel
from cuzk.hashes.poseidon_constants import merkle_tree_tag, poseidon_constants
from cuzk.r1cs.lc import LinearCombination, Term
from cuzk.r1cs.system import Annotation, ConstraintSystem, Value
from cuzk.r1cs.variable import ONE, Variable
from cuzk.witness_gen.bits import spread_bits
from cuzk.witness_gen.poseidon import HashPlan, hash_plan
from cuzk.witness_gen.sha256 import Sha256WitnessPlan
from cuzk.witness_gen.values import required_value, required_values

if TYPE_CHECKING:  # deferred imports this module
    from cuzk.witness_gen.deferred import DeferredWitness

__all__ = [
    "InsertionProgram",
    "MerklePathWitness",
    "PathLayout",
    "insertion_program",
    "merkle_path_witness",
    "path_arrays",
    "path_aux_count",
    "path_inputs",
    "sha256_node_plan",
]

_NEG_ONE = R_MODULUS - 1

# Operation codes of an insertion program (one per aux the network allocates).
OP_PICK = 0  #: slot[x] if slot[cond] else slot[y]  (insertion::pick, "a if condition else b")
OP_AND = 1  #: slot[x] & slot[y] (bits)
OP_NOR = 2  #: !slot[x] & !slot[y] (bits)


class PathLayout(enum.Enum):
    """Which aux a path allocates, and in what order (see the module doc)."""

    INCLUSION = "inclusion"
    LEAF_FIRST = "leaf-first"
    SIBLINGS_FIRST = "siblings-first"


class InsertionProgram(NamedTuple):
    """`insert` for one arity as data. Slots: 0 the current node, 1..k the index bits (LSB first),
    then the arity - 1 siblings, then one per operation, in allocation order."""

    arity: int
    ops: np.ndarray  #: (operations, 4) int64: code, cond, x, y (cond unused by and/nor)
    outputs: np.ndarray  #: (arity,) int64: the slot of each hash input, in order


class MerklePathWitness(NamedTuple):
    """N paths' allocations, in the gadget's order, and the roots they compute."""

    aux: np.ndarray  #: (N, path_aux_count, 4) uint64 canonical limbs (bits as 0 / 1)
    roots: np.ndarray  #: (N, 4) uint64 canonical limbs


class _TraceCS(ConstraintSystem):
    """Numbers aux variables and keeps rows; no values (so gadgets compute none)."""

    needs_values = False

    def __init__(self) -> None:
        super().__init__()
        self.aux_count = 0
        self.rows: list[tuple[int, list[Term], list[Term], list[Term]]] = []

    def alloc(self, annotation: Annotation, value: Value = None) -> Variable:
        self.aux_count += 1
        return Variable.aux(self.aux_count - 1)

    def enforce(self, annotation: Annotation, a: LinearCombination, b: LinearCombination,
                c: LinearCombination) -> None:
        self.rows.append((self.aux_count, a.terms, b.terms, c.terms))


def _aux_slot(var: Variable, row: int) -> int:
    if var.is_input:
        raise RuntimeError(f"insertion row {row} uses an input where an aux variable was expected")
    return var.index


def _decode_row(row: int, result: int, a: list[Term], b: list[Term], c: list[Term]) -> tuple[int, int, int, int]:
    """The operation whose aux is `result`, read from its row (the forms of `num.pick` and
    `AllocatedBit.and_` / `nor`); any other form means the gadget changed, and is refused."""
    result_term = (Variable.aux(result), 1)
    if (len(a) == 2 and len(b) == 1 and len(c) == 2 and a[0][1] == 1 and a[1][1] == _NEG_ONE and b[0][1] == 1
            and c[0] == a[0] and c[1] == (Variable.aux(result), _NEG_ONE)):
        # pick: (y - x) * cond = (y - result)
        return OP_PICK, _aux_slot(b[0][0], row), _aux_slot(a[1][0], row), _aux_slot(a[0][0], row)
    if c == [result_term] and len(a) == 1 and len(b) == 1 and a[0][1] == 1 and b[0][1] == 1:
        return OP_AND, 0, _aux_slot(a[0][0], row), _aux_slot(b[0][0], row)
    if (c == [result_term] and len(a) == 2 and len(b) == 2 and a[0] == (ONE, 1) and b[0] == (ONE, 1)
            and a[1][1] == _NEG_ONE and b[1][1] == _NEG_ONE):
        return OP_NOR, 0, _aux_slot(a[1][0], row), _aux_slot(b[1][0], row)
    raise RuntimeError(f"insertion row {row} has a form the Merkle witness generator does not know")


@cache
def insertion_program(arity: int) -> InsertionProgram:
    """`insertion.insert` for `arity`, traced once: each row it emits after allocating one aux
    becomes the operation computing that aux from earlier slots."""
    bit_count = arity.bit_length() - 1
    if arity < 2 or 1 << bit_count != arity:
        raise SynthesisError(f"a Merkle level's arity must be a power of two >= 2, got {arity}")
    cs = _TraceCS()
    element = AllocatedNum(cs.alloc("element"), None)
    bits = [Boolean(IS_KIND, AllocatedBit(cs.alloc("index bit"), None)) for _ in range(bit_count)]
    siblings = [AllocatedNum(cs.alloc("sibling"), None) for _ in range(arity - 1)]
    first = cs.aux_count
    outputs = insert(cs, element, bits, siblings)
    if len(cs.rows) != cs.aux_count - first:
        raise RuntimeError(f"insert({arity}) allocated {cs.aux_count - first} aux for {len(cs.rows)} rows")
    ops = []
    bit_slots = set(range(1, 1 + bit_count))  # the kernel tests a condition by its lowest limb: 0 / 1 only
    for row, (allocated, a, b, c) in enumerate(cs.rows):
        result = first + row
        if allocated != result + 1:
            raise RuntimeError(f"insertion row {row} does not follow its own allocation")
        op = _decode_row(row, result, a, b, c)
        conditions = op[1:2] if op[0] == OP_PICK else op[2:]
        if not bit_slots.issuperset(conditions):
            raise RuntimeError(f"insertion row {row} branches on a value that is not a bit")
        if op[0] != OP_PICK:
            bit_slots.add(result)
        ops.append(op)
    return InsertionProgram(arity, np.array(ops, dtype=np.int64).reshape(-1, 4),
                            np.array([out.variable.index for out in outputs], dtype=np.int64))


@cache
def sha256_node_plan(arity: int) -> Sha256WitnessPlan:
    """The SHA-256 plan of a SHA-256 tree node over `arity` children: the message `node_hash_circuit`
    builds (each child's 255 allocated LE bits plus one constant-false pad bit, byte-reversed)."""
    cs = _TraceCS()
    message: list[Boolean] = []
    for _ in range(arity):
        message.extend(reverse_bit_numbering(AllocatedNum(cs.alloc("child"), None).to_bits_le(cs)))
    return Sha256WitnessPlan.for_booleans(message)


def _hash_aux(hasher: str, arity: int) -> int:
    """Aux of one node hash: the Poseidon gadget's rows, or the children's bits + `hash_circuit`."""
    if hasher == POSEIDON:
        return hash_plan(poseidon_constants(arity), merkle_tree_tag(arity)).rows
    return arity * FR_BITS + sha256_node_plan(arity).num_aux + 1


def _level_aux(hasher: str, arity: int, layout: PathLayout) -> int:
    """Aux a level allocates between its predecessor's hash and its own digest (inclusive)."""
    bits = 0 if layout is PathLayout.SIBLINGS_FIRST else arity.bit_length() - 1
    siblings = 0 if layout is PathLayout.SIBLINGS_FIRST else arity - 1
    return bits + siblings + len(insertion_program(arity).ops) + _hash_aux(hasher, arity)


def path_aux_count(shape: TreeShape, layout: PathLayout) -> int:
    """How many aux values one opening of `shape` allocates in `layout`."""
    total = sum(_level_aux(shape.hasher, a, layout) for a in shape.arities)
    if layout is PathLayout.LEAF_FIRST:
        total += 1
    elif layout is PathLayout.SIBLINGS_FIRST:
        total += sum(a - 1 for a in shape.arities)
    return total


@njit(cache=True)
def _copy(dst, i, src, j):  # type: ignore[no-untyped-def]
    """dst[i] = src[j] for (., 4) limb arrays."""
    dst[i, 0] = src[j, 0]
    dst[i, 1] = src[j, 1]
    dst[i, 2] = src[j, 2]
    dst[i, 3] = src[j, 3]


@njit(cache=True)
def _hash(kind, start, out, k0, k1, k2):  # type: ignore[no-untyped-def]
    """The gadget's witness of one hash with the constants of level kind 0, 1 or 2 into `out`."""
    if kind == 0:
        _witness_kernel(start, k0[0], k0[1], k0[2], k0[3], k0[4], k0[5], k0[6], out)
    elif kind == 1:
        _witness_kernel(start, k1[0], k1[1], k1[2], k1[3], k1[4], k1[5], k1[6], out)
    else:
        _witness_kernel(start, k2[0], k2[1], k2[2], k2[3], k2[4], k2[5], k2[6], out)


@njit(parallel=True, cache=True)
def _path_kernel(leaves, positions, siblings, level_kind, leaf_first, siblings_first,  # type: ignore[no-untyped-def]
                 kind_arity, kind_bits, kind_rows, kind_ops, kind_op_count, kind_outputs, kind_folded,
                 k0, k1, k2, out, roots):
    """out[n] = the aux of opening n, roots[n] = its computed root (see `merkle_path_witness`)."""
    levels = level_kind.shape[0]
    max_slots = 1 + kind_bits.max() + kind_arity.max() - 1 + kind_op_count.max()
    for n in prange(leaves.shape[0]):
        o = out[n]
        sib = siblings[n]
        row = 0
        if leaf_first:
            _copy(o, 0, leaves, n)
            row = 1
        if siblings_first:
            for j in range(sib.shape[0]):
                _copy(o, row, sib, j)
                row += 1
        slots = np.zeros((max_slots, 4), dtype=np.uint64)
        _copy(slots, 0, leaves, n)
        s = 0
        for lvl in range(levels):
            kind = level_kind[lvl]
            arity, bits, rows = kind_arity[kind], kind_bits[kind], kind_rows[kind]
            pos = positions[n, lvl]
            for j in range(bits):
                slots[1 + j, 0] = np.uint64((pos >> j) & 1)
                slots[1 + j, 1] = 0
                slots[1 + j, 2] = 0
                slots[1 + j, 3] = 0
                if not siblings_first:
                    _copy(o, row, slots, 1 + j)
                    row += 1
            for j in range(arity - 1):
                _copy(slots, 1 + bits + j, sib, s + j)
                if not siblings_first:
                    _copy(o, row, sib, s + j)
                    row += 1
            s += arity - 1
            base = bits + arity
            for q in range(kind_op_count[kind]):
                code, cond, x, y = (kind_ops[kind, q, 0], kind_ops[kind, q, 1], kind_ops[kind, q, 2],
                                    kind_ops[kind, q, 3])
                dst = base + q
                if code == OP_PICK:
                    _copy(slots, dst, slots, x if slots[cond, 0] != 0 else y)
                else:  # OP_AND / OP_NOR on 0 / 1 values
                    bx, by = slots[x, 0] != 0, slots[y, 0] != 0
                    bit = (bx and by) if code == OP_AND else (not bx and not by)
                    slots[dst, 0] = np.uint64(1 if bit else 0)
                    slots[dst, 1] = 0
                    slots[dst, 2] = 0
                    slots[dst, 3] = 0
                _copy(o, row, slots, dst)
                row += 1
            start = np.empty((arity + 1, 4), dtype=np.uint64)
            _copy(start, 0, kind_folded, kind)
            for j in range(arity):
                _copy(start, 1 + j, slots, kind_outputs[kind, j])
            _hash(kind, start, o[row:row + rows], k0, k1, k2)
            row += rows
            _copy(slots, 0, o, row - 1)
        _copy(roots, n, slots, 0)


def _limb_array(name: str, values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if not isinstance(values, np.ndarray) or values.dtype != np.uint64:
        raise SynthesisError(f"{name} must be a uint64 numpy array, got "
                             f"{getattr(values, 'dtype', type(values).__name__)}")
    if values.shape != shape:
        raise SynthesisError(f"{name} must have shape {shape}, got {values.shape}")
    if (bad := check_canonical(values.reshape(-1, 4))) >= 0:
        where = np.unravel_index(bad, shape[:-1])
        raise SynthesisError(f"{name}{list(map(int, where))} is not a canonical field element")
    return np.ascontiguousarray(values)


def path_inputs(shape: TreeShape, leaves: np.ndarray, indices: np.ndarray,
                siblings: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`merkle_path_witness`'s inputs checked and made contiguous: (N, 4) canonical leaves, (N,)
    int64 indices below `shape.leaves`, (N, Σ (arity - 1), 4) canonical siblings; SynthesisError
    naming the first bad value."""
    count = leaves.shape[0] if isinstance(leaves, np.ndarray) and leaves.ndim >= 1 else 0
    leaves = _limb_array("leaves", leaves, (count, 4))
    siblings = _limb_array("siblings", siblings, (count, sum(a - 1 for a in shape.arities), 4))
    indices = np.asarray(indices)
    if indices.shape != (count,) or not np.issubdtype(indices.dtype, np.integer):
        raise SynthesisError(f"indices must be ({count},) integers, got {indices.shape} {indices.dtype}")
    if count and (int(indices.min()) < 0 or int(indices.max()) >= shape.leaves):
        bad = int(np.flatnonzero((indices < 0) | (indices >= shape.leaves))[0])
        raise SynthesisError(f"leaf index {int(indices[bad])} of path {bad} is not in 0..{shape.leaves - 1}")
    return leaves, np.ascontiguousarray(indices, dtype=np.int64), siblings


def merkle_path_witness(shape: TreeShape, layout: PathLayout, leaves: np.ndarray, indices: np.ndarray,
                        siblings: np.ndarray, *, out: np.ndarray | None = None,
                        deferred: DeferredWitness | None = None, rows: np.ndarray | None = None) -> MerklePathWitness:
    """The aux values of N openings of a tree of `shape`, as the por gadget allocates them.

    `leaves`: (N, 4) leaf values; `indices`: (N,) leaf indices (their bits, LSB first, are the
    per-level positions, as the circuits' index bits are); `siblings`: (N, S, 4), each path's
    siblings level by level, leaf level first, in path order (S = Σ (arity - 1)). All values are
    canonical limbs. Returns the aux rows and the computed roots; the root row (computed · ONE =
    root) is not checked here, so compare `roots` with the expected root where that matters. In
    `SIBLINGS_FIRST`, aux[:, :S] are the siblings: a caller that allocated them apart from the path
    (SnapDeals' apex path) takes aux[:, S:].

    `out`, if given, is the (N, path_aux_count, 4) uint64 array (a view into a partition's aux will
    do) to fill and return as aux. With `deferred` (SHA-256 trees), each node hash's SHA-256 aux bits
    are left unwritten and recorded there instead, path n's aux[n, 0] being aux row `rows[n]` of the
    vector the device completes (`cuzk.witness_gen.deferred`).
    """
    arities = shape.arities
    leaves, indices, siblings = path_inputs(shape, leaves, indices, siblings)
    count = leaves.shape[0]

    # Per-level positions: consecutive groups of the index's bits, LSB first.
    positions = np.empty((count, len(arities)), dtype=np.int64)
    rest = indices.astype(np.int64)
    for lvl, arity in enumerate(arities):
        positions[:, lvl] = rest & (arity - 1)
        rest = rest >> (arity.bit_length() - 1)

    aux_shape = (count, path_aux_count(shape, layout), 4)
    if out is None:
        aux = np.empty(aux_shape, dtype=np.uint64)
    elif not isinstance(out, np.ndarray) or out.dtype != np.uint64 or out.shape != aux_shape:
        raise ValueError(f"out must be a {aux_shape} uint64 array, got {getattr(out, 'dtype', type(out).__name__)} "
                         f"{getattr(out, 'shape', '')}")
    else:
        aux = out
    if deferred is not None:
        if shape.hasher != SHA256:
            raise ValueError(f"only SHA-256 paths defer their hashes' aux, not {shape.hasher} ones")
        rows = np.asarray(rows, dtype=np.int64) if rows is not None else None
        if rows is None or rows.shape != (count,):
            raise ValueError(f"deferred SHA-256 aux need one aux row per path ({count}), got "
                             f"{None if rows is None else rows.shape}")
    if shape.hasher == SHA256:
        return MerklePathWitness(aux, _sha256_paths(arities, layout, leaves, positions, siblings, aux,
                                                    deferred, rows))
    roots = np.empty((count, 4), dtype=np.uint64)
    if count:
        _poseidon_paths(arities, layout, leaves, positions, siblings, aux, roots)
    return MerklePathWitness(aux, roots)


def _poseidon_paths(arities: tuple[int, ...], layout: PathLayout, leaves: np.ndarray, positions: np.ndarray,
                    siblings: np.ndarray, aux: np.ndarray, roots: np.ndarray) -> None:
    """Fill `aux` and `roots` with one numba kernel over whole paths."""
    kinds = sorted(set(arities), key=arities.index)  # base, then sub, then top: at most three
    plans: list[HashPlan] = [hash_plan(poseidon_constants(a), merkle_tree_tag(a)) for a in kinds]
    programs = [insertion_program(a) for a in kinds]
    max_ops, max_arity = max(len(p.ops) for p in programs), max(kinds)
    kind_ops = np.zeros((len(kinds), max_ops, 4), dtype=np.int64)
    kind_outputs = np.zeros((len(kinds), max_arity), dtype=np.int64)
    for k, program in enumerate(programs):
        kind_ops[k, :len(program.ops)] = program.ops
        kind_outputs[k, :program.arity] = program.outputs
    kernels = [plan.kernel for plan in plans]
    kernels += [kernels[0]] * (3 - len(kernels))  # unused slots: any valid constants
    _path_kernel(leaves, positions, siblings, np.array([kinds.index(a) for a in arities], dtype=np.int64),
                 layout is PathLayout.LEAF_FIRST, layout is PathLayout.SIBLINGS_FIRST,
                 np.array(kinds, dtype=np.int64), np.array([a.bit_length() - 1 for a in kinds], dtype=np.int64),
                 np.array([p.rows for p in plans], dtype=np.int64), kind_ops,
                 np.array([len(p.ops) for p in programs], dtype=np.int64), kind_outputs,
                 np.stack([p.folded for p in plans]), *kernels, aux, roots)


def _run_insertion(program: InsertionProgram, slots: np.ndarray, base: int) -> None:
    """`program` on (N, slots, 4) values in place, all paths at once: op q writes slot base + q."""
    for q, (code, cond, x, y) in enumerate(program.ops.tolist()):
        if code == OP_PICK:
            slots[:, base + q] = np.where((slots[:, cond, 0] != 0)[:, None], slots[:, x], slots[:, y])
        else:
            bx, by = slots[:, x, 0], slots[:, y, 0]
            slots[:, base + q] = 0
            slots[:, base + q, 0] = bx & by if code == OP_AND else (bx | by) ^ 1


def _sha256_paths(arities: tuple[int, ...], layout: PathLayout, leaves: np.ndarray, positions: np.ndarray,
                  siblings: np.ndarray, aux: np.ndarray, deferred: DeferredWitness | None,
                  rows: np.ndarray | None) -> np.ndarray:
    """Fill `aux` level by level, each level one batched step over all paths; returns the roots."""
    count = leaves.shape[0]
    row = 0
    if layout is PathLayout.LEAF_FIRST:
        aux[:, 0] = leaves
        row = 1
    elif layout is PathLayout.SIBLINGS_FIRST:
        aux[:, :siblings.shape[1]] = siblings
        row = siblings.shape[1]
    current = leaves
    offset = 0
    for lvl, arity in enumerate(arities):
        program, bit_count = insertion_program(arity), arity.bit_length() - 1
        base = bit_count + arity  # slots: node, bits, siblings, then the operations
        slots = np.zeros((count, base + len(program.ops), 4), dtype=np.uint64)
        slots[:, 0] = current
        for j in range(bit_count):
            slots[:, 1 + j, 0] = (positions[:, lvl] >> j) & 1
        slots[:, 1 + bit_count:base] = siblings[:, offset:offset + arity - 1]
        offset += arity - 1
        if layout is not PathLayout.SIBLINGS_FIRST:
            aux[:, row:row + base - 1] = slots[:, 1:base]
            row += base - 1
        _run_insertion(program, slots, base)
        aux[:, row:row + len(program.ops)] = slots[:, base:]
        row += len(program.ops)

        # node_hash_circuit: each child's 255 LE bits, then hash_circuit over the children's 32-byte
        # LE encodings in stream order (bytes in order, MSB first: the byte-reversed LE bits).
        children = np.ascontiguousarray(slots[:, program.outputs]).astype("<u8", copy=False)
        child_bytes = children.view(np.uint8).reshape(count, arity, 32)
        le_bits = np.unpackbits(child_bytes, axis=2, bitorder="little")[:, :, :FR_BITS]
        spread_bits(le_bits.reshape(count, arity * FR_BITS), aux, row)
        row += arity * FR_BITS
        plan = sha256_node_plan(arity)
        message = np.unpackbits(child_bytes, axis=2).reshape(count, arity * 256)
        if deferred is None:
            witness = plan.generate_hash_circuit(message)
            spread_bits(witness.aux, aux, row)
            packed = witness.packed
        else:
            assert rows is not None
            packed = deferred.hash_circuit(plan, message, rows + row)
        row += plan.num_aux
        aux[:, row] = packed
        row += 1
        current = packed
    assert row == aux.shape[1]
    return np.ascontiguousarray(current)


def path_arrays(shape: TreeShape, paths: Sequence[Sequence[PathLevel]],
                name: Callable[[int], str] = "path {}".format) -> tuple[np.ndarray, np.ndarray]:
    """(indices, (N, Σ (arity - 1), 4) siblings) for `merkle_path_witness` from `PathLevel` lists
    (e.g. `NativeTree.path`, or a circuit's openings): the leaf index from the per-level positions
    (the circuit's index bits), the siblings level by level, reduced mod r as `AllocatedNum.alloc`
    reduces them. `name(n)` names path n in errors: a layout `shape` does not allow, or a missing
    or non-integer position or sibling (SynthesisError, e.g. "path 3: level 1 sibling 6 has no
    value ...")."""
    fast = _path_arrays_flat(shape, paths)
    if fast is not None:
        return fast
    # Something is wrong: walk path by path to name it (or to take what the flat pass could not).
    indices = np.empty(len(paths), dtype=np.int64)
    flat: list[int] = []
    for n, path in enumerate(paths):
        what = name(n)
        try:
            shape.check_path(path, what)
        except ValueError as exc:
            raise SynthesisError(str(exc)) from exc
        index, scale = 0, 1
        for depth, (arity, level) in enumerate(zip(shape.arities, path, strict=True)):
            at = f"{what}: level {depth}"
            index += required_value(level.index, f"{at}'s position") * scale
            scale *= arity
            flat.extend(required_values(level.siblings, lambda j, at=at: f"{at} sibling {j}"))
        indices[n] = index
    return indices, ints_to_limbs(flat).reshape(len(paths), sum(a - 1 for a in shape.arities), 4)


def _path_arrays_flat(shape: TreeShape, paths: Sequence[Sequence[PathLevel]]) -> tuple[np.ndarray, np.ndarray] | None:
    """`path_arrays` for well-formed paths in a few flat passes (a WindowPoSt-32GiB partition's
    23,490 paths: ~4x faster than walking them level by level); None if anything is off, for the
    level-by-level walk to name it."""
    arities = shape.arities
    count, levels = len(paths), len(arities)
    try:
        if any(len(path) != levels for path in paths):
            return None
        steps = [level for path in paths for level in path]
        counts = np.fromiter((len(level.siblings) for level in steps), dtype=np.int64, count=len(steps))
        positions = np.array([level.index for level in steps])
        # Canonical siblings go straight in; one to reduce mod r (or a missing one) takes the walk.
        siblings = ints_to_limbs([v for level in steps for v in level.siblings])
    except (TypeError, ValueError, AttributeError):  # missing, non-canonical or non-integer; not a PathLevel
        return None
    want = np.array(arities, dtype=np.int64)
    if not np.issubdtype(positions.dtype, np.integer) or positions.shape != (count * levels,):
        return None
    positions = positions.astype(np.int64).reshape(count, levels)
    if (counts.reshape(count, levels) != want - 1).any() or (positions < 0).any() or (positions >= want).any():
        return None
    scales = np.cumprod(np.concatenate([[1], want[:-1]]))
    indices = positions @ scales
    return indices, siblings.reshape(count, int((want - 1).sum()), 4)
