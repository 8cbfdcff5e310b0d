"""Aux left for a device (`cuzk.witness_gen.deferred`): a PoRep partition generated with its SHA-256
gadgets deferred, or a PoSt partition with its openings deferred, writes every other aux exactly as
the full generator does, the deferred jobs cover precisely the rest, and completing them on the host
gives the full generator's aux (porep-2k, a 32GiB-shaped PoRep partition with one challenge,
wpost-2k, a WindowPoSt-32GiB-shaped one with 3 sectors, snap-2k, whose openings defer both kinds); the
jobs survive pickling (they travel from a synthesis process to the prover's)."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from cuzk.circuits.filecoin.compound import sample_compound
from cuzk.circuits.filecoin.porep import PRODUCTION_CONFIGS, StackedCircuit, random_stacked_circuit
from cuzk.circuits.filecoin.porep_witness import PorepLayout, label_plan
from cuzk.circuits.filecoin.post import FallbackPoStCircuit, FallbackPoStConfig, random_post_circuit
from cuzk.circuits.filecoin.snap import EmptySectorUpdateCircuit
from cuzk.gadgets.por import TreeShape
from cuzk.witness_gen.deferred import DeferredWitness
from cuzk.witness_gen.merkle import PathLayout, merkle_path_witness, sha256_node_plan

SENTINEL = np.uint64(0xDEAD)
Circuit = StackedCircuit | FallbackPoStCircuit | EmptySectorUpdateCircuit


def _deferred_witness(circuit: Circuit) -> tuple[np.ndarray, np.ndarray, DeferredWitness]:
    aux = np.full((circuit.witness_shape()[1], 4), SENTINEL, dtype=np.uint64)
    deferred = DeferredWitness()
    inputs, returned = circuit.witness_arrays(out=aux, deferred=deferred)
    assert returned is aux
    return inputs, aux, deferred


def _host_mask(deferred: DeferredWitness, num_aux: int) -> np.ndarray:
    starts, lengths = deferred.host_ranges(num_aux)
    mask = np.zeros(num_aux, dtype=bool)
    for start, length in zip(starts.tolist(), lengths.tolist(), strict=True):
        assert not mask[start:start + length].any()
        mask[start:start + length] = True
    return mask


def _check_against_full(circuit: Circuit) -> DeferredWitness:
    full_inputs, full_aux = circuit.witness_arrays()
    inputs, aux, deferred = _deferred_witness(circuit)
    num_aux = full_aux.shape[0]
    assert np.array_equal(inputs, full_inputs)
    host = _host_mask(deferred, num_aux)
    assert int(host.sum()) + deferred.num_rows == num_aux
    assert np.array_equal(aux[host], full_aux[host])  # everything but the deferred gadgets written as before
    assert (aux[~host] == SENTINEL).all()  # and those not at all
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
    plans = {job.plan for job in deferred.sha256_jobs}
    assert plans == {label_plan(1), label_plan(2), sha256_node_plan(2)}
    labels = sum(job.rows.shape[0] for job in deferred.sha256_jobs if job.plan is not sha256_node_plan(2))
    assert labels == config.challenges * config.layers


def test_sampled_32gib_partition_deferred_then_completed() -> None:
    """The 32GiB layout with one challenge: 30 tree_d levels and 11 labels, 98% of the aux deferred."""
    circuit = random_stacked_circuit(dataclasses.replace(PRODUCTION_CONFIGS[32 << 30], challenges=1), seed=32)
    deferred = _check_against_full(circuit)
    assert deferred.num_rows > 0.97 * PorepLayout.of(circuit.config).num_aux


def test_jobs_survive_pickling(porep_2k: StackedCircuit) -> None:
    _, aux, deferred = _deferred_witness(porep_2k)
    again = pickle.loads(pickle.dumps(deferred))
    assert [j.plan.num_aux for j in again.sha256_jobs] == [j.plan.num_aux for j in deferred.sha256_jobs]
    for a, b in zip(again.sha256_jobs, deferred.sha256_jobs, strict=True):
        assert np.array_equal(a.message_bits, b.message_bits) and np.array_equal(a.rows, b.rows)
    completed = aux.copy()
    again.complete_on_host(completed)
    deferred.complete_on_host(aux)
    assert np.array_equal(completed, aux)


def test_post_2k_openings_deferred_then_completed() -> None:
    circuit = sample_compound("wpost-2k", 1).partition_circuit(0)
    assert isinstance(circuit, FallbackPoStCircuit)
    deferred = _check_against_full(circuit)
    assert not deferred.sha256_jobs and len(deferred.path_jobs) == 1
    config = circuit.config
    assert deferred.path_jobs[0].rows.shape == (config.sector_count * config.challenge_count,)


def test_sampled_32gib_post_partition_deferred_then_completed_after_pickling() -> None:
    """3 sectors of a WindowPoSt-32GiB partition: 99% of the aux deferred; the record pickled first."""
    config = dataclasses.replace(FallbackPoStConfig.window(32 << 30), sector_count=3)
    circuit = random_post_circuit(config, 4)
    full_inputs, full_aux = circuit.witness_arrays()
    inputs, aux, deferred = _deferred_witness(circuit)
    assert np.array_equal(inputs, full_inputs)
    assert deferred.num_rows > 0.99 * full_aux.shape[0]
    pickle.loads(pickle.dumps(deferred)).complete_on_host(aux)
    assert np.array_equal(aux, full_aux)


def test_snap_2k_openings_deferred_then_completed() -> None:
    """SnapDeals: both tree_r openings whole and the tree_d opening's SHA-256 node hashes deferred."""
    circuit = sample_compound("snap-2k", 1).partition_circuit(0)
    assert isinstance(circuit, EmptySectorUpdateCircuit)
    deferred = _check_against_full(circuit)
    assert len(deferred.path_jobs) == 2 and deferred.sha256_jobs
    assert deferred.num_rows > 0.75 * circuit.witness_shape()[1]  # 80% at 2KiB


def test_poseidon_paths_refuse_bad_records() -> None:
    shape = TreeShape(64, 8)
    leaves = np.zeros((2, 4), dtype=np.uint64)
    siblings = np.zeros((2, sum(a - 1 for a in shape.arities), 4), dtype=np.uint64)
    deferred = DeferredWitness()
    with pytest.raises(ValueError, match="one aux row per path"):
        deferred.poseidon_paths(shape, PathLayout.INCLUSION, leaves, np.zeros(2, dtype=np.int64), siblings, [0])
    with pytest.raises(ValueError, match="only Poseidon paths"):
        deferred.poseidon_paths(TreeShape.binary_sha256(8), PathLayout.INCLUSION, leaves, [0, 1], siblings[:, :3],
                                [0, 100])
    deferred.poseidon_paths(shape, PathLayout.INCLUSION, leaves, np.zeros(2, dtype=np.int64), siblings, [0, 3])
    with pytest.raises(ValueError, match="overlap at aux row 3"):
        deferred.host_ranges(10_000)
    outside = DeferredWitness()
    outside.poseidon_paths(shape, PathLayout.INCLUSION, leaves, np.zeros(2, dtype=np.int64), siblings, [0, 10])
    with pytest.raises(ValueError, match="path rows reach outside the aux vector of 20 rows"):
        outside.complete_on_host(np.zeros((20, 4), dtype=np.uint64))


def test_host_ranges_refuse_overlapping_or_outside_jobs() -> None:
    plan = sha256_node_plan(2)
    message = np.zeros((2, plan.message_bits), dtype=np.uint8)
    deferred = DeferredWitness()
    deferred.hash_circuit(plan, message, np.array([0, plan.num_aux - 1]))
    with pytest.raises(ValueError, match="overlap at aux row"):
        deferred.host_ranges(10 * plan.num_aux)
    beyond = DeferredWitness()
    beyond.hash_circuit(plan, message[:1], np.array([5]))
    with pytest.raises(ValueError, match="outside the aux vector"):
        beyond.host_ranges(plan.num_aux)
    with pytest.raises(ValueError, match="one aux row per message"):
        DeferredWitness().hash_circuit(plan, message, np.array([0]))
    starts, lengths = DeferredWitness().host_ranges(7)
    assert starts.tolist() == [0] and lengths.tolist() == [7]


def test_packed_digests_equal_the_plan(porep_2k: StackedCircuit) -> None:
    rng = np.random.default_rng(3)
    plan = label_plan(2)
    bits = rng.integers(0, 2, size=(5, plan.message_bits), dtype=np.uint8)
    bits[:, plan.constant_positions] = plan.constant_values
    packed = DeferredWitness().hash_circuit(plan, bits, np.arange(5) * plan.num_aux)
    assert np.array_equal(packed, plan.generate_hash_circuit(bits).packed)


def test_only_sha256_paths_defer() -> None:
    shape = TreeShape(64, 8)  # a Poseidon tree
    leaves = np.zeros((1, 4), dtype=np.uint64)
    siblings = np.zeros((1, sum(a - 1 for a in shape.arities), 4), dtype=np.uint64)
    with pytest.raises(ValueError, match="only SHA-256 paths defer"):
        merkle_path_witness(shape, PathLayout.INCLUSION, leaves, np.zeros(1, dtype=np.int64), siblings,
                            deferred=DeferredWitness(), rows=np.zeros(1, dtype=np.int64))


def test_openings_completed_in_batches_give_the_same_aux(monkeypatch: pytest.MonkeyPatch) -> None:
    """`complete_on_host` computes a few paths at a time (their aux is a copy on its way into the
    vector): batches of one path, of two and of all give the full generator's aux."""
    from cuzk.witness_gen import deferred as deferred_module

    config = dataclasses.replace(FallbackPoStConfig.window(32 << 30), sector_count=1)
    circuit = random_post_circuit(config, 7)
    _, full_aux = circuit.witness_arrays()
    _, aux, deferred = _deferred_witness(circuit)
    (job,) = deferred.path_jobs
    assert job.rows.shape[0] > 2
    for rows in (job.path_aux, 2 * job.path_aux + 1, 1 << 30):
        monkeypatch.setattr(deferred_module, "HOST_PATH_ROWS", rows)
        completed = aux.copy()
        deferred.complete_on_host(completed)
        assert np.array_equal(completed, full_aux), rows
