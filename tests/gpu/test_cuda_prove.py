"""Whole proofs on the CudaBackend: equal to the CPU backend's for fixed r, s, and verifying."""

from __future__ import annotations

import random

import pytest

from cuzk.backends.cpu import CpuBackend
from cuzk.circuits.registry import lookup
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.synthesis import synthesize_for_proving
from cuzk.groth16.verifier import verify_proof

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def backend(needs_gpu):
    from cuzk.backends.cuda import CudaBackend

    return CudaBackend(0)


def _assignment(circuit_id: str, seed: int) -> Assignment:
    return Assignment.from_proving_assignment(
        synthesize_for_proving(lookup(circuit_id).example(random.Random(seed)), check=True))


@pytest.mark.parametrize("fixture", ["mimc_params", "bits_params"])
def test_proof_equals_cpu_and_verifies(backend, request, fixture: str) -> None:
    params = request.getfixturevalue(fixture)
    asg = _assignment(params.circuit_id, 21)
    timings: dict[str, float] = {}
    proof = backend.prove(params.pk, asg, r=12345, s=67890, timings=timings)
    assert proof == CpuBackend().prove(params.pk, asg, r=12345, s=67890)
    assert verify_proof(params.pk.vk, proof, asg.public_inputs())
    for key in ("h", "msm_h", "msm_l", "msm_a", "msm_b_g1", "msm_b_g2", "select", "assemble", "h2d_abc",
                "h2d_witness"):
        assert key in timings and timings[key] >= 0


def test_random_proofs_verify_and_keys_load_once(backend, mimc_params) -> None:
    pk = mimc_params.pk
    backend.load_key(pk)
    assert all(backend.resident(pk).values())
    asg = _assignment(mimc_params.circuit_id, 22)
    p1, p2 = backend.prove(pk, asg), backend.prove(pk, asg)
    assert p1 != p2
    assert verify_proof(pk.vk, p1, asg.public_inputs()) and verify_proof(pk.vk, p2, asg.public_inputs())
    info = backend.devices()[0]
    assert info.kind == "cuda" and info.memory_total and info.extra["current_job"] == ""
    backend.unload_key(pk)
    assert not any(backend.resident(pk).values())


def test_streamed_bases_give_the_same_proof(backend, bits_params, monkeypatch) -> None:
    """The fallback when bases do not fit: every MSM uploads its bases in chunks."""
    pk = bits_params.pk
    backend.unload_key(pk)
    monkeypatch.setattr(backend.plan, "fits", lambda nbytes, reserve=0: False)
    asg = _assignment(bits_params.circuit_id, 23)
    streamed = backend.prove(pk, asg, r=3, s=4)
    assert not any(backend.resident(pk).values())
    monkeypatch.undo()
    backend.unload_key(pk)
    assert backend.prove(pk, asg, r=3, s=4) == streamed
    assert verify_proof(pk.vk, streamed, asg.public_inputs())
