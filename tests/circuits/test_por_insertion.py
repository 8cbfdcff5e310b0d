"""Insertion / select gadgets and the PoR (Merkle inclusion) gadget: values, satisfiability and the
row counts stated in rust-fil-proofs (docs/circuits.md §6, §13)."""

from __future__ import annotations

import random

import pytest

from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.gadgets.boolean import IS_KIND, NOT_KIND, AllocatedBit, Boolean
from cuzk.gadgets.insertion import insert, select
from cuzk.gadgets.num import AllocatedNum
from cuzk.gadgets.por import (
    POSEIDON,
    SHA256,
    NativeTree,
    PathLevel,
    PoRCircuit,
    TreeShape,
    alloc_leaf_and_enforce_inclusion,
    alloc_path_values,
    ascend,
    enforce_inclusion,
    native_node_hash,
    por_no_challenge_input,
    por_public_inputs,
)
from cuzk.groth16.synthesis import circuit_shape, synthesize_for_proving
from cuzk.r1cs import ConstraintSystem, ProvingAssignment, ShapeCS


def _proving_cs() -> ProvingAssignment:
    cs = ProvingAssignment(check=True)
    cs.alloc_input("ONE", 1)
    return cs


def _shape_cs() -> ShapeCS:
    cs = ShapeCS()
    cs.alloc_input("ONE", 1)
    return cs


def _alloc_bits(cs: ConstraintSystem, index: int, count: int) -> list[Boolean]:
    return [Boolean(IS_KIND, AllocatedBit.alloc(cs, bool(index >> i & 1))) for i in range(count)]


# -- insertion and select ---------------------------------------------------------------------

@pytest.mark.parametrize(("arity", "rows"), [(2, 2), (4, 8), (8, 22), (16, 16 * 15)])
def test_insert_places_element_at_every_index(arity: int, rows: int) -> None:
    rng = random.Random(arity)
    for index in range(arity):
        cs = _proving_cs()
        element_value = rng.randrange(R_MODULUS)
        sibling_values = [rng.randrange(R_MODULUS) for _ in range(arity - 1)]
        element = AllocatedNum.alloc(cs, "element", element_value)
        siblings = [AllocatedNum.alloc(cs, "sibling", v) for v in sibling_values]
        bits = _alloc_bits(cs, index, arity.bit_length() - 1)
        before = cs.num_constraints
        out = insert(cs, element, bits, siblings)
        assert cs.num_constraints - before == rows
        expected = [*sibling_values[:index], element_value, *sibling_values[index:]]
        assert [o.value for o in out] == expected


def test_insert_rejects_wrong_sizes_and_negated_bits() -> None:
    cs = _proving_cs()
    element = AllocatedNum.alloc(cs, "element", 1)
    siblings = [AllocatedNum.alloc(cs, "sibling", i) for i in range(7)]
    bits = _alloc_bits(cs, 3, 3)
    with pytest.raises(ValueError, match="index bits"):
        insert(cs, element, bits[:2], siblings)
    negated = [Boolean(NOT_KIND, bits[0].bit), bits[1], bits[2]]
    with pytest.raises(ValueError, match="non-negated"):
        insert(cs, element, negated, siblings)


@pytest.mark.parametrize("log_size", [1, 2, 3, 4])
def test_select_every_index(log_size: int) -> None:
    size = 1 << log_size
    rng = random.Random(log_size)
    for index in range(size):
        cs = _proving_cs()
        values = [rng.randrange(R_MODULUS) for _ in range(size)]
        choices = [AllocatedNum.alloc(cs, "choice", v) for v in values]
        bits = _alloc_bits(cs, index, log_size)
        before = cs.num_constraints
        assert select(cs, choices, bits).value == values[index]
        assert cs.num_constraints - before == size - 1


# -- per-level costs (docs/circuits.md §6) ----------------------------------------------------

@pytest.mark.parametrize(("arity", "hasher", "rows"), [
    (8, POSEIDON, 530), (4, POSEIDON, 387), (2, POSEIDON, 314), (2, SHA256, 45_382),
])
def test_por_level_cost(arity: int, hasher: str, rows: int) -> None:
    shape = TreeShape(arity, arity, hasher=hasher)  # type: ignore[arg-type]
    cs = _shape_cs()
    leaf = AllocatedNum.alloc(cs, "leaf", None)
    ascend(cs, shape, shape.blank_path(), leaf)
    assert cs.num_constraints == rows


# -- storage-proofs-core/tests/por_circuit.rs (docs/circuits.md §13): 64 leaves per base tree ---------------------

POR_STATED = [
    (TreeShape(64, 2, hasher=SHA256), 272_295),
    (TreeShape(64, 4, hasher=SHA256), 216_258),
    (TreeShape(64, 8, hasher=SHA256), 250_987),
    (TreeShape(64, 2), 1_887),
    (TreeShape(64, 4), 1_164),
    (TreeShape(64, 8), 1_063),
    (TreeShape(128, 8, 2), 1_377),
    (TreeShape(512, 8, 4, 2), 1_764),
    (TreeShape(512, 8, 8), 1_593),
    (TreeShape(1024, 8, 8, 2), 1_907),
    (TreeShape(512, 8, 2, 4), 1_764),
]


@pytest.mark.parametrize(("shape", "rows"), POR_STATED, ids=[shape.describe() for shape, _ in POR_STATED])
def test_por_circuit_stated_counts(shape: TreeShape, rows: int) -> None:
    """Rows as bellperson's TestConstraintSystem counts them: without the generator's input rows."""
    public = circuit_shape(PoRCircuit.blank(shape))
    assert public.num_inputs == 3
    assert public.num_constraints - public.num_inputs == rows


@pytest.mark.parametrize(("base_arity", "rows"), [(2, 1_886), (4, 1_163), (8, 1_062)])
def test_por_circuit_private_root_stated_counts(base_arity: int, rows: int) -> None:
    private = circuit_shape(PoRCircuit.blank(TreeShape(64, base_arity), private=True))
    assert private.num_inputs == 2
    assert private.num_constraints - private.num_inputs == rows


def test_production_inclusion_costs() -> None:
    """Inc of docs/circuits.md §6 (levels + pack row + root row) for every published tree_c / tree_r shape."""
    for shape, inc in [(TreeShape(1 << 6), 1_062), (TreeShape(1 << 18), 3_182), (TreeShape(1 << 24), 4_242),
                       (TreeShape(1 << 30, 8, 8), 5_302), (TreeShape(1 << 31, 8, 8, 2), 5_616)]:
        cs = _shape_cs()
        leaf = AllocatedNum.alloc(cs, "leaf", None)
        root = AllocatedNum.alloc(cs, "root", None)
        enforce_inclusion(cs, shape, shape.blank_path(), leaf, root)
        assert cs.num_constraints == inc, shape
        assert cs.num_inputs == 2


# -- satisfiability ------------------------------------------------------------------------------

def _random_tree(shape: TreeShape, seed: int) -> NativeTree:
    rng = random.Random(seed)
    return NativeTree(shape, [rng.getrandbits(254) for _ in range(shape.leaves)])


@pytest.mark.parametrize("shape", [TreeShape(64, 2), TreeShape(64, 4), TreeShape(64, 8), TreeShape(128, 8, 2),
                                   TreeShape(512, 8, 4, 2), TreeShape(512, 8, 2, 4)],
                         ids=TreeShape.describe)
def test_por_circuit_satisfied_and_inputs(shape: TreeShape) -> None:
    tree = _random_tree(shape, shape.leaves)
    for index in sorted({0, 1, shape.leaves - 1, *random.Random(1).sample(range(shape.leaves), 6)}):
        cs = synthesize_for_proving(PoRCircuit(shape, tree.levels[0][index], tree.path(index), tree.root),
                                    check=True)
        assert cs.input_assignment[1:] == por_public_inputs(index, tree.root)


def test_por_circuit_sha256_satisfied() -> None:
    shape = TreeShape(8, 2, hasher=SHA256)
    tree = _random_tree(shape, 8)
    index = 5
    cs = synthesize_for_proving(PoRCircuit(shape, tree.levels[0][index], tree.path(index), tree.root, True),
                                check=True)
    assert cs.input_assignment[1:] == por_public_inputs(index)


def test_native_sha256_node_is_fr32_truncated() -> None:
    node = native_node_hash(SHA256, [2**254 - 1, 3])
    assert node < 2**254


def test_por_circuit_rejects_wrong_sibling() -> None:
    shape = TreeShape(64, 8)
    tree = _random_tree(shape, 3)
    path = tree.path(9)
    path[1] = PathLevel([path[1].siblings[0] + 1, *path[1].siblings[1:]], path[1].index)
    with pytest.raises(SynthesisError, match="root"):
        synthesize_for_proving(PoRCircuit(shape, tree.levels[0][9], path, tree.root), check=True)


def test_por_checks_path_layout() -> None:
    shape = TreeShape(64, 8)
    with pytest.raises(ValueError, match="levels"):
        circuit_shape(PoRCircuit(shape, None, shape.blank_path()[:1], None))
    bad = [PathLevel([None] * 3, None), *shape.blank_path()[1:]]
    with pytest.raises(ValueError, match="siblings"):
        circuit_shape(PoRCircuit(shape, None, bad, None))
    with pytest.raises(ValueError, match="index"):
        circuit_shape(PoRCircuit(shape, None, [PathLevel([None] * 7, 8), *shape.blank_path()[1:]], None))


def test_blank_por_needs_values_when_proving() -> None:
    with pytest.raises(SynthesisError, match="assignment missing"):
        synthesize_for_proving(PoRCircuit.blank(TreeShape(64, 8)))


@pytest.mark.parametrize(("args", "message"), [
    ((64, 3), "power of two"), ((64, 8, 0, 2), "needs a sub-tree"), ((96, 8), "do not fit"), ((1, 8), "do not fit"),
    ((8, 8, 8), "do not fit"),
])
def test_tree_shape_validation(args: tuple[int, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TreeShape(*args)


def test_tree_shape_levels() -> None:
    assert TreeShape(1 << 31, 8, 8, 2).arities == (8,) * 9 + (8, 2)
    assert TreeShape(1 << 31, 8, 8, 2).index_bit_count == 31
    assert TreeShape.binary_sha256(64).arities == (2,) * 6


# -- variants used by PoSt and SnapDeals ------------------------------------------------------------

def test_alloc_leaf_variant_allocates_the_leaf_first() -> None:
    shape = TreeShape(128, 8, 2)
    tree = _random_tree(shape, 5)
    index = 77
    cs = _proving_cs()
    root = AllocatedNum.alloc(cs, "comm_r_last", tree.root)
    leaf, path_input = alloc_leaf_and_enforce_inclusion(cs, shape, tree.path(index), tree.levels[0][index], root)
    assert leaf.variable.index == 1 and leaf.value == tree.levels[0][index]
    assert path_input.value == index and cs.input_assignment == [1, index]
    assert cs.num_constraints == 2 * 530 + 314 + 2


def test_por_no_challenge_input_matches_inclusion_rows() -> None:
    """Same per-level insert+hash rows, without bit allocation or public input (SnapDeals)."""
    shape = TreeShape(512, 8, 4, 2)
    tree = _random_tree(shape, 6)
    index = 300
    cs = _proving_cs()
    bits = _alloc_bits(cs, index, shape.index_bit_count)
    leaf = AllocatedNum.alloc(cs, "leaf", tree.levels[0][index])
    root = AllocatedNum.alloc(cs, "root", tree.root)
    path_values = alloc_path_values(cs, [step.siblings for step in tree.path(index)])
    before = cs.num_constraints
    por_no_challenge_input(cs, POSEIDON, bits, leaf, path_values, root)
    assert cs.num_constraints - before == (2 * 527 + 385 + 313) + 1
    assert cs.num_inputs == 1
    with pytest.raises(ValueError, match="index bits"):
        por_no_challenge_input(cs, POSEIDON, bits[:-1], leaf, path_values, root)
