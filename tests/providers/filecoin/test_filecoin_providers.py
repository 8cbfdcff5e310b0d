"""Filecoin providers: requests built as Curio builds them, planned into per-partition recipes whose
assignments expose the verifier's public inputs; shapes from .params headers; a live daemon proving
WinningPoSt-2KiB and PoRep-2KiB with the official file names."""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import pickle
import time
from pathlib import Path

import pytest
from fixture_params import official_params

from cuzk.circuits.filecoin.compound import blank_circuit, sample_randomness, sample_sector
from cuzk.circuits.filecoin.compound_porep import seal_public_inputs, verify_seal
from cuzk.circuits.filecoin.compound_post import fallback_post_public_inputs, verify_winning_post
from cuzk.circuits.filecoin.compound_snap import update_public_inputs
from cuzk.circuits.filecoin.shapes import KNOWN_SHAPES
from cuzk.circuits.filecoin.snap import EmptySectorUpdateConfig
from cuzk.engine.jobs import Priority, ProofKind, ProofRequest
from cuzk.engine.providers import InvalidRequestError, JobPlan, ProviderRegistry
from cuzk.filecoin.c1 import SealCommitPhase1Output
from cuzk.filecoin.codec import BincodeWriter
from cuzk.filecoin.merkle import MerkleProof, PathElement, TreeLayout
from cuzk.filecoin.porep import SealedSector, random_sector_data
from cuzk.filecoin.post import window_post_vanilla, winning_post_vanilla
from cuzk.filecoin.sizes import (
    ALL_SIZES,
    CircuitKind,
    SectorParams,
    parameter_file_name,
    post_proof,
    sector_params,
)
from cuzk.filecoin.snap import UpdatedSector, encode_update, partition_proof
from cuzk.filecoin.synthetic import generate_c1
from cuzk.groth16.formats.params_file import read_vk, scan_layout
from cuzk.groth16.synthesis import circuit_shape
from cuzk.providers import build_providers
from cuzk.providers.fields import fields_of, submit_request
from cuzk.providers.filecoin.payload import (
    c1_bincode_bytes,
    merkle_proof_bytes,
    post_sector_proof_bytes,
    prover_id_from_miner,
    snap_partition_proof_bytes,
)
from cuzk.providers.filecoin.provider import MissingParametersError, filecoin_circuit_shape, shape_from_layout
from cuzk.providers.filecoin.recipe import FilecoinPartitionRecipe
from cuzk.r1cs import CircuitShape
from cuzk.server._gen import proving_pb2 as pb

# -- requests as Curio builds them (2KiB test sectors) ---------------------------------------------------

MINER = 1000
SECTOR_NUMBER = 7
SIZE = sector_params("2KiB")
RANDOMNESS = sample_randomness(5)
WINNING_SECTOR = 11
WINDOW_SECTORS = (3, 4)


@functools.cache
def c1_2k() -> SealCommitPhase1Output:
    """A dense 2KiB C1 output of sector 7 of miner 1000 (StackedDrg2KiBV1_1)."""
    return generate_c1(SIZE, sparse=False, seed=3, prover_id=prover_id_from_miner(MINER), sector_id=SECTOR_NUMBER)


@functools.cache
def sector_2k() -> SealedSector:
    return sample_sector(SIZE, 5)


def curio_wrapper(c1_bytes: bytes, *, sector_number: int = SECTOR_NUMBER,
                  sector_size: int = SIZE.sector_bytes) -> bytes:
    """Curio's `wrapC1Output`: Go's json.Marshal of {SectorNum, Phase1Out []byte, SectorSize}."""
    return json.dumps({"SectorNum": sector_number, "Phase1Out": base64.b64encode(c1_bytes).decode(),
                       "SectorSize": sector_size}, separators=(",", ":")).encode()


def with_fields(req: ProofRequest, **fields: object) -> ProofRequest:
    """`req` with some of its fields changed: its id and priority, or those of its payload."""
    own = {name: fields.pop(name) for name in ("request_id", "priority") if name in fields}
    payload = dataclasses.replace(fields_of(req), **fields)  # type: ignore[arg-type]
    return dataclasses.replace(req, payload=payload, **own)  # type: ignore[arg-type]


def porep_request(payload: bytes | None = None, **fields: object) -> ProofRequest:
    c1 = c1_2k()
    req = submit_request(f"porep-{MINER}-{SECTOR_NUMBER}", ProofKind.POREP_SEAL_COMMIT, Priority.NORMAL,
                         sector_size=SIZE.sector_bytes, registered_proof=c1.registered_proof.id,
                         vanilla_proof=curio_wrapper(c1.to_json().encode()) if payload is None else payload,
                         sector_number=SECTOR_NUMBER, miner_id=MINER)
    return with_fields(req, **fields)


@functools.cache
def winning_vanilla() -> tuple[bytes, ...]:
    proofs = winning_post_vanilla(post_proof(0), {WINNING_SECTOR: sector_2k()}, RANDOMNESS, prover_id_from_miner(MINER))
    return tuple(p.to_bincode() for p in proofs)


def winning_request(**fields: object) -> ProofRequest:
    req = submit_request("winning-1", ProofKind.WINNING_POST, Priority.CRITICAL, sector_size=SIZE.sector_bytes,
                         registered_proof=0, vanilla_proofs=list(winning_vanilla()), randomness=RANDOMNESS,
                         miner_id=MINER)
    return with_fields(req, **fields)


@functools.cache
def window_vanilla(registered: int = 10) -> tuple[bytes, ...]:
    sector = sector_2k()
    proofs = window_post_vanilla(post_proof(registered), {s: sector for s in WINDOW_SECTORS}, RANDOMNESS)
    return tuple(p.to_bincode() for p in proofs)


def window_request(**fields: object) -> ProofRequest:
    req = submit_request("wdpost-1", ProofKind.WINDOW_POST_PARTITION, Priority.HIGH, sector_size=SIZE.sector_bytes,
                         registered_proof=10, vanilla_proofs=list(window_vanilla()), randomness=RANDOMNESS,
                         miner_id=MINER, partition_index=0)
    return with_fields(req, **fields)


@functools.cache
def snap_update() -> tuple[UpdatedSector, tuple[bytes, ...]]:
    update = encode_update(SIZE, sector_2k(), random_sector_data(SIZE.nodes, 9))
    return update, tuple(partition_proof(update, k).to_bincode() for k in range(SIZE.snap_partitions))


def snap_request(**fields: object) -> ProofRequest:
    update, proofs = snap_update()
    req = submit_request(f"snap-{MINER}-{SECTOR_NUMBER}", ProofKind.SNAP_DEALS_UPDATE, Priority.NORMAL,
                         sector_size=SIZE.sector_bytes, registered_proof=0, vanilla_proofs=list(proofs),
                         sector_number=SECTOR_NUMBER, miner_id=MINER, comm_r_old=update.comm_r_old,
                         comm_r_new=update.comm_r_new, comm_d_new=update.comm_d_new)
    return with_fields(req, **fields)


# -- parameter caches ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def placeholder_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Empty files under the official 2KiB names: planning only checks that the parameters exist."""
    root = tmp_path_factory.mktemp("fc-placeholders")
    for kind in CircuitKind:
        (root / parameter_file_name(kind, SIZE)).touch()
    return root


@pytest.fixture(scope="session")
def winning_params(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A param_cache holding insecure winning-2k parameters (~15 s)."""
    root = tmp_path_factory.mktemp("fc-winning-params")
    official_params(root, "winning-2k", 11)
    return root


def registry(cache: Path) -> ProviderRegistry:
    return build_providers(str(cache), test_circuits=False)


# -- sizes, ids ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("miner", "head"), [(0, b"\0"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"),
                                              (1000, b"\xe8\x07"), (2**64 - 1, b"\xff" * 9 + b"\x01")])
def test_prover_id_is_the_leb128_actor_id(miner: int, head: bytes) -> None:
    pid = prover_id_from_miner(miner)
    assert len(pid) == 32 and pid == head.ljust(32, b"\0")


@pytest.mark.parametrize("size", ALL_SIZES, ids=lambda s: s.name)
def test_bincode_sizes_are_exact_for_every_tree_shape(size: SectorParams) -> None:
    for layout in (TreeLayout.tree_r(size), TreeLayout.tree_d(size.nodes)):
        elements = [PathElement(tuple(bytes(32) for _ in range(arity - 1)), 0) for arity in layout.arities]
        b = layout.base_levels
        sub = tuple(elements[b:b + 1]) if layout.kind != "Single" else None
        top = tuple(elements[b + 1:b + 2]) if layout.kind == "Top" else None
        proof = MerkleProof(bytes(32), bytes(32), tuple(elements[:b]), sub, top)
        assert proof.kind == layout.kind
        w = BincodeWriter()
        proof.write_bincode(w)
        assert len(w.getvalue()) == merkle_proof_bytes(layout)


def test_bincode_sizes_match_real_vanilla_proofs() -> None:
    c1 = c1_2k()
    assert len(c1.to_bincode()) == c1_bincode_bytes(c1.registered_proof)
    assert all(len(v) == post_sector_proof_bytes(SIZE, 66) for v in winning_vanilla())
    assert all(len(v) == post_sector_proof_bytes(SIZE, 10) for v in window_vanilla())
    assert all(len(v) == snap_partition_proof_bytes(SIZE) for v in snap_update()[1])


# -- plans and recipes -----------------------------------------------------------------------------

def check_recipe(plan: JobPlan, k: int) -> None:
    """Partition k's recipe, run in-process, gives an Assignment exposing the plan's public inputs."""
    part = plan.partitions[k]
    recipe = pickle.loads(pickle.dumps(part.recipe))
    asg = recipe.assignment()
    assert asg.public_inputs() == part.public_inputs
    shape = KNOWN_SHAPES[plan.circuit_id]
    assert (asg.num_constraints, asg.inputs.shape[0], asg.aux.shape[0]) == (
        shape.num_constraints, shape.num_inputs, shape.num_aux)


@pytest.mark.slow
def test_porep_2k_plan_from_curio_wrapper(placeholder_cache: Path) -> None:
    c1 = c1_2k()
    req = porep_request()
    provider = registry(placeholder_cache).for_request(req)
    assert provider.circuit_id(req) == "porep-2k" and provider.batchable(req)
    plan = provider.plan(req)
    assert plan.circuit_id == "porep-2k" and [p.index for p in plan.partitions] == [0]
    expected = seal_public_inputs(c1.registered_proof, comm_r=c1.comm_r, comm_d=c1.comm_d,
                                  prover_id=prover_id_from_miner(MINER), sector_id=SECTOR_NUMBER, ticket=c1.ticket,
                                  seed=c1.seed, k=0)
    assert plan.partitions[0].public_inputs == expected and plan.min_partition_bytes == 0
    recipe = plan.partitions[0].recipe
    assert isinstance(recipe, FilecoinPartitionRecipe)
    # the recipe carries the partition's circuit, not the C1: smaller than the C1 JSON itself
    assert len(pickle.dumps(recipe)) < len(c1.to_json()) / 3
    check_recipe(plan, 0)


@pytest.mark.parametrize("form", ["wrapper-bincode", "json", "bincode"])
def test_porep_payload_forms_plan_alike(placeholder_cache: Path, form: str) -> None:
    c1 = c1_2k()
    payload = {"wrapper-bincode": curio_wrapper(c1.to_bincode()), "json": c1.to_json().encode(),
               "bincode": c1.to_bincode()}[form]
    # the bare forms carry no SectorNum: sector_number alone says which sector
    req = porep_request(payload)
    reference = registry(placeholder_cache).for_request(porep_request()).plan(porep_request())
    plan = registry(placeholder_cache).for_request(req).plan(req)
    assert plan.circuit_id == "porep-2k"
    assert [p.public_inputs for p in plan.partitions] == [p.public_inputs for p in reference.partitions]
    assert pickle.dumps(plan.partitions[0].recipe.circuit) == pickle.dumps(reference.partitions[0].recipe.circuit)


def test_porep_sector_number_from_the_wrapper_when_the_request_leaves_it_zero(placeholder_cache: Path) -> None:
    provider = registry(placeholder_cache).for_request(porep_request())
    plan = provider.plan(porep_request(sector_number=0))
    assert plan.partitions[0].public_inputs == provider.plan(porep_request()).partitions[0].public_inputs


def test_porep_c1_of_another_miner_is_refused_before_synthesis(placeholder_cache: Path) -> None:
    for req, who in ((porep_request(miner_id=MINER + 1), f"miner {MINER + 1}"),
                     (porep_request(sector_number=8, vanilla_proof=curio_wrapper(c1_2k().to_json().encode(),
                                                                                  sector_number=8)), "sector 8")):
        provider = registry(placeholder_cache).for_request(req)
        assert provider.circuit_id(req) == "porep-2k"  # nothing wrong with the request's form
        with pytest.raises(InvalidRequestError, match=f"replica_id is not the one of .*{who}.*another miner or sector"):
            provider.plan(req)


def test_winning_post_2k_plan_and_recipe(placeholder_cache: Path) -> None:
    req = winning_request()
    provider = registry(placeholder_cache).for_request(req)
    assert provider.circuit_id(req) == "winning-2k" and not provider.batchable(req)
    plan = provider.plan(req)
    sector = sector_2k()
    expected = fallback_post_public_inputs(post_proof(0), randomness=RANDOMNESS,
                                           sectors=[(WINNING_SECTOR, sector.comm_r)] * 66, k=0)
    assert [p.public_inputs for p in plan.partitions] == [expected]
    check_recipe(plan, 0)


def test_window_post_2k_plan_and_recipe(placeholder_cache: Path) -> None:
    req = window_request()
    plan = registry(placeholder_cache).for_request(req).plan(req)
    comm_r = sector_2k().comm_r
    expected = fallback_post_public_inputs(post_proof(10), randomness=RANDOMNESS,
                                           sectors=[(s, comm_r) for s in WINDOW_SECTORS], k=0)
    assert plan.circuit_id == "wpost-2k" and [p.public_inputs for p in plan.partitions] == [expected]
    check_recipe(plan, 0)


@pytest.mark.parametrize(("floor", "deferred"), [(None, {}), (Priority.HIGH, {Priority.HIGH, Priority.CRITICAL}),
                                                 (Priority.LOW, set(Priority))])
def test_device_witness_follows_the_job_priority(placeholder_cache: Path, floor: Priority | None,
                                                 deferred: set[Priority], monkeypatch: pytest.MonkeyPatch) -> None:
    """A partition leaves its openings to the device when its job's priority reaches the floor the
    engine resolved (`device_witness_floor`: "deadlines" is HIGH); other jobs' witnesses stay whole."""
    from cuzk.engine.compiled_recipe import use_compiled
    from cuzk.engine.compiled_store import CompiledStore

    store = CompiledStore(placeholder_cache / "compiled")
    monkeypatch.setattr(store, "path_for_job", lambda circuit_id, size=None: "/stand-in.cuzk-r1cs")  # a ready file
    providers = build_providers(str(placeholder_cache), test_circuits=False)
    for priority in Priority:
        req = window_request(priority=priority)
        provider = providers.for_request(req)
        plan = provider.plan(req)
        assert use_compiled(plan, provider, store, req, sparse_products="prover", device_witness=floor)
        assert plan.partitions[0].recipe.device_witness is (priority in deferred), priority


def test_window_post_v1_challenges_follow_partition_index(placeholder_cache: Path) -> None:
    """StackedDrgWindow2KiBV1 (id 5) indexes challenges by the global sector position, so the same
    sectors proven as partition 1 are other challenges: vanilla proofs of partition 0 are refused."""
    req = window_request(registered_proof=5, vanilla_proofs=list(window_vanilla(5)))
    provider = registry(placeholder_cache).for_request(req)
    assert len(provider.plan(req).partitions) == 1
    with pytest.raises(InvalidRequestError, match=r"other leaves .*partition_index 1"):
        provider.plan(with_fields(req, partition_index=1))


def test_post_vanilla_of_other_randomness_is_refused(placeholder_cache: Path) -> None:
    other = sample_randomness(6)
    req = winning_request(randomness=other)
    with pytest.raises(InvalidRequestError, match="opens other leaves than the challenges derived from this random"):
        registry(placeholder_cache).for_request(req).plan(req)


@pytest.mark.parametrize(("byte", "message"), [
    (31, r"WINNING_POST: vanilla_proofs\[0\]: offset 60: .*root: not a canonical field element"),
    (0, "WINNING_POST: sector 11 challenge 0: inconsistent roots"),
])
def test_corrupted_vanilla_bytes_are_refused_at_planning(placeholder_cache: Path, byte: int, message: str) -> None:
    blob = bytearray(winning_vanilla()[0])
    blob[8 + 32 + 8 + 8 + 4 + byte] ^= 0xFF  # the first inclusion proof's root
    req = winning_request(vanilla_proofs=[bytes(blob)])
    provider = registry(placeholder_cache).for_request(req)
    assert provider.circuit_id(req) == "winning-2k"  # same length: only parsing can tell
    with pytest.raises(InvalidRequestError, match=message):
        provider.plan(req)


@pytest.mark.slow
def test_snap_2k_plan_and_recipe(placeholder_cache: Path) -> None:
    update, _ = snap_update()
    req = snap_request()
    provider = registry(placeholder_cache).for_request(req)
    assert provider.circuit_id(req) == "snap-2k" and provider.batchable(req)
    plan = provider.plan(req)
    config = EmptySectorUpdateConfig.for_sector_size(SIZE.sector_bytes)
    expected = [update_public_inputs(0, comm_r_old=update.comm_r_old, comm_d_new=update.comm_d_new,
                                     comm_r_new=update.comm_r_new, k=k) for k in range(config.partition_count)]
    assert [p.public_inputs for p in plan.partitions] == expected
    check_recipe(plan, 0)


def test_missing_parameters_fail_the_job_naming_the_file(tmp_path: Path) -> None:
    req = winning_request()
    provider = registry(tmp_path).for_request(req)
    assert provider.circuit_id(req) == "winning-2k"  # the request is fine
    name = parameter_file_name(CircuitKind.WINNING, SIZE)
    with pytest.raises(MissingParametersError, match=f"{tmp_path / name} does not exist .*never generated by cuzk"):
        provider.plan(req)


def test_a_recipe_refuses_a_witness_with_other_inputs(placeholder_cache: Path) -> None:
    from cuzk.circuits.filecoin.compound import PublicInputMismatchError

    part = registry(placeholder_cache).for_request(window_request()).plan(window_request()).partitions[0]
    bad = dataclasses.replace(part.recipe, public_inputs=(part.public_inputs[0] + 1, *part.public_inputs[1:]))
    with pytest.raises(PublicInputMismatchError, match=r"wpost-2k wdpost-1 partition 0: .*1 position\(s\)"):
        bad.assignment()


# -- shapes ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("circuit_id", ["winning-2k", "wpost-2k", "winning-8m", "wpost-8m", "winning-32g",
                                        "wpost-512m", "winning-64g"])
def test_known_shapes_are_the_circuits_shapes(circuit_id: str) -> None:
    assert KNOWN_SHAPES[circuit_id] == circuit_shape(blank_circuit(circuit_id))


def test_known_shapes_cover_every_filecoin_id() -> None:
    ids = {f"{k.value}-{s.short}" for k in CircuitKind for s in ALL_SIZES}
    assert set(KNOWN_SHAPES) == ids
    for cid, shape in KNOWN_SHAPES.items():
        assert 0 < shape.b_aux_density < shape.a_aux_density < shape.num_aux < shape.num_constraints * 1.02, cid
        assert shape.a_input_density == shape.num_inputs and shape.b_input_density == 1, cid
    for kind in CircuitKind:  # a larger sector never makes a smaller circuit
        sizes = [KNOWN_SHAPES[f"{kind.value}-{s.short}"].num_constraints for s in ALL_SIZES]
        assert sizes == sorted(sizes), kind
    # the counts rust-fil-proofs publishes (docs/circuits.md §6, §13), input rows added
    for cid, rows in (("porep-8m", 3_844_929), ("porep-512m", 4_423_433), ("porep-32g", 130_278_541),
                      ("porep-64g", 131_185_849)):
        assert KNOWN_SHAPES[cid].num_constraints == rows + KNOWN_SHAPES[cid].num_inputs, cid
    porep = KNOWN_SHAPES["porep-32g"]  # as the Rust daemon's pre-compiled evaluator extracted them
    assert (porep.num_aux, porep.a_aux_density, porep.b_aux_density) == (130_169_893, 129_753_292, 33_112_281)
    assert KNOWN_SHAPES["wpost-32g"].num_constraints == 125_279_217 + 25_840
    assert KNOWN_SHAPES["wpost-64g"].num_constraints == 129_887_900 + 25_301
    assert KNOWN_SHAPES["snap-32g"].num_constraints == 81_049_499 + 5


def test_shape_from_the_params_header(winning_params: Path) -> None:
    path = winning_params / parameter_file_name(CircuitKind.WINNING, SIZE)
    ref, args = registry(winning_params).provider_for_circuit("winning-2k").shape_call("winning-2k")
    assert ref == "cuzk.providers.filecoin.provider:filecoin_circuit_shape" and args == ("winning-2k", str(path))
    assert filecoin_circuit_shape(*args) == KNOWN_SHAPES["winning-2k"]
    # without the file: the known shape; with a header of another circuit: sized by its domain
    assert filecoin_circuit_shape("winning-2k", str(winning_params / "absent.params")) == KNOWN_SHAPES["winning-2k"]
    other = dataclasses.replace(KNOWN_SHAPES["winning-2k"], num_aux=1)
    shape = shape_from_layout(scan_layout(path), other)
    assert shape.num_constraints == 1 << 17 and shape.num_aux == KNOWN_SHAPES["winning-2k"].num_aux


def test_shape_without_the_file_needs_no_synthesis() -> None:
    """Asking for porep-32g's shape without its file answers at once (no 130M-row synthesis)."""
    start = time.perf_counter()
    shape = filecoin_circuit_shape("porep-32g", "/nonexistent/x.params")
    assert time.perf_counter() - start < 1 and isinstance(shape, CircuitShape)
    assert (shape.num_inputs, shape.num_aux) == (328, 130_169_893)


# -- a live daemon ---------------------------------------------------------------------------------

def curio_submit(req: ProofRequest) -> pb.SubmitProofRequest:
    """The SubmitProofRequest Curio's client sends for `req` (every field it sets)."""
    f = fields_of(req)
    return pb.SubmitProofRequest(
        request_id=req.request_id, proof_kind=int(req.proof_kind), priority=int(req.priority),
        sector_size=f.sector_size, registered_proof=f.registered_proof, vanilla_proof=f.vanilla_proof,
        vanilla_proofs=f.vanilla_proofs, sector_number=f.sector_number, miner_id=f.miner_id,
        randomness=f.randomness, partition_index=f.partition_index, comm_r_old=f.comm_r_old,
        comm_r_new=f.comm_r_new, comm_d_new=f.comm_d_new)


@pytest.mark.slow
def test_live_daemon_proves_winning_post_2k(tmp_path: Path, winning_params: Path) -> None:
    import grpc
    from server.conftest import start_daemon

    daemon = start_daemon(tmp_path / "daemon", winning_params)
    try:
        with daemon.client(timeout=30) as client:
            result = client.prove(curio_submit(winning_request(request_id="winning-e2e")), timeout=600)
            assert result.status == pb.AwaitProofResponse.COMPLETED, result.error_message
            assert result.circuit_id == "winning-2k" and len(result.proof) == 192
            vk = read_vk(winning_params / parameter_file_name(CircuitKind.WINNING, SIZE, "vk"))
            assert verify_winning_post(vk, result.proof, registered_proof=0, randomness=RANDOMNESS,
                                       prover_id=prover_id_from_miner(MINER),
                                       replicas={WINNING_SECTOR: sector_2k().comm_r})
            # parameters the daemon does not have: the job fails, PreloadSRS fails, both name the file
            missing = parameter_file_name(CircuitKind.WINDOW, SIZE)
            failed = client.prove(curio_submit(window_request(request_id="wdpost-missing")), timeout=120)
            assert failed.status == pb.AwaitProofResponse.FAILED and missing in failed.error_message
            with pytest.raises(grpc.RpcError) as err:
                client.preload("wpost-2k")
            assert missing in err.value.details()
            # a malformed request is refused at submit
            with pytest.raises(grpc.RpcError) as err:
                client.submit(curio_submit(winning_request(request_id="bad", registered_proof=10)))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "is a WindowPoSt proof" in err.value.details()
    finally:
        code = daemon.stop()
    assert code == 0, daemon.log()


@pytest.mark.slow
def test_live_daemon_proves_porep_2k(tmp_path: Path, porep_2k_params: Path) -> None:
    """PoRep-2KiB end to end through the daemon, on the parameters the compound tests share."""
    from server.conftest import start_daemon

    path = porep_2k_params
    generated = time.monotonic()
    daemon = start_daemon(tmp_path / "daemon", path.parent, memory={"total_budget": "16GiB"})
    try:
        with daemon.client(timeout=30) as client:
            c1 = c1_2k()
            result = client.prove(curio_submit(porep_request()), timeout=3600)
            assert result.status == pb.AwaitProofResponse.COMPLETED, result.error_message
            assert result.circuit_id == "porep-2k" and len(result.proof) == 192 * c1.registered_proof.partitions
            assert verify_seal(read_vk(path.with_suffix(".vk")), result.proof, comm_r=c1.comm_r, comm_d=c1.comm_d,
                               prover_id=prover_id_from_miner(MINER), sector_id=SECTOR_NUMBER, ticket=c1.ticket,
                               seed=c1.seed, registered_proof=c1.registered_proof)
    finally:
        code = daemon.stop()
    print(f"porep-2k: daemon start + proof {time.monotonic() - generated:.0f} s")
    assert code == 0, daemon.log()
