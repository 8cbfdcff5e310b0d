"""SHA-256 aux left for a device (`cuzk.witness_gen.deferred`): a PoRep partition generated with its
SHA-256 gadgets deferred writes every other aux exactly as the full generator does, the deferred
jobs cover precisely the rest, and completing them on the host gives the full generator's aux (a
porep-2k partition, and a 32GiB-shaped one with one challenge); the jobs survive pickling (they
travel from a synthesis process to the prover's)."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from cuzk.circuits.filecoin.compound import sample_compound
from cuzk.circuits.filecoin.porep import PRODUCTION_CONFIGS, StackedCircuit
from cuzk.circuits.filecoin.porep_witness import PorepLayout, label_plan, porep_witness, random_stacked_circuit
from cuzk.gadgets.por import TreeShape
from cuzk.witness_gen.deferred import DeferredSha256
from cuzk.witness_gen.merkle import PathLayout, merkle_path_witness, sha256_node_plan

SENTINEL = np.uint64(0xDEAD)


def _deferred_witness(circuit: StackedCircuit) -> tuple[np.ndarray, np.ndarray, DeferredSha256]:
    aux = np.full((PorepLayout.of(circuit.config).num_aux, 4), SENTINEL, dtype=np.uint64)
    deferred = DeferredSha256()
    inputs, returned = porep_witness(circuit, out=aux, deferred=deferred)
    assert returned is aux
    return inputs, aux, deferred


def _host_mask(deferred: DeferredSha256, num_aux: int) -> np.ndarray:
    starts, lengths = deferred.host_ranges(num_aux)
    mask = np.zeros(num_aux, dtype=bool)
    for start, length in zip(starts.tolist(), lengths.tolist(), strict=True):
        assert not mask[start:start + length].any()
        mask[start:start + length] = True
    return mask


def _check_against_full(circuit: StackedCircuit) -> DeferredSha256:
    full_inputs, full_aux = porep_witness(circuit)
    inputs, aux, deferred = _deferred_witness(circuit)
    num_aux = full_aux.shape[0]
    assert np.array_equal(inputs, full_inputs)
    host = _host_mask(deferred, num_aux)
    assert int(host.sum()) + deferred.num_rows == num_aux
    assert np.array_equal(aux[host], full_aux[host])  # everything but SHA-256 bits written as before
    assert (aux[~host] == SENTINEL).all()  # and the SHA-256 bits not at all
    deferred.complete_on_host(aux)
    assert np.array_equal(aux, full_aux)
    return deferred


@pytest.fixture(scope="module")
def porep_2k() -> StackedCircuit:
    circuit = sample_compound("porep-2k", 5).partition_circuit(0)
    assert isinstance(circuit, StackedCircuit)
    return circuit


def test_porep_2k_deferred_then_completed_equals_the_full_generator(porep_2k: StackedCircuit) -> None:
    deferred = _check_against_full(porep_2k)
    config = porep_2k.config
    plans = {job.plan for job in deferred.jobs}
    assert plans == {label_plan(1), label_plan(2), sha256_node_plan(2)}
    labels = sum(job.rows.shape[0] for job in deferred.jobs if job.plan is not sha256_node_plan(2))
    assert labels == config.challenges * config.layers


def test_sampled_32gib_partition_deferred_then_completed() -> None:
    """The 32GiB layout with one challenge: 30 tree_d levels and 11 labels, 98% of the aux deferred."""
    circuit = random_stacked_circuit(dataclasses.replace(PRODUCTION_CONFIGS[32 << 30], challenges=1), seed=32)
    deferred = _check_against_full(circuit)
    assert deferred.num_rows > 0.97 * PorepLayout.of(circuit.config).num_aux


def test_jobs_survive_pickling(porep_2k: StackedCircuit) -> None:
    _, aux, deferred = _deferred_witness(porep_2k)
    again = pickle.loads(pickle.dumps(deferred))
    assert [j.plan.num_aux for j in again.jobs] == [j.plan.num_aux for j in deferred.jobs]
    for a, b in zip(again.jobs, deferred.jobs, strict=True):
        assert np.array_equal(a.message_bits, b.message_bits) and np.array_equal(a.rows, b.rows)
    completed = aux.copy()
    again.complete_on_host(completed)
    deferred.complete_on_host(aux)
    assert np.array_equal(completed, aux)


def test_host_ranges_refuse_overlapping_or_outside_jobs() -> None:
    plan = sha256_node_plan(2)
    message = np.zeros((2, plan.message_bits), dtype=np.uint8)
    deferred = DeferredSha256()
    deferred.hash_circuit(plan, message, np.array([0, plan.num_aux - 1]))
    with pytest.raises(ValueError, match="overlap at aux row"):
        deferred.host_ranges(10 * plan.num_aux)
    beyond = DeferredSha256()
    beyond.hash_circuit(plan, message[:1], np.array([5]))
    with pytest.raises(ValueError, match="outside the aux vector"):
        beyond.host_ranges(plan.num_aux)
    with pytest.raises(ValueError, match="one aux row per message"):
        DeferredSha256().hash_circuit(plan, message, np.array([0]))
    starts, lengths = DeferredSha256().host_ranges(7)
    assert starts.tolist() == [0] and lengths.tolist() == [7]


def test_packed_digests_equal_the_plan(porep_2k: StackedCircuit) -> None:
    rng = np.random.default_rng(3)
    plan = label_plan(2)
    bits = rng.integers(0, 2, size=(5, plan.message_bits), dtype=np.uint8)
    bits[:, plan.constant_positions] = plan.constant_values
    packed = DeferredSha256().hash_circuit(plan, bits, np.arange(5) * plan.num_aux)
    assert np.array_equal(packed, plan.generate_hash_circuit(bits).packed)


def test_only_sha256_paths_defer() -> None:
    shape = TreeShape(64, 8)  # a Poseidon tree
    leaves = np.zeros((1, 4), dtype=np.uint64)
    siblings = np.zeros((1, sum(a - 1 for a in shape.arities), 4), dtype=np.uint64)
    with pytest.raises(ValueError, match="only SHA-256 paths defer"):
        merkle_path_witness(shape, PathLayout.INCLUSION, leaves, np.zeros(1, dtype=np.int64), siblings,
                            deferred=DeferredSha256(), rows=np.zeros(1, dtype=np.int64))
