"""Groth16 end to end: our proofs verify with our verifier and with py_ecc; bad ones are rejected."""

from __future__ import annotations

import random

import pytest

from cuzk.circuits.registry import lookup
from cuzk.curve.points import G1Point, G2Point, Scalar
from cuzk.field.constants import R_MODULUS
from cuzk.groth16 import reference_verifier
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.formats.params_file import vk_to_bytes
from cuzk.groth16.keys import prepare_verifying_key
from cuzk.groth16.proof import Proof
from cuzk.groth16.prover import KeyMismatchError, prove
from cuzk.groth16.synthesis import synthesize_for_proving
from cuzk.groth16.verifier import PublicInputError, verify_proof, verify_proofs_batch


def _assignment(circuit_id: str, seed: int) -> Assignment:
    circuit = lookup(circuit_id).example(random.Random(seed))
    return Assignment.from_proving_assignment(synthesize_for_proving(circuit, check=True))


@pytest.fixture(scope="module")
def mimc_proof(mimc_params):
    asg = _assignment(mimc_params.circuit_id, 11)
    return asg, prove(mimc_params.pk, asg)


def test_proof_verifies_with_ours_and_py_ecc(mimc_params, mimc_proof) -> None:
    asg, proof = mimc_proof
    publics = asg.public_inputs()
    assert len(publics) == 1
    assert verify_proof(mimc_params.pk.vk, proof, publics)
    assert reference_verifier.verify(vk_to_bytes(mimc_params.pk.vk), proof.to_bytes(), publics)


def test_wrong_public_input_is_rejected_by_both(mimc_params, mimc_proof) -> None:
    asg, proof = mimc_proof
    wrong = [(asg.public_inputs()[0] + 1) % R_MODULUS]
    assert not verify_proof(mimc_params.pk.vk, proof, wrong)
    assert not reference_verifier.verify(vk_to_bytes(mimc_params.pk.vk), proof.to_bytes(), wrong)


@pytest.mark.parametrize("part", ["a", "b", "c"])
def test_tampered_proof_is_rejected_by_both(mimc_params, mimc_proof, part: str) -> None:
    asg, proof = mimc_proof
    two = Scalar.from_le_bytes((2).to_bytes(32, "little"))
    parts = {"a": proof.a, "b": proof.b, "c": proof.c}
    parts[part] = parts[part] * two  # still a valid point, wrong value
    bad = Proof(**parts)
    publics = asg.public_inputs()
    assert not verify_proof(mimc_params.pk.vk, bad, publics)
    assert not reference_verifier.verify(vk_to_bytes(mimc_params.pk.vk), bad.to_bytes(), publics)


def test_proofs_are_randomised_and_r_s_are_honoured(mimc_params) -> None:
    asg = _assignment(mimc_params.circuit_id, 12)
    p1 = prove(mimc_params.pk, asg, r=5, s=9)
    p2 = prove(mimc_params.pk, asg, r=5, s=9)
    p3 = prove(mimc_params.pk, asg)
    assert p1 == p2 and p1 != p3
    for p in (p1, p3):
        assert verify_proof(mimc_params.pk.vk, p, asg.public_inputs())


def test_mostly_binary_witness(bits_params) -> None:
    """The 0/1 scalar path of the MSMs, several public inputs, checked by both verifiers."""
    asg = _assignment(bits_params.circuit_id, 13)
    proof = prove(bits_params.pk, asg)
    publics = asg.public_inputs()
    assert len(publics) == 3
    assert verify_proof(prepare_verifying_key(bits_params.pk.vk), proof, publics)
    assert reference_verifier.verify(vk_to_bytes(bits_params.pk.vk), proof.to_bytes(), publics)
    publics[1] ^= 1
    assert not verify_proof(bits_params.pk.vk, proof, publics)


def test_batch_verification(mimc_params) -> None:
    asgs = [_assignment(mimc_params.circuit_id, seed) for seed in (21, 22, 23)]
    proofs = [prove(mimc_params.pk, a) for a in asgs]
    publics = [a.public_inputs() for a in asgs]
    assert verify_proofs_batch(mimc_params.pk.vk, proofs, publics)
    swapped = [publics[1], publics[0], publics[2]]
    assert not verify_proofs_batch(mimc_params.pk.vk, proofs, swapped)
    assert verify_proofs_batch(mimc_params.pk.vk, [], [])


def test_public_input_errors(mimc_params, mimc_proof) -> None:
    _, proof = mimc_proof
    with pytest.raises(PublicInputError, match="takes 1 public inputs, got 2"):
        verify_proof(mimc_params.pk.vk, proof, [1, 2])
    with pytest.raises(PublicInputError, match="not a canonical field element"):
        verify_proof(mimc_params.pk.vk, proof, [R_MODULUS])


def test_assignment_for_another_circuit_is_refused(mimc_params) -> None:
    asg = _assignment("bits-1", 3)
    with pytest.raises(KeyMismatchError):
        prove(mimc_params.pk, asg)


def test_identity_free_proof_points() -> None:
    """Sanity: generators are what we think (guards the Scalar conversions used everywhere)."""
    assert G1Point() * Scalar.from_le_bytes((1).to_bytes(32, "little")) == G1Point()
    assert G2Point() * Scalar.from_le_bytes((0).to_bytes(32, "little")) == G2Point.identity()
