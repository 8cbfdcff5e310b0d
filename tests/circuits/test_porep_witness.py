"""A PoRep partition's witness from the batched generators (`porep_witness`, `StackedCircuit.witness_arrays`)
equals `synthesize_witness`'s inputs and aux element for element: a real porep-2k partition, synthetic
partitions of other tree shapes, and (slow) a 32GiB-shaped partition with one challenge; the porep-2k
witness satisfies every row of the compiled circuit (slow: recording porep-2k takes minutes)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

from cuzk.circuits.filecoin.compound import blank_circuit, sample_compound
from cuzk.circuits.filecoin.porep import (
    PRODUCTION_CONFIGS,
    PathLevel,
    StackedCircuit,
    StackedConfig,
    random_stacked_circuit,
)
from cuzk.circuits.filecoin.porep_witness import GADGET_KINDS, PorepLayout, porep_witness
from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.synthesis import compile_circuit, synthesize_witness


def _assert_equal_to_witness_cs(circuit: StackedCircuit, inputs: np.ndarray, aux: np.ndarray) -> None:
    reference = synthesize_witness(circuit)
    expected_inputs, expected_aux = ints_to_limbs(reference.input_assignment), ints_to_limbs(reference.aux_assignment)
    layout = PorepLayout.of(circuit.config)
    assert inputs.shape == expected_inputs.shape == (layout.num_inputs, 4)
    assert aux.shape == expected_aux.shape == (layout.num_aux, 4)
    assert inputs.dtype == aux.dtype == np.uint64
    assert np.array_equal(inputs, expected_inputs)
    differing = np.flatnonzero((aux != expected_aux).any(axis=1))
    assert differing.size == 0, f"{differing.size} aux differ, first at {differing[:8].tolist()}"


@pytest.fixture(scope="module")
def porep_2k() -> StackedCircuit:
    circuit = sample_compound("porep-2k", 5).partition_circuit(0)
    assert isinstance(circuit, StackedCircuit)
    return circuit


def test_porep_2k_partition_equals_witness_cs(porep_2k: StackedCircuit) -> None:
    timings: dict[str, float] = {}
    inputs, aux = porep_witness(porep_2k, timings)
    assert set(timings) == set(GADGET_KINDS)
    _assert_equal_to_witness_cs(porep_2k, inputs, aux)
    again_inputs, again_aux = porep_2k.witness_arrays()
    assert np.array_equal(again_inputs, inputs) and np.array_equal(again_aux, aux)
    buffer = np.full_like(aux, 7)  # a reused buffer: every element is overwritten
    assert porep_witness(porep_2k, out=buffer)[1] is buffer and np.array_equal(buffer, aux)
    with pytest.raises(ValueError, match=rf"out must be a C-contiguous \({aux.shape[0]}, 4\) uint64 array"):
        porep_witness(porep_2k, out=buffer[:-1])


@pytest.mark.parametrize("config", [
    StackedConfig(nodes=1024, layers=2, challenges=1, base_arity=8, sub_arity=8, top_arity=2),  # 64GiB's 8-8-2
    StackedConfig(nodes=512, layers=2, challenges=1, base_arity=8, sub_arity=8),  # 32GiB's 8-8
], ids=["8-8-2", "8-8"])
def test_synthetic_partitions_of_other_tree_shapes(config: StackedConfig) -> None:
    """Random well-formed values (no consistent sector): the witness follows the circuit's values as
    `WitnessCS` does, whatever they are, including values >= r, which both reduce."""
    circuit = random_stacked_circuit(config, seed=config.nodes)
    circuit.replica_id = R_MODULUS + 12345  # alloc reduces it; its bits are those of the reduced value
    _assert_equal_to_witness_cs(circuit, *circuit.witness_arrays())


def test_blank_and_bad_values_are_named() -> None:
    config = StackedConfig(nodes=64, layers=2, challenges=2)
    with pytest.raises(SynthesisError, match="replica_id has no value"):
        StackedCircuit.blank(config).witness_arrays()
    circuit = random_stacked_circuit(config, seed=1)
    circuit.proofs[1].exp_parents[3].values[1] = None  # type: ignore[index]
    with pytest.raises(SynthesisError, match="challenge 1: expander parent 3 row 1 has no value"):
        porep_witness(circuit)
    circuit = random_stacked_circuit(config, seed=1)
    circuit.proofs[0].comm_c_path[0] = PathLevel([1] * 7, None)  # type: ignore[index]
    with pytest.raises(SynthesisError, match="challenge 0: comm_c path: level 0's position has no value"):
        porep_witness(circuit)
    circuit = random_stacked_circuit(config, seed=1)
    circuit.proofs[0].challenge = 1 << 64
    with pytest.raises(SynthesisError, match="challenge 0: challenge 18446744073709551616 is not a 64-bit"):
        porep_witness(circuit)
    circuit = random_stacked_circuit(config, seed=1)
    circuit.proofs = circuit.proofs[:1]
    with pytest.raises(ValueError, match="2 challenges, got 1 proofs"):
        porep_witness(circuit)


@pytest.mark.slow
def test_porep_2k_witness_satisfies_the_compiled_circuit(porep_2k: StackedCircuit) -> None:
    """Recording porep-2k (2.7M rows) took ~17 s on this 2-core box."""
    inputs, aux = porep_2k.witness_arrays()
    compiled = compile_circuit(blank_circuit("porep-2k"), "porep-2k")
    assignment = Assignment.from_compiled(compiled, (inputs, aux), check=True)
    assert assignment.public_inputs() == sample_compound("porep-2k", 5).public_inputs(0)


@pytest.mark.slow
def test_sampled_32gib_partition_with_one_challenge_equals_witness_cs() -> None:
    """The 32GiB production circuit's trees (tree_d 2^30 leaves, tree_c / tree_r_last 8-8) and 11
    layers with one challenge: 7.2M aux. WitnessCS takes about 30 s on this 2-core box, the generators ~1 s."""
    config = dataclasses.replace(PRODUCTION_CONFIGS[32 << 30], challenges=1)
    circuit = random_stacked_circuit(config, seed=32)
    start = time.perf_counter()
    inputs, aux = porep_witness(circuit)
    assert time.perf_counter() - start < 60
    _assert_equal_to_witness_cs(circuit, inputs, aux)
