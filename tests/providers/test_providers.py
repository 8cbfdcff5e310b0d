"""Circuit providers: test-circuit requests, and the submit-time checks of the Filecoin kinds."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import providers.filecoin.test_filecoin_providers as fc
import pytest

from cuzk.circuits.registry import lookup
from cuzk.engine.jobs import Priority, ProofKind, ProofRequest
from cuzk.engine.providers import InvalidRequestError
from cuzk.errors import SynthesisError
from cuzk.filecoin.sizes import parameter_file_name, parse_circuit_id
from cuzk.groth16.formats.params_file import read_params
from cuzk.groth16.verifier import verify_proof
from cuzk.providers import build_providers
from cuzk.providers.debug import DebugCircuitRecipe, debug_circuit_shape, debug_params_path
from cuzk.providers.fields import SubmitFields, submit_request
from cuzk.server._gen import proving_pb2 as pb


def request(kind: ProofKind = ProofKind.TEST, payload: object = None, **fields: object) -> ProofRequest:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode() if payload is not None else b""
    return submit_request("r1", kind, Priority.NORMAL, vanilla_proof=raw, **fields)  # type: ignore[arg-type]


def _replace_name(c1_json: bytes, name: str) -> bytes:
    return re.sub(rb'"registered_proof":"[^"]*"', b'"registered_proof":"' + name.encode() + b'"', c1_json)


def c1_json() -> bytes:
    return fc.c1_2k().to_json().encode()


def c1_bin() -> bytes:
    return fc.c1_2k().to_bincode()


def win() -> bytes:
    return fc.winning_vanilla()[0]


def snap() -> bytes:
    return fc.snap_update()[1][0]


def wrapper(**fields: int) -> bytes:
    return fc.curio_wrapper(c1_json(), **fields)


def _filecoin_cases() -> list[tuple[str, Callable[[], ProofRequest], str]]:
    """(id, request factory, expected message) for requests refused at submit. Factories, so that
    collection does not build the 2KiB test sectors."""
    return [
        # PoRep: payload form, base64, wrapper fields, agreement of proof type, sizes and sector number
        ("porep-empty", lambda: fc.porep_request(b""), "vanilla_proof is empty"),
        ("porep-list", lambda: fc.porep_request(vanilla_proofs=[b"x"]), "vanilla_proofs must be empty"),
        ("porep-base64", lambda: fc.porep_request(b'{"SectorNum":7,"Phase1Out":"not base64!","SectorSize":2048}'),
         r"Phase1Out is not valid base64"),
        ("porep-not-json", lambda: fc.porep_request(b'{"Phase1Out": '), "vanilla_proof is not valid JSON"),
        ("porep-json-other", lambda: fc.porep_request(b'{"colour": "red"}'), "neither Curio's"),
        ("porep-no-size", lambda: fc.porep_request(json.dumps({"SectorNum": 7, "Phase1Out": "e30="}).encode()),
         "wrapper lacks 'SectorSize'"),
        ("porep-wrapper-size", lambda: fc.porep_request(wrapper(sector_size=32 << 30)),
         "the wrapper's SectorSize 34359738368 disagrees with the C1 output's StackedDrg2KiBV1_1"),
        ("porep-registered", lambda: fc.porep_request(registered_proof=8),
         r"registered_proof 8 \(StackedDrg32GiBV1_1\) disagrees with the C1 output's StackedDrg2KiBV1_1 \(5\)"),
        ("porep-sector-size", lambda: fc.porep_request(sector_size=32 << 30),
         "sector_size 34359738368 disagrees with StackedDrg2KiBV1_1, a 2KiB proof"),
        ("porep-sector-number", lambda: fc.porep_request(sector_number=8),
         "sector_number 8 disagrees with the wrapper's SectorNum 7"),
        ("porep-unknown-proof", lambda: fc.porep_request(_replace_name(c1_json(), "StackedDrg3KiBV1")),
         "registered_proof 'StackedDrg3KiBV1' is not a RegisteredSealProof"),
        ("porep-ni", lambda: fc.porep_request(_replace_name(c1_json(), "StackedDrg2KiBV1_2_Feat_NonInteractivePoRep"),
                                              registered_proof=0),
         "SnarkPack aggregate"),
        ("porep-bincode-truncated", lambda: fc.porep_request(c1_bin()[:-1]),
         "neither JSON nor a bincode C1 output of StackedDrg2KiBV1_1 .* exactly 28248 bytes .* got 28247 bytes"),
        ("porep-bincode-proof", lambda: fc.porep_request(c1_bin(), registered_proof=99),
         "registered_proof must be a RegisteredSealProof id"),
        ("porep-bincode-other-size", lambda: fc.porep_request(c1_bin(), registered_proof=8),
         "bincode C1 output of StackedDrg32GiBV1_1 .* exactly 11014808 bytes .* got 28248 bytes .*counts 1, 2"),
        # WinningPoSt
        ("winning-window-proof", lambda: fc.winning_request(registered_proof=10),
         r"registered_proof 10 \(StackedDrgWindow2KiBV1_2\) is a WindowPoSt proof; WINNING_POST takes 0-4"),
        ("winning-unknown-proof", lambda: fc.winning_request(registered_proof=99),
         "registered_proof 99 is not a RegisteredPoStProof"),
        ("winning-sector-size", lambda: fc.winning_request(sector_size=8 << 20), "sector_size 8388608 disagrees"),
        ("winning-no-randomness", lambda: fc.winning_request(randomness=b""), "randomness is required"),
        ("winning-short-randomness", lambda: fc.winning_request(randomness=bytes(31)),
         "randomness must be 32 bytes, got 31"),
        ("winning-randomness-not-fr", lambda: fc.winning_request(randomness=b"\xff" * 32),
         "randomness is not a canonical field element"),
        ("winning-truncated", lambda: fc.winning_request(vanilla_proofs=[win()[:-5]]),
         r"vanilla_proofs\[0\] is 36811 bytes; a bincode FallbackPoStSectorProof .* exactly 36816 bytes \(truncated"),
        ("winning-two", lambda: fc.winning_request(vanilla_proofs=[win(), win()]),
         r"holds 2 FallbackPoStSectorProof\(s\), expected exactly 1"),
        ("winning-single-field", lambda: fc.winning_request(vanilla_proof=win(), vanilla_proofs=[]),
         "vanilla_proof must be empty"),
        # WindowPoSt
        ("window-winning-proof", lambda: fc.window_request(registered_proof=0), "is a WinningPoSt proof"),
        ("window-order", lambda: fc.window_request(vanilla_proofs=list(reversed(fc.window_vanilla()))),
         "sectors out of order .* strictly ascending"),
        ("window-too-many", lambda: fc.window_request(vanilla_proofs=[*fc.window_vanilla(), fc.window_vanilla()[0]]),
         "expected 1 to 2"),
        ("window-empty", lambda: fc.window_request(vanilla_proofs=[]), "expected 1 to 2"),
        # SnapDeals
        ("snap-proof", lambda: fc.snap_request(registered_proof=5),
         "registered_proof 5 is not a RegisteredUpdateProof"),
        ("snap-missing-commitment", lambda: fc.snap_request(comm_r_old=b""), "comm_r_old is required"),
        ("snap-short-commitment", lambda: fc.snap_request(comm_d_new=bytes(31)), "comm_d_new must be 32 bytes"),
        ("snap-truncated", lambda: fc.snap_request(vanilla_proofs=[snap()[:100]]),
         r"vanilla_proofs\[0\] is 100 bytes; a bincode PartitionProof"),
        ("snap-count", lambda: fc.snap_request(vanilla_proofs=[snap(), snap()]), "expected exactly 1"),
    ]


@pytest.mark.parametrize(("make", "message"), [c[1:] for c in _filecoin_cases()], ids=[c[0] for c in _filecoin_cases()])
def test_filecoin_requests_are_checked_at_submit(make: Callable[[], ProofRequest], message: str) -> None:
    req = make()
    provider = build_providers("/nonexistent", test_circuits=False).for_request(req)
    with pytest.raises(InvalidRequestError, match=f"^{req.proof_kind.proto_name}: .*{message}"):
        provider.circuit_id(req)


@pytest.mark.parametrize(("make", "circuit_id"), [
    (fc.porep_request, "porep-2k"), (fc.winning_request, "winning-2k"), (fc.window_request, "wpost-2k"),
    (fc.snap_request, "snap-2k"),
    (lambda: fc.porep_request(fc.c1_2k().to_json().encode(), registered_proof=0, sector_size=0), "porep-2k"),
    (lambda: fc.window_request(registered_proof=5, vanilla_proofs=list(fc.window_vanilla(5)), sector_size=0),
     "wpost-2k"),
])
def test_well_formed_filecoin_requests_name_their_circuit(make: Callable[[], ProofRequest], circuit_id: str) -> None:
    req = make()
    registry = build_providers("/nonexistent", test_circuits=False)
    assert registry.for_request(req).circuit_id(req) == circuit_id


def test_each_provider_names_the_default_priority_of_its_kinds(tmp_path: Path) -> None:
    registry = build_providers(str(tmp_path), test_circuits=True)
    assert {kind: registry.for_kind(kind).default_priority for kind in ProofKind} == {
        ProofKind.WINNING_POST: Priority.CRITICAL, ProofKind.WINDOW_POST_PARTITION: Priority.HIGH,
        ProofKind.POREP_SEAL_COMMIT: Priority.NORMAL, ProofKind.SNAP_DEALS_UPDATE: Priority.NORMAL,
        ProofKind.TEST: Priority.NORMAL}


def test_the_provider_makes_the_payload_of_a_message_and_reads_back_its_encoding(tmp_path: Path) -> None:
    registry = build_providers(str(tmp_path), test_circuits=True)
    msg = pb.SubmitProofRequest(request_id="w", proof_kind=4, registered_proof=0, vanilla_proofs=[b"v" * 9],
                                randomness=bytes(32), miner_id=1000, sector_number=5)
    payload = registry.payload_from_message(ProofKind.WINNING_POST, msg)
    assert payload == SubmitFields(ProofKind.WINNING_POST, vanilla_proofs=[b"v" * 9], randomness=bytes(32),
                                   miner_id=1000, sector_number=5)
    assert payload.nbytes() == 9
    assert registry.decode_payload(ProofKind.WINNING_POST, payload.encode()) == payload
    with pytest.raises(ValueError, match="of proof kind 4, not 1"):
        registry.decode_payload(ProofKind.POREP_SEAL_COMMIT, payload.encode())
    with pytest.raises(InvalidRequestError, match="comm_d_new must be 32 bytes, got 31"):
        registry.payload_from_message(ProofKind.SNAP_DEALS_UPDATE, pb.SubmitProofRequest(comm_d_new=bytes(31)))
    payload.release()
    assert payload.nbytes() == 0 and payload.randomness == bytes(32)


def test_test_circuits_are_refused_unless_enabled() -> None:
    registry = build_providers("/nonexistent", test_circuits=False)
    with pytest.raises(InvalidRequestError, match=r"invalid proof_kind: 0 .*test_circuits = false"):
        registry.for_request(request(payload={"test_circuit": "mimc-3"}))
    with pytest.raises(InvalidRequestError, match="unknown circuit id 'mimc-3'"):
        registry.srs_source("mimc-3")


def test_the_default_providers_follow_the_config(tmp_path: Path) -> None:
    """`default_providers(config)`: the registry a daemon of `config` serves; the Filecoin providers'
    circuits may be compiled (the engine owns that path), the test circuits' are not."""
    from cuzk.config import config_from_dict
    from cuzk.providers import default_providers

    config = config_from_dict({"srs": {"param_cache": str(tmp_path)}, "debug": {"test_circuits": True}})
    registry = default_providers(config)
    assert registry.test_circuits_enabled and "test-circuits" in registry.names()
    filecoin = [p for p in registry.providers if p.name.startswith("filecoin-")]
    assert len(filecoin) == 4
    assert all(p.compiled_circuits and p.param_cache == tmp_path for p in filecoin)
    assert not registry.for_kind(ProofKind.TEST).compiled_circuits
    assert filecoin[0].build_size("porep-32g") is not None and filecoin[0].build_size("mimc-3") is None


def test_synthesis_warm_up_calls_come_from_the_registry_and_its_providers() -> None:
    """The mimc-3 warm-up first (whether test circuits are on or not), then the Filecoin witness
    generators' once, although four providers name it; each call resolves in a worker."""
    from cuzk.engine.procs import resolve_call

    for test_circuits in (False, True):
        calls = build_providers("/p", test_circuits=test_circuits).warm_up_calls()
        assert calls == [("cuzk.providers.debug:warm_up_synthesis", ()),
                         ("cuzk.providers.filecoin.provider:warm_up_witness_generators", ())]
        assert all(callable(resolve_call(ref)) for ref, _ in calls)


@pytest.mark.parametrize(("circuit_id", "message"), [
    ("banana", "unknown circuit id 'banana'"), ("", "circuit_id is empty"), ("mimc-40", "unknown circuit id"),
    ("porep-16g", "unknown circuit id 'porep-16g'"), ("winning-2K", "unknown circuit id"),
])
def test_srs_ids(circuit_id: str, message: str) -> None:
    registry = build_providers("/params", test_circuits=True)
    with pytest.raises(InvalidRequestError, match=message):
        registry.srs_source(circuit_id)
    source = registry.srs_source("mimc-8")
    assert source.path == Path("/params/cuzk-test-mimc-8.params") and source.insecure and source.generator


@pytest.mark.parametrize("circuit_id", [f"{kind}-{size}" for kind in ("porep", "winning", "wpost", "snap")
                                        for size in ("2k", "8m", "512m", "32g", "64g")])
def test_filecoin_parameters_are_the_official_files_and_never_generated(circuit_id: str) -> None:
    registry = build_providers("/params", test_circuits=False)
    source = registry.srs_source(circuit_id)
    kind, size = parse_circuit_id(circuit_id)
    assert source.path == Path("/params") / parameter_file_name(kind, size)
    assert source.path.name == lookup(circuit_id).params_file_name and source.path.name.startswith("v28-")
    assert source.generator is None and not source.insecure
    assert registry.provider_for_circuit(circuit_id).srs_source(circuit_id) == source


@pytest.mark.parametrize(("payload", "message"), [
    (b"not json", "not JSON"),
    ({"circuit": "mimc-3"}, "must be a JSON object with a \"test_circuit\" key"),
    ({"test_circuit": "mimc-3", "colour": 1}, r"unknown field\(s\) colour"),
    ({"test_circuit": "sha-3"}, "unknown circuit 'sha-3'"),
    ({"test_circuit": "porep-2k"}, "test circuits are mimc-K and bits-N"),
    ({"test_circuit": "mimc-20"}, "larger than test circuits may be"),
    ({"test_circuit": "mimc-3", "partitions": 0}, r"partitions must be an integer in \[1, 64\]"),
    ({"test_circuit": "mimc-3", "partitions": 2, "fail_partition": 2},
     r"fail_partition must be an integer in \[0, 1\]"),
    ({"test_circuit": "mimc-3", "fail_mode": "explode"}, "fail_mode must be one of"),
    ({"test_circuit": "mimc-3", "seed": "7"}, "seed must be an integer"),
    ({"test_circuit": "mimc-3", "batchable": 1}, "batchable must be true or false"),
    ({"test_circuit": 3}, "test_circuit must be a string"),
])
def test_bad_test_payloads_are_explained(payload: object, message: str) -> None:
    provider = build_providers("/p", test_circuits=True).for_request(request(payload=payload))
    with pytest.raises(InvalidRequestError, match=message):
        provider.circuit_id(request(payload=payload))


def test_vanilla_proofs_are_refused_for_test_circuits() -> None:
    provider = build_providers("/p", test_circuits=True).for_request(request())
    with pytest.raises(InvalidRequestError, match="vanilla_proofs must be empty"):
        provider.circuit_id(request(payload={"test_circuit": "mimc-3"}, vanilla_proofs=[b"x"]))


def test_plan_gives_recipes_whose_proofs_verify(debug_params: Path) -> None:
    from cuzk.backends import CpuBackend

    provider = build_providers(str(debug_params), test_circuits=True).for_request(request())
    req = request(payload={"test_circuit": "mimc-3", "partitions": 3, "seed": 5, "fail_partition": 2,
                           "fail_mode": "unverifiable", "partition_memory": 1 << 20})
    plan = provider.plan(req)
    assert plan.circuit_id == "mimc-3" and [p.index for p in plan.partitions] == [0, 1, 2]
    assert plan.min_partition_bytes == 1 << 20 and provider.batchable(req)
    pk = read_params(debug_params_path(debug_params, "mimc-3"))
    backend = CpuBackend()
    verdicts = []
    for part in plan.partitions:
        asg = part.recipe.assignment()
        verdicts.append(verify_proof(pk.vk, backend.prove(pk, asg), part.public_inputs))
    assert verdicts == [True, True, False]  # the last one's public inputs were altered on purpose
    assert plan.partitions[0].public_inputs != plan.partitions[1].public_inputs  # seeds differ per partition


def test_injected_failures_outside_a_worker() -> None:
    with pytest.raises(SynthesisError, match="injected synthesis failure"):
        DebugCircuitRecipe("mimc-3", 1, "error", 0, "x").assignment()
    with pytest.raises(SynthesisError, match="refused outside a worker process"):
        DebugCircuitRecipe("mimc-3", 1, "crash", 0, "x").assignment()


def test_shape_call() -> None:
    provider = build_providers("/p", test_circuits=True).for_request(request())
    ref, args = provider.shape_call("mimc-4")
    assert ref == "cuzk.providers.debug:debug_circuit_shape" and debug_circuit_shape(*args).num_constraints == 16
