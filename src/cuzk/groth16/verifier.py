"""Groth16 verification: single proofs against a prepared key, and random-linear-combination batches.

One proof holds when e(A, B) = e(α, β) · e(IC₀ + Σ xᵢ·ICᵢ, γ) · e(C, δ).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from cuzk.curve.msm import msm
from cuzk.curve.pairing import multi_pairing, pairing_product_is_one
from cuzk.curve.points import G1Point, Scalar
from cuzk.errors import CuzkError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs
from cuzk.groth16.keys import PreparedVerifyingKey, VerifyingKey, prepare_verifying_key
from cuzk.groth16.proof import Proof


class PublicInputError(CuzkError):
    """Public inputs of the wrong count or not canonical field elements."""


def _scalar(x: int) -> Scalar:
    return Scalar.from_le_bytes(x.to_bytes(32, "little"))


def _check_inputs(vk: VerifyingKey, public_inputs: Sequence[int]) -> None:
    if len(public_inputs) != vk.num_public_inputs:
        raise PublicInputError(f"the verifying key takes {vk.num_public_inputs} public inputs, "
                               f"got {len(public_inputs)}")
    for i, x in enumerate(public_inputs):
        if not 0 <= x < R_MODULUS:
            raise PublicInputError(f"public input {i} is not a canonical field element (0 <= x < r)")


def input_commitment(vk: VerifyingKey, public_inputs: Sequence[int]) -> G1Point:
    """IC₀ + Σ xᵢ·ICᵢ."""
    _check_inputs(vk, public_inputs)
    if not public_inputs:
        return vk.ic[0]
    return vk.ic[0] + msm(vk.ic[1:], ints_to_limbs(list(public_inputs)))


def verify_proof(key: PreparedVerifyingKey | VerifyingKey, proof: Proof, public_inputs: Sequence[int]) -> bool:
    """Whether `proof` is valid for `public_inputs` (ONE excluded). Raises PublicInputError on bad inputs."""
    pvk = key if isinstance(key, PreparedVerifyingKey) else prepare_verifying_key(key)
    acc = input_commitment(pvk.vk, public_inputs)
    return multi_pairing([proof.a, acc, proof.c], [proof.b, pvk.neg_gamma_g2, pvk.neg_delta_g2]) == pvk.alpha_beta


def verify_proofs_batch(key: PreparedVerifyingKey | VerifyingKey, proofs: Sequence[Proof],
                        public_inputs: Sequence[Sequence[int]]) -> bool:
    """All proofs valid, checked with one multi-pairing (128-bit random weights, as bellperson).

    Π e(zᵢ·Aᵢ, Bᵢ) · e(Σ zᵢ·accᵢ, −γ) · e(Σ zᵢ·Cᵢ, −δ) · e(−(Σ zᵢ)·α, β) = 1. A false batch means at
    least one proof is invalid; call `verify_proof` on each to find which.
    """
    if len(proofs) != len(public_inputs):
        raise PublicInputError(f"{len(proofs)} proofs but {len(public_inputs)} public-input lists")
    if not proofs:
        return True
    pvk = key if isinstance(key, PreparedVerifyingKey) else prepare_verifying_key(key)
    vk = pvk.vk
    weights = [1 + secrets.randbits(128) for _ in proofs]
    weight_limbs = ints_to_limbs(weights)
    accs = [input_commitment(vk, x) for x in public_inputs]
    g1s = [p.a * _scalar(z) for p, z in zip(proofs, weights, strict=True)]
    g2s = [p.b for p in proofs]
    g1s.append(msm(accs, weight_limbs))
    g2s.append(pvk.neg_gamma_g2)
    g1s.append(msm([p.c for p in proofs], weight_limbs))
    g2s.append(pvk.neg_delta_g2)
    g1s.append(vk.alpha_g1 * _scalar((-sum(weights)) % R_MODULUS))
    g2s.append(vk.beta_g2)
    return pairing_product_is_one(g1s, g2s)


__all__ = ["PublicInputError", "input_commitment", "verify_proof", "verify_proofs_batch"]
