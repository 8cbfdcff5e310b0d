"""Circuit providers: test-circuit requests, and clear refusals for everything no provider handles yet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuzk.engine.jobs import Priority, ProofKind, ProofRequest
from cuzk.engine.providers import (
    DebugCircuitRecipe,
    InvalidRequestError,
    build_providers,
    debug_circuit_shape,
    debug_params_path,
)
from cuzk.errors import SynthesisError
from cuzk.groth16.params_file import read_params
from cuzk.groth16.verifier import verify_proof


def request(kind: ProofKind = ProofKind.TEST, payload: object = None, **fields: object) -> ProofRequest:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode() if payload is not None else b""
    return ProofRequest("r1", kind, Priority.NORMAL, vanilla_proof=raw, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", [ProofKind.POREP_SEAL_COMMIT, ProofKind.SNAP_DEALS_UPDATE,
                                  ProofKind.WINDOW_POST_PARTITION, ProofKind.WINNING_POST])
def test_filecoin_kinds_have_no_provider_yet(kind: ProofKind) -> None:
    registry = build_providers("/nonexistent", test_circuits=True)
    with pytest.raises(InvalidRequestError, match=f"no circuit provider for {kind.name} .* yet"):
        registry.for_request(request(kind))


def test_test_circuits_are_refused_unless_enabled() -> None:
    registry = build_providers("/nonexistent", test_circuits=False)
    with pytest.raises(InvalidRequestError, match=r"invalid proof_kind: 0 .*test_circuits = false"):
        registry.for_request(request(payload={"test_circuit": "mimc-3"}))
    with pytest.raises(InvalidRequestError, match="unknown circuit id 'mimc-3'"):
        registry.srs_source("mimc-3")


@pytest.mark.parametrize(("circuit_id", "message"), [
    ("porep-32g", "no circuit provider for porep-32g yet"), ("winning-2k", "no circuit provider for winning-2k yet"),
    ("banana", "unknown circuit id 'banana'"), ("", "circuit_id is empty"), ("mimc-40", "unknown circuit id"),
    ("snap-32g", "no circuit provider for snap-32g yet"),
])
def test_srs_ids(circuit_id: str, message: str) -> None:
    registry = build_providers("/params", test_circuits=True)
    with pytest.raises(InvalidRequestError, match=message):
        registry.srs_source(circuit_id)
    source = registry.srs_source("mimc-8")
    assert source.path == Path("/params/cuzk-test-mimc-8.params") and source.insecure and source.generator


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
    assert ref == "cuzk.engine.providers:debug_circuit_shape" and debug_circuit_shape(*args).num_constraints == 16
