"""PoSt and SnapDeals partition witnesses from the batched generators (`witness_arrays`) equal
`synthesize_witness` element by element, and `synthesize_compiled` gives the same Assignment with
the generator as with WitnessCS.

Published 2KiB partitions come from `sample_compound`. Random, well-formed values (WitnessCS needs
no consistent sector, only values) give sampled partitions of the production layouts: two sectors
of a WindowPoSt-32GiB / -64GiB partition, and (slow) the SnapDeals-32GiB layout with one challenge.
SnapDeals-2KiB has a single partition (no partition bits), so small custom layouts cover the
partition path, several allowed h, the apex select, a tree_d part of zero levels and two digests.
"""

from __future__ import annotations

import dataclasses
import random
from functools import cache

import numpy as np
import pytest

from cuzk.circuits.examples import MimcCircuit
from cuzk.circuits.filecoin.compound import PartitionInstance, sample_compound
from cuzk.circuits.filecoin.post import FallbackPoStCircuit, FallbackPoStConfig, random_post_circuit
from cuzk.circuits.filecoin.snap import EmptySectorUpdateCircuit, EmptySectorUpdateConfig, UpdateChallengeProof
from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs
from cuzk.gadgets.por import PathLevel
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.synthesis import compile_circuit, generated_witness, synthesize_compiled, synthesize_witness
from cuzk.r1cs import Circuit, ConstraintSystem
from cuzk.r1cs.compiled import CompiledCircuit

FIELDS = ("a", "b", "c", "inputs", "aux", "a_aux_density", "b_input_density", "b_aux_density")


def assert_witness_equal(circuit: FallbackPoStCircuit | EmptySectorUpdateCircuit) -> tuple[np.ndarray, np.ndarray]:
    inputs, aux = circuit.witness_arrays()
    reference = synthesize_witness(circuit)
    assert inputs.dtype == aux.dtype == np.uint64
    assert np.array_equal(inputs, ints_to_limbs(reference.input_assignment))
    expected = ints_to_limbs(reference.aux_assignment)
    assert aux.shape == expected.shape
    differ = np.flatnonzero((aux != expected).any(axis=1))
    assert differ.size == 0, f"{differ.size} aux values differ, first at {differ[:8].tolist()}"
    # The counts are known before generating, and a given buffer (a shared-memory segment) is filled whole.
    assert circuit.witness_shape() == (inputs.shape[0], aux.shape[0])
    buffer = np.full_like(aux, 7)
    assert circuit.witness_arrays(out=buffer)[1] is buffer and np.array_equal(buffer, aux)
    with pytest.raises(ValueError, match=rf"out must be a C-contiguous \({aux.shape[0]}, 4\) uint64 array"):
        circuit.witness_arrays(out=buffer[:-1])
    return inputs, aux


@pytest.mark.parametrize(("circuit_id", "seed"), [("winning-2k", 1), ("wpost-2k", 2), ("wpost-2k", 3)])
def test_post_partition_equals_witness_cs(circuit_id: str, seed: int) -> None:
    compound = sample_compound(circuit_id, seed)
    _, aux = assert_witness_equal(compound.partition_circuit(0))
    # The PartitionInstance the CLI and benchmarks use hands the generator through.
    inputs, same_aux = compound.instance(0).witness_arrays()
    assert np.array_equal(aux, same_aux)
    assert np.array_equal(inputs[1:], ints_to_limbs(compound.public_inputs(0)))
    # In place (a synthesis process's shared memory): the stated counts, every element overwritten.
    assert compound.instance(0).witness_shape() == (inputs.shape[0], aux.shape[0])
    buffer = np.full_like(aux, 7)
    assert compound.instance(0).witness_arrays(out=buffer)[1] is buffer and np.array_equal(buffer, aux)
    with pytest.raises(ValueError, match=rf"out must be a C-contiguous \({aux.shape[0]}, 4\) uint64 array"):
        compound.instance(0).witness_arrays(out=buffer[:-1])


def test_post_sectors_differ_and_repeat() -> None:
    """Distinct sectors side by side (each its own tree, commitments and challenges), the last one
    repeated as a short WindowPoSt partition pads it; a non-canonical sibling is reduced as
    WitnessCS reduces it."""
    config = FallbackPoStConfig(2048, 3, 4)
    sectors = list(random_post_circuit(dataclasses.replace(config, sector_count=2), 7).sectors)
    sectors[0].paths[1][0].siblings[2] += R_MODULUS  # type: ignore[index]
    assert_witness_equal(FallbackPoStCircuit(config, [*sectors, sectors[-1]]))


@pytest.mark.parametrize("size", [32 << 30, 64 << 30], ids=["32g", "64g"])
def test_post_production_tree_shapes_with_synthetic_values(size: int) -> None:
    """Sampled partitions of the 32GiB (8-8) and 64GiB (8-8-2) layouts: 2 of a WindowPoSt
    partition's sectors (the rest repeat the same per-sector layout), random well-formed values."""
    window = FallbackPoStConfig.window(size)
    assert window.sector_count > 2
    assert_witness_equal(random_post_circuit(dataclasses.replace(window, sector_count=2), size.bit_length()))


def test_blank_or_incomplete_circuits_name_the_missing_value() -> None:
    config = FallbackPoStConfig.window(2048)
    with pytest.raises(SynthesisError, match="sector 0 comm_r_last"):
        FallbackPoStCircuit.blank(config).witness_arrays()
    def as_objects(circuit: FallbackPoStCircuit) -> FallbackPoStCircuit:
        # a daemon's partition holds arrays (always valued); objects can lack a value
        return dataclasses.replace(circuit, sectors=circuit.circuit_sectors(), openings=None)

    circuit = as_objects(sample_compound("wpost-2k", 1).partition_circuit(0))
    circuit.sectors[1].leaves = [*circuit.sectors[1].leaves[:-1], None]
    with pytest.raises(SynthesisError, match=r"challenged leaves\[19\]"):
        circuit.witness_arrays()
    circuit = as_objects(sample_compound("wpost-2k", 1).partition_circuit(0))
    level = circuit.sectors[0].paths[3][1]
    circuit.sectors[0].paths[3][1] = PathLevel([*level.siblings[:-1], None], level.index)  # type: ignore[index]
    with pytest.raises(SynthesisError, match="challenge path 3: level 1 sibling 6 has no value"):
        circuit.witness_arrays()
    circuit.sectors = circuit.sectors[:1]
    with pytest.raises(ValueError, match="the circuit has 2 sectors, got 1"):
        circuit.witness_arrays()
    snap = EmptySectorUpdateConfig.for_sector_size(2048)
    with pytest.raises(SynthesisError, match="k_and_h_select"):
        EmptySectorUpdateCircuit.blank(snap).witness_arrays()
    update = random_update(SMALL_CHEAP, 1, 1, 9)
    update.challenge_proofs[3].leaf_d_new = None
    with pytest.raises(SynthesisError, match=r"leaf_d_new of challenge\[3\]"):
        update.witness_arrays()
    update.root_r_new = None
    with pytest.raises(SynthesisError, match="root_r_new"):
        update.witness_arrays()


# -- SnapDeals ----------------------------------------------------------------------------------------

#: nodes 16 (tree_r 8-2), 2 partitions, 2 apex leaves, tree_d part of 2 levels, three allowed h.
SMALL_SPLIT = EmptySectorUpdateConfig(16, 2, 3, (1, 2, 3), 2, 8, 2, 0)
#: nodes 8 (tree_r 8), 2 partitions, 4 apex leaves and no tree_d part; 2-bit random parts, so 127
#: challenges per digest and 130 challenges take two digests.
SMALL_DIGESTS = EmptySectorUpdateConfig(8, 2, 130, (1, 2), 4, 8, 0, 0)
#: nodes 8, 4 partitions, 2 apex leaves: three SHA-256 hashes in all, the cheapest layout to run twice.
SMALL_CHEAP = EmptySectorUpdateConfig(8, 4, 6, (1, 2), 2, 8, 0, 0)


def random_update(config: EmptySectorUpdateConfig, k: int, h: int, seed: int) -> EmptySectorUpdateCircuit:
    """Random values of the right layout; the challenges' tree_d paths share their partition part."""
    rng = random.Random(seed)

    def fr() -> int:
        return rng.randrange(R_MODULUS)

    top = [[fr()] for _ in range(config.partition_bit_len)]
    proofs = [UpdateChallengeProof(fr(), [[fr() for _ in range(a - 1)] for a in config.tree_r.arities], fr(),
                                   [[fr()] for _ in range(config.challenge_bit_len - len(top))] + top, None,
                                   [[fr() for _ in range(a - 1)] for a in config.tree_r.arities])
              for _ in range(config.challenge_count)]
    return EmptySectorUpdateCircuit(config, k, h, fr(), fr(), fr(), fr(), fr(), fr(),
                                    [fr() for _ in range(config.apex_leaf_count)], proofs)


@pytest.mark.parametrize(("config", "k", "h", "seed"), [(SMALL_SPLIT, 1, 2, 1),
                                                        pytest.param(SMALL_SPLIT, 0, 3, 2, marks=pytest.mark.slow),
                                                        (SMALL_DIGESTS, 1, 1, 3)],
                         ids=["split-k1", "split-k0", "two-digests"])
def test_snap_small_layouts_equal_witness_cs(config: EmptySectorUpdateConfig, k: int, h: int, seed: int) -> None:
    assert config.digests_per_partition == (2 if config is SMALL_DIGESTS else 1)
    assert_witness_equal(random_update(config, k, h, seed))


def test_snap_refuses_a_wrong_new_replica_node_as_synthesis_does() -> None:
    circuit = random_update(SMALL_CHEAP, 3, 2, 4)
    _, aux = circuit.witness_arrays()
    # The circuit's own encoding of challenge 5, read from WitnessCS: leaf_r_old, leaf_d_new, the
    # product, then leaf_r_new.
    reference = synthesize_witness(circuit).aux_assignment
    encoded = reference[reference.index(circuit.challenge_proofs[5].leaf_r_old) + 3]
    circuit.challenge_proofs[5].leaf_r_new = encoded
    assert np.array_equal(circuit.witness_arrays()[1], aux)
    circuit.challenge_proofs[5].leaf_r_new = (encoded + 1) % R_MODULUS
    with pytest.raises(SynthesisError, match="c_index=5/leaf_r_new"):
        circuit.witness_arrays()
    with pytest.raises(SynthesisError, match="c_index=5/leaf_r_new"):
        synthesize_witness(circuit)


@pytest.mark.slow
def test_snap_32g_layout_with_one_challenge() -> None:
    """The 32GiB layout (16 partitions, h in 7..12, 128 apex leaves, tree_d part of 19 levels,
    tree_r 8-8) with one challenge instead of 86 and random values: 150 SHA-256 hashes, 6.8M aux."""
    config = dataclasses.replace(EmptySectorUpdateConfig.for_sector_size(32 << 30), challenge_count=1)
    assert_witness_equal(random_update(config, 11, 9, 5))


@pytest.mark.slow
def test_snap_2k_partition_equals_witness_cs() -> None:
    """The published 2KiB SnapDeals partition (1.7M aux, ~10 s under WitnessCS)."""
    compound = sample_compound("snap-2k", 1)
    inputs, _ = assert_witness_equal(compound.partition_circuit(0))
    assert np.array_equal(inputs[1:], ints_to_limbs(compound.public_inputs(0)))


# -- the compiled path ----------------------------------------------------------------------------------

class WithoutGenerator:
    """The same circuit, seen without its `witness_arrays` (so WitnessCS runs)."""

    def __init__(self, circuit: Circuit) -> None:
        self.circuit = circuit

    def synthesize(self, cs: ConstraintSystem) -> None:
        self.circuit.synthesize(cs)


@cache
def compiled(circuit_id: str) -> CompiledCircuit:
    from cuzk.circuits.filecoin.compound import blank_circuit

    return compile_circuit(blank_circuit(circuit_id), circuit_id)


def assert_same_assignment(x: Assignment, y: Assignment) -> None:
    for name in FIELDS:
        a, b = getattr(x, name), getattr(y, name)
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), name


def test_generated_witness_only_for_circuits_with_a_generator() -> None:
    assert generated_witness(MimcCircuit.with_total_constraints(16, 3)) is None
    assert generated_witness(WithoutGenerator(sample_compound("wpost-2k", 1).partition_circuit(0))) is None
    assert generated_witness(PartitionInstance(MimcCircuit.with_total_constraints(16, 3), [])) is None


@pytest.mark.parametrize("circuit_id", ["wpost-2k", "winning-2k"])
def test_synthesize_compiled_with_and_without_the_generator(circuit_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    instance = sample_compound(circuit_id, 4).instance(0)
    without = synthesize_compiled(WithoutGenerator(instance), compiled(circuit_id))

    def no_witness_cs(circuit: Circuit) -> None:
        raise AssertionError("WitnessCS ran although the circuit has a generator")

    monkeypatch.setattr("cuzk.groth16.synthesis.synthesize_witness", no_witness_cs)
    with_generator = synthesize_compiled(instance, compiled(circuit_id))
    assert_same_assignment(without, with_generator)


def test_the_row_check_catches_a_generator_that_disagrees(monkeypatch: pytest.MonkeyPatch) -> None:
    instance = sample_compound("wpost-2k", 5).instance(0)
    inputs, aux = instance.witness_arrays()
    aux = aux.copy()
    aux[1234] = ints_to_limbs([7])[0]
    monkeypatch.setattr(FallbackPoStCircuit, "witness_arrays", lambda self: (inputs, aux))
    with pytest.raises(SynthesisError, match="not satisfied by the witness"):
        synthesize_compiled(instance, compiled("wpost-2k"))


@pytest.mark.slow
def test_synthesize_compiled_snap_2k_with_and_without_the_generator() -> None:
    instance = sample_compound("snap-2k", 2).instance(0)
    assert_same_assignment(synthesize_compiled(WithoutGenerator(instance), compiled("snap-2k")),
                           synthesize_compiled(instance, compiled("snap-2k")))
