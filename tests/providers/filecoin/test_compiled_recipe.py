"""Filecoin recipes on the compiled path: the engine plans a Filecoin job with the ready compiled
circuit (`cuzk.engine.compiled_recipe.use_compiled`), the assignment is the constraint-system one,
anything wrong with the file falls back to the constraint system, and a store that builds on first
use does so in the background."""

from __future__ import annotations

import dataclasses
import functools
import logging
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cuzk.circuits.filecoin.compound import PublicInputMismatchError, sample_randomness, sample_sector
from cuzk.engine.compiled_recipe import CompiledRecipe, use_compiled
from cuzk.engine.compiled_store import CompiledState, CompiledStore
from cuzk.engine.jobs import Priority, ProofKind, ProofRequest
from cuzk.filecoin.post import winning_post_vanilla
from cuzk.filecoin.sizes import CircuitKind, parameter_file_name, post_proof, sector_params
from cuzk.groth16.synthesis import compile_circuit
from cuzk.providers.fields import fields_of, submit_request
from cuzk.providers.filecoin.payload import prover_id_from_miner
from cuzk.providers.filecoin.provider import WinningPostProvider
from cuzk.providers.filecoin.recipe import FilecoinPartitionRecipe
from cuzk.r1cs.compiled_file import load_compiled, write_compiled

FIELDS = ("a", "b", "c", "inputs", "aux", "a_aux_density", "b_input_density", "b_aux_density")
SIZE = sector_params("2KiB")
MINER = 1000
RANDOMNESS = sample_randomness(5)


@functools.cache
def winning_request() -> ProofRequest:
    proofs = winning_post_vanilla(post_proof(0), {11: sample_sector(SIZE, 5)}, RANDOMNESS,
                                  prover_id_from_miner(MINER))
    return submit_request("winning-1", ProofKind.WINNING_POST, Priority.CRITICAL, sector_size=SIZE.sector_bytes,
                          registered_proof=0, vanilla_proofs=[p.to_bincode() for p in proofs], randomness=RANDOMNESS,
                          miner_id=MINER)


def submit_winning(daemon: Any, request_id: str) -> Any:
    """`winning_request()` proven through a live daemon's gRPC client: its AwaitProofResponse."""
    from cuzk.server._gen import proving_pb2 as pb

    req = winning_request()
    f = fields_of(req)
    submit = pb.SubmitProofRequest(request_id=request_id, proof_kind=int(req.proof_kind), priority=int(req.priority),
                                   sector_size=f.sector_size, registered_proof=f.registered_proof,
                                   vanilla_proofs=f.vanilla_proofs, miner_id=f.miner_id, randomness=f.randomness)
    with daemon.client(timeout=30) as client:
        return client.prove(submit, timeout=600)


@pytest.fixture
def param_cache(tmp_path: Path) -> Path:
    """A placeholder for the winning-2k parameters: planning only checks that the file exists."""
    (tmp_path / parameter_file_name(CircuitKind.WINNING, SIZE)).touch()
    return tmp_path


@functools.cache
def reference_assignment() -> object:
    provider = WinningPostProvider("/nonexistent")
    recipe = provider.compound(fields_of(winning_request()))
    return FilecoinPartitionRecipe("winning-2k", 0, recipe.partition_circuit(0), tuple(recipe.public_inputs(0)),
                                   "reference").assignment()


def assert_identical(ref: object, got: object) -> None:
    for name in FIELDS:
        x, y = getattr(ref, name), getattr(got, name)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name


def plan_recipe(provider: WinningPostProvider, store: CompiledStore | None = None,
                sparse_products: str = "synthesis") -> Any:
    """Partition 0's recipe as the engine plans it with `store` (default: `<param_cache>/compiled`),
    as a synthesis process receives it."""
    request = winning_request()
    plan = provider.plan(request)
    assert isinstance(plan.partitions[0].recipe, FilecoinPartitionRecipe)
    use_compiled(plan, provider, store or CompiledStore(provider.param_cache / "compiled"), request,
                 sparse_products=sparse_products)
    return pickle.loads(pickle.dumps(plan.partitions[0].recipe))


def test_without_a_compiled_file_nothing_changes(param_cache: Path) -> None:
    recipe = plan_recipe(WinningPostProvider(param_cache))
    assert isinstance(recipe, FilecoinPartitionRecipe)
    assert not (param_cache / "compiled").exists()


def test_a_ready_compiled_file_is_used_and_gives_the_same_assignment(param_cache: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    store = CompiledStore(param_cache / "compiled")
    path = store.build("winning-2k")
    recipe = plan_recipe(WinningPostProvider(param_cache))
    assert isinstance(recipe, CompiledRecipe) and recipe.compiled_path == str(path) and recipe.fallback
    assert recipe.label == "winning-1 partition 0" and recipe.sparse_products == "synthesis"

    def no_constraint_system(*args: object, **kwargs: object) -> None:
        raise AssertionError("the constraint-system path ran")

    ref = reference_assignment()
    monkeypatch.setattr("cuzk.groth16.synthesis.synthesize_for_proving", no_constraint_system)
    assert_identical(ref, recipe.assignment())
    inputs = recipe.recipe.public_inputs
    bad = dataclasses.replace(recipe, recipe=dataclasses.replace(recipe.recipe, public_inputs=(inputs[0] + 1,
                                                                                               *inputs[1:])))
    with pytest.raises(PublicInputMismatchError, match="differ from the ones derived from the public data"):
        bad.assignment()


def test_the_compiled_path_takes_the_witness_from_the_circuits_generator(param_cache: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """PoSt circuits have a batched witness generator: with a compiled file, neither WitnessCS nor
    the constraint system runs, and the assignment is the same."""
    CompiledStore(param_cache / "compiled").build("winning-2k")
    recipe = plan_recipe(WinningPostProvider(param_cache))
    ref = reference_assignment()

    def not_expected(*args: object, **kwargs: object) -> None:
        raise AssertionError("a constraint system ran although the circuit has a witness generator")

    monkeypatch.setattr("cuzk.groth16.synthesis.synthesize_for_proving", not_expected)
    monkeypatch.setattr("cuzk.groth16.synthesis.synthesize_witness", not_expected)
    assert_identical(ref, recipe.assignment())


def test_an_unusable_file_falls_back_to_the_constraint_system(param_cache: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    store = CompiledStore(param_cache / "compiled")
    path = store.build("winning-2k")
    recipe = plan_recipe(WinningPostProvider(param_cache))
    # A well-formed file whose R1CS is not this circuit's (one coefficient changed): it loads, its
    # rows are not satisfied by the witness, and the recipe proves with the constraint system.
    good = load_compiled(path)
    table = np.array(good.coeff_table)
    table[5] = table[6]
    wrong = dataclasses.replace(good, coeff_table=table, fingerprint="")
    write_compiled(wrong, path)
    with caplog.at_level(logging.WARNING):
        assert_identical(reference_assignment(), recipe.assignment())
    assert any("constraints are not satisfied" in r.getMessage() for r in caplog.records)
    caplog.clear()
    path.write_bytes(path.read_bytes()[:1000])  # truncated: refused at load
    with caplog.at_level(logging.WARNING):
        assert_identical(reference_assignment(), recipe.assignment())
    assert any("truncated" in r.getMessage() for r in caplog.records)


def test_a_store_that_builds_on_first_use_builds_in_the_background(param_cache: Path) -> None:
    store = CompiledStore(param_cache / "compiled", auto_build=True)
    provider = WinningPostProvider(param_cache)
    first = plan_recipe(provider, store)
    assert isinstance(first, FilecoinPartitionRecipe)  # this job proves as before while the build runs
    assert store.status("winning-2k").state in (CompiledState.BUILDING, CompiledState.READY)
    assert store.wait("winning-2k", timeout=600).state is CompiledState.READY
    second = plan_recipe(provider, store)
    assert second.compiled_path == store.status("winning-2k").path
    assert_identical(reference_assignment(), second.assignment())
    assert store.to_dict()["circuits"]["winning-2k"]["info"]["counts"]["num_constraints"] == 90_883


def test_compiled_circuit_of_the_blank_circuit_is_what_the_store_builds(param_cache: Path) -> None:
    """The store's build is compile_circuit of the registry's blank circuit, byte for byte."""
    from cuzk.circuits.filecoin.compound import blank_circuit

    path = CompiledStore(param_cache / "compiled").build("wpost-2k")
    direct = compile_circuit(blank_circuit("wpost-2k"), "wpost-2k")
    assert load_compiled(path).fingerprint == direct.fingerprint


@pytest.mark.slow
def test_live_daemon_proves_through_a_compiled_circuit(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
                                                       ) -> None:
    """End to end: a daemon whose param_cache holds a compiled winning-2k proves through it (its
    synthesis process loads the file) and the proof verifies; with a compiled file whose R1CS is
    wrong, the synthesis process says so in the log and the proof, made the old way, still verifies."""
    from fixture_params import official_params
    from server.conftest import start_daemon

    from cuzk.circuits.filecoin.compound_post import verify_winning_post
    from cuzk.groth16.formats.params_file import read_vk
    from cuzk.server._gen import proving_pb2 as pb

    params = tmp_path_factory.mktemp("compiled-winning-params")
    official_params(params, "winning-2k", 11)
    daemon = start_daemon(tmp_path / "daemon", params)
    cache = tmp_path / "daemon" / "params"
    store = CompiledStore(cache / "compiled")
    path = store.build("winning-2k")
    vk = read_vk(cache / parameter_file_name(CircuitKind.WINNING, SIZE, "vk"))
    def prove(request_id: str) -> bytes:
        result = submit_winning(daemon, request_id)
        assert result.status == pb.AwaitProofResponse.COMPLETED, result.error_message
        return result.proof

    try:
        proof = prove("compiled-1")
        assert verify_winning_post(vk, proof, registered_proof=0, randomness=RANDOMNESS,
                                   prover_id=prover_id_from_miner(MINER), replicas={11: sample_sector(SIZE, 5).comm_r})
        assert "not used" not in daemon.log()
        good = load_compiled(path)
        table = np.array(good.coeff_table)
        table[5] = table[6]
        write_compiled(dataclasses.replace(good, coeff_table=table, fingerprint=""), path)
        proof = prove("compiled-2")
        assert verify_winning_post(vk, proof, registered_proof=0, randomness=RANDOMNESS,
                                   prover_id=prover_id_from_miner(MINER), replicas={11: sample_sector(SIZE, 5).comm_r})
        assert "constraints are not satisfied by the witness" in daemon.log()
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()


# -- sparse products in the prover (`synthesis.sparse_products = "prover"`) --------------------------


def test_prover_products_hand_over_the_witness_alone(param_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recipe returns inputs and aux only (no products computed in the synthesis process); the
    shared-memory hand-off carries them with the compiled circuit's path; the prover's backend
    (here the CPU one) computes the same a, b, c."""
    from cuzk.backends.cpu import CpuBackend
    from cuzk.engine.synthesis import CompiledWitness, export_assignment
    from cuzk.groth16.assignment import Assignment

    path = CompiledStore(param_cache / "compiled").build("winning-2k")
    recipe = plan_recipe(WinningPostProvider(param_cache), sparse_products="prover")
    assert recipe.sparse_products == "prover"

    def no_products(*args: object, **kwargs: object) -> None:
        raise AssertionError("the synthesis process computed the sparse products")

    monkeypatch.setattr(Assignment, "from_compiled", no_products)
    witness = recipe.assignment()
    monkeypatch.undo()
    assert isinstance(witness, CompiledWitness) and witness.compiled_path == str(path)
    ref = reference_assignment()
    assert np.array_equal(witness.inputs, ref.inputs) and np.array_equal(witness.aux, ref.aux)
    assert witness.num_constraints == ref.num_constraints
    shared = export_assignment(witness)
    try:
        assert shared.compiled_path == str(path) and shared.num_constraints == ref.num_constraints
        assert {spec.name for spec in shared.arrays} == {"inputs", "aux"}
        with shared.attach() as att:
            got = att.assignment
            assert isinstance(got, CompiledWitness) and np.array_equal(got.aux, ref.aux)
            evaluated = Assignment.from_compiled(load_compiled(path), (got.inputs, got.aux))
            assert_identical(ref, evaluated)
    finally:
        shared.unlink()
    assert hasattr(CpuBackend, "prove_compiled")
    # In a synthesis process the PoSt witness is generated in a shared-memory segment, passed on as is.
    from cuzk.engine.synthesis import WitnessSegment

    made: list[WitnessSegment] = []
    in_place = recipe.assignment_into(lambda i, a: made.append(WitnessSegment(i, a)) or made[-1])
    assert len(made) == 1 and in_place.segment is made[0] and np.array_equal(in_place.aux, ref.aux)
    shared = export_assignment(in_place)
    try:
        assert shared.shm_name == made[0]._shm.name
    finally:
        shared.unlink()


def test_sparse_products_setting() -> None:
    from cuzk.config import ConfigError, config_from_dict
    from cuzk.engine.devices import DeviceSpec, sparse_products_where

    cuda, cpu = DeviceSpec(0, "cuda"), DeviceSpec(0, "cpu")
    assert sparse_products_where("auto", [cuda, DeviceSpec(1, "cuda")]) == "prover"
    assert sparse_products_where("auto", [cpu]) == "synthesis"
    assert sparse_products_where("auto", []) == "synthesis"
    assert sparse_products_where("prover", [cpu]) == "prover"
    assert sparse_products_where("synthesis", [cuda]) == "synthesis"
    assert config_from_dict({"synthesis": {"sparse_products": "prover"}}).synthesis.sparse_products == "prover"
    with pytest.raises(ConfigError, match="sparse_products"):
        config_from_dict({"synthesis": {"sparse_products": "gpu"}})


@pytest.mark.slow
def test_live_daemon_computes_the_products_in_the_prover(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
                                                        ) -> None:
    """A daemon with `sparse_products = "prover"` (on the CPU backend) proves through the compiled
    circuit and the proof verifies; a compiled file with a wrong R1CS now fails the job in the
    prover's row check, naming the problem, instead of falling back."""
    from fixture_params import official_params
    from server.conftest import start_daemon

    from cuzk.circuits.filecoin.compound_post import verify_winning_post
    from cuzk.groth16.formats.params_file import read_vk
    from cuzk.server._gen import proving_pb2 as pb

    params = tmp_path_factory.mktemp("compiled-winning-params-prover")
    official_params(params, "winning-2k", 11)
    daemon = start_daemon(tmp_path / "daemon", params, synthesis={"sparse_products": "prover"})
    cache = tmp_path / "daemon" / "params"
    path = CompiledStore(cache / "compiled").build("winning-2k")
    vk = read_vk(cache / parameter_file_name(CircuitKind.WINNING, SIZE, "vk"))
    def prove(request_id: str) -> pb.AwaitProofResponse:
        return submit_winning(daemon, request_id)

    try:
        result = prove("prover-1")
        assert result.status == pb.AwaitProofResponse.COMPLETED, result.error_message
        assert verify_winning_post(vk, result.proof, registered_proof=0, randomness=RANDOMNESS,
                                   prover_id=prover_id_from_miner(MINER), replicas={11: sample_sector(SIZE, 5).comm_r})
        good = load_compiled(path)
        table = np.array(good.coeff_table)
        table[5] = table[6]
        write_compiled(dataclasses.replace(good, coeff_table=table, fingerprint=""), path)
        result = prove("prover-2")
        assert result.status == pb.AwaitProofResponse.FAILED
        assert "constraints are not satisfied by the witness" in result.error_message
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()


@pytest.mark.slow
def test_preload_verifies_the_compiled_circuit_before_ready(tmp_path: Path,
                                                             tmp_path_factory: pytest.TempPathFactory) -> None:
    """With the products on the prover and `srs.preload`, the device process verifies (and with a
    GPU, uploads) the ready compiled circuit as it makes the key hot, before the daemon says ready,
    rather than during the first proof (PoRep-32GiB: ~15 s of digests); the proof still completes."""
    from fixture_params import official_params
    from server.conftest import start_daemon

    from cuzk.server._gen import proving_pb2 as pb

    params = tmp_path_factory.mktemp("compiled-winning-params-preload")
    official_params(params, "winning-2k", 11)
    CompiledStore(tmp_path / "daemon" / "params" / "compiled").build("winning-2k")  # ready before the start
    daemon = start_daemon(tmp_path / "daemon", params, synthesis={"sparse_products": "prover"},
                          srs={"preload": ["winning-2k"]})
    try:
        lines = daemon.log().splitlines()
        verified = [i for i, line in enumerate(lines) if "compiled circuit winning-2k verified with its key" in line]
        preloaded = [i for i, line in enumerate(lines) if "srs.preload: winning-2k" in line]
        assert verified and preloaded and verified[0] < preloaded[0], daemon.log()
        result = submit_winning(daemon, "preloaded-1")
        assert result.status == pb.AwaitProofResponse.COMPLETED, result.error_message
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()
