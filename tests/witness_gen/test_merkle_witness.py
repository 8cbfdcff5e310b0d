"""Batched Merkle-path witnesses equal, path by path, what the por gadget allocates under WitnessCS,
in each of the three ways the circuits allocate a path, and compute the native tree's root."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest

from cuzk.circuits.filecoin.post import FallbackPoStCircuit, FallbackPoStConfig, PoStSector
from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs, limbs_to_ints
from cuzk.gadgets.boolean import IS_KIND, AllocatedBit, Boolean
from cuzk.gadgets.num import AllocatedNum
from cuzk.gadgets.por import (
    NativeTree,
    PathLevel,
    TreeShape,
    alloc_leaf_and_enforce_inclusion,
    alloc_path_values,
    enforce_inclusion,
    por_no_challenge_input,
)
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.synthesis import compile_circuit, synthesize_witness
from cuzk.hashes.poseidon import hash_merkle
from cuzk.hashes.poseidon_constants import merkle_tree_tag, poseidon_constants
from cuzk.r1cs import WitnessCS
from cuzk.witness_gen.merkle import PathLayout, insertion_program, merkle_path_witness, path_arrays, path_aux_count
from cuzk.witness_gen.poseidon import poseidon_witness

# The production shapes (8, 8-8, 8-8-2), the 8-2 / 8-4 / 8-4-2 shapes of rust-fil-proofs' test
# circuits, and pure binary and 4-ary trees, each small enough to build natively in a moment.
SHAPES = [TreeShape(64, 8), TreeShape(64, 8, 8), TreeShape(128, 8, 8, 2), TreeShape(16, 8, 2),
          TreeShape(32, 8, 4), TreeShape(64, 8, 4, 2), TreeShape(8, 2), TreeShape(16, 4)]


def _indices(shape: TreeShape) -> list[int]:
    """Leaf indices that put the node at every position of every level (and leaf 0 and the last)."""
    out = {0, shape.leaves - 1}
    for k in range(max(shape.arities)):
        index, scale = 0, 1
        for level, arity in enumerate(shape.arities):
            index += (k + level) % arity * scale
            scale *= arity
        out.add(index)
    return sorted(out)


def _gadget_aux(shape: TreeShape, layout: PathLayout, tree: NativeTree, index: int,
                path: Sequence[PathLevel]) -> list[int]:
    """The aux one opening allocates under WitnessCS, laid out as the circuits allocate it."""
    cs = WitnessCS()
    cs.alloc_input("ONE", 1)
    leaf_value = tree.levels[0][index]
    root = AllocatedNum.alloc(cs, "root", tree.root)
    if layout is PathLayout.INCLUSION:  # PoRep: the leaf exists already
        leaf = AllocatedNum.alloc(cs, "leaf", leaf_value)
        start = cs.num_aux
        enforce_inclusion(cs, shape, path, leaf, root)
    elif layout is PathLayout.LEAF_FIRST:  # PoSt
        start = cs.num_aux
        alloc_leaf_and_enforce_inclusion(cs, shape, path, leaf_value, root)
    else:  # SnapDeals: leaf and challenge bits exist already
        leaf = AllocatedNum.alloc(cs, "leaf", leaf_value)
        bits = [Boolean(IS_KIND, AllocatedBit.alloc(cs, bool(index >> i & 1))) for i in range(shape.index_bit_count)]
        start = cs.num_aux
        path_values = alloc_path_values(cs, [level.siblings for level in path])
        por_no_challenge_input(cs, shape.hasher, bits, leaf, path_values, root)
    return cs.aux_assignment[start:]


@pytest.mark.parametrize("shape", [*SHAPES, TreeShape.binary_sha256(4)],
                         ids=lambda s: f"{s.hasher}-{s.leaves}-leaves-{s.base_arity}-{s.sub_arity}-{s.top_arity}")
def test_paths_equal_gadget(shape: TreeShape) -> None:
    """Every layout, at every position of every level; the SHA-256 tree (tree_d's, binary) has
    ~45,000 aux per level, so it is kept to two levels."""
    rng = random.Random(shape.leaves * 31 + shape.sub_arity)
    tree = NativeTree(shape, [rng.randrange(R_MODULUS) for _ in range(shape.leaves)])
    indices = _indices(shape)
    paths = [tree.path(i) for i in indices]
    index_array, siblings = path_arrays(shape, paths)
    assert index_array.tolist() == indices
    leaves = ints_to_limbs([tree.levels[0][i] for i in indices])
    for layout in PathLayout:
        witness = merkle_path_witness(shape, layout, leaves, index_array, siblings)
        assert witness.aux.shape == (len(indices), path_aux_count(shape, layout), 4)
        assert limbs_to_ints(witness.roots) == [tree.root] * len(indices)
        for n, (index, path) in enumerate(zip(indices, paths, strict=True)):
            assert limbs_to_ints(witness.aux[n]) == _gadget_aux(shape, layout, tree, index, path), (layout, index)


def test_aux_counts_of_filecoin_shapes() -> None:
    """Per arity-8 level: 3 bits + 7 siblings + 22 insertion aux + 505 hash aux = 537; an arity-2
    level: 1 + 1 + 2 + 311. A binary SHA-256 level: 1 + 1 + 2, the children's 2 x 255 bits, the
    SHA-256 aux of a 512-bit message with two constant bits, and the packed digest."""
    sha_level = path_aux_count(TreeShape.binary_sha256(2), PathLayout.INCLUSION)
    assert path_aux_count(TreeShape.binary_sha256(1 << 30), PathLayout.INCLUSION) == 30 * sha_level  # 32GiB tree_d
    assert path_aux_count(TreeShape(1 << 30, 8, 8), PathLayout.INCLUSION) == 10 * 537  # 32GiB
    assert path_aux_count(TreeShape(1 << 31, 8, 8, 2), PathLayout.LEAF_FIRST) == 1 + 10 * 537 + 315  # 64GiB
    assert path_aux_count(TreeShape(64, 8), PathLayout.SIBLINGS_FIRST) == 2 * 537 - 2 * 3  # 2KiB, bits elsewhere


@pytest.mark.parametrize(("arity", "ops"), [(2, 2), (4, 8), (8, 22), (16, 240)])
def test_insertion_programs(arity: int, ops: int) -> None:
    """The traced network has the gadget's row count and, for every index, places the node there."""
    program = insertion_program(arity)
    assert program.ops.shape == (ops, 4)
    bits = arity.bit_length() - 1
    for index in range(arity):
        slots: list[object] = ["node", *((index >> i) & 1 for i in range(bits)), *(f"s{j}" for j in range(arity - 1))]
        for code, cond, x, y in program.ops.tolist():
            if code == 0:
                slots.append(slots[x] if slots[cond] else slots[y])
            else:
                slots.append(int(bool(slots[x]) and bool(slots[y])) if code == 1 else
                             int(not slots[x] and not slots[y]))
        siblings = [f"s{j}" for j in range(arity - 1)]
        assert [slots[o] for o in program.outputs] == [*siblings[:index], "node", *siblings[index:]]


def test_bad_inputs_are_named() -> None:
    shape = TreeShape(64, 8)
    leaves = np.zeros((2, 4), dtype=np.uint64)
    siblings = np.zeros((2, 14, 4), dtype=np.uint64)
    indices = np.array([0, 5])
    layout = PathLayout.INCLUSION
    with pytest.raises(SynthesisError, match=r"siblings must have shape \(2, 14, 4\)"):
        merkle_path_witness(shape, layout, leaves, indices, siblings[:, :7])
    with pytest.raises(SynthesisError, match="leaf index 64 of path 1"):
        merkle_path_witness(shape, layout, leaves, np.array([0, 64]), siblings)
    bad = siblings.copy()
    bad[1, 9] = np.uint64(2**64 - 1)
    with pytest.raises(SynthesisError, match=r"siblings\[1, 9\] is not a canonical"):
        merkle_path_witness(shape, layout, leaves, indices, bad)
    with pytest.raises(SynthesisError, match="indices must be"):
        merkle_path_witness(shape, layout, leaves, indices[:1], siblings)
    with pytest.raises(SynthesisError, match="path 0: level 0's position has no value"):
        path_arrays(shape, [shape.blank_path()])
    with pytest.raises(SynthesisError, match="power of two"):
        insertion_program(6)


def test_window_post_2kib_partition_aux_from_generators() -> None:
    """A whole WindowPoSt 2KiB partition (2 sectors x 10 challenges, 21,866 rows) without WitnessCS:
    per sector the three commitments, comm_r's Poseidon (arity 2) and the 10 leaf-first openings.
    The assembled aux equals WitnessCS's and satisfies every row of the compiled circuit."""
    config = FallbackPoStConfig.window(2 * 1024)
    rng = random.Random(11)
    sectors, parts = [], []
    for _ in range(config.sector_count):
        tree = NativeTree(config.tree_r, [rng.randrange(R_MODULUS) for _ in range(config.nodes)])
        comm_c = rng.randrange(R_MODULUS)
        challenges = [rng.randrange(config.nodes) for _ in range(config.challenge_count)]
        leaves = [tree.levels[0][c] for c in challenges]
        paths = [tree.path(c) for c in challenges]
        sectors.append(PoStSector(hash_merkle(2, [comm_c, tree.root]), comm_c, tree.root, leaves, paths))

        comm_r_hash = poseidon_witness(ints_to_limbs([comm_c, tree.root]).reshape(1, 2, 4), poseidon_constants(2),
                                       merkle_tree_tag(2))
        openings = merkle_path_witness(config.tree_r, PathLayout.LEAF_FIRST, ints_to_limbs(leaves),
                                       *path_arrays(config.tree_r, paths))
        assert limbs_to_ints(openings.roots) == [tree.root] * len(challenges)
        parts += [ints_to_limbs([tree.root, comm_c, sectors[-1].comm_r]), comm_r_hash.aux[0],
                  openings.aux.reshape(-1, 4)]
    aux = np.concatenate(parts)

    circuit = FallbackPoStCircuit(config, sectors)
    reference = synthesize_witness(circuit)
    assert np.array_equal(aux, ints_to_limbs(reference.aux_assignment))
    compiled = compile_circuit(FallbackPoStCircuit.blank(config), "window-post-2k-test")
    assignment = Assignment.from_compiled(compiled, (ints_to_limbs(reference.input_assignment), aux), check=True)
    assert assignment.num_constraints == 21_866 + len(reference.input_assignment)
