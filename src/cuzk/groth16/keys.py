"""Groth16 keys (bellperson's `Parameters` and `VerifyingKey`).

The proving key's big vectors stay in their file encoding (`G1Bases`/`G2Bases`), so a key read
from a memory-mapped `.params` file costs no memory until a prover decodes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from cuzk.curve.bases import G1Bases, G2Bases
from cuzk.curve.pairing import pairing
from cuzk.curve.points import GT, G1Point, G2Point


@dataclass(frozen=True, eq=False)
class VerifyingKey:
    """bellperson's verifying key. β_G1 and δ_G1 are only needed to prove and to write `.vk` files;
    a key read from snarkjs's vk.json lacks them (None) and can only verify."""

    alpha_g1: G1Point
    beta_g1: G1Point | None
    beta_g2: G2Point
    gamma_g2: G2Point
    delta_g1: G1Point | None
    delta_g2: G2Point
    #: IC[i] = (β·u_i(τ) + α·v_i(τ) + w_i(τ)) / γ for input i (IC[0] is the constant ONE).
    ic: list[G1Point]

    @property
    def num_public_inputs(self) -> int:
        """Public inputs a proof is verified against (ONE excluded)."""
        return len(self.ic) - 1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, VerifyingKey):
            return NotImplemented
        return (
            self.alpha_g1 == other.alpha_g1
            and self.beta_g1 == other.beta_g1
            and self.beta_g2 == other.beta_g2
            and self.gamma_g2 == other.gamma_g2
            and self.delta_g1 == other.delta_g1
            and self.delta_g2 == other.delta_g2
            and len(self.ic) == len(other.ic)
            and all(x == y for x, y in zip(self.ic, other.ic, strict=True))
        )


@dataclass(frozen=True, eq=False)
class PreparedVerifyingKey:
    """A verifying key with e(α, β) precomputed and -γ, -δ ready for one multi-pairing."""

    vk: VerifyingKey
    alpha_beta: GT
    neg_gamma_g2: G2Point
    neg_delta_g2: G2Point


def prepare_verifying_key(vk: VerifyingKey) -> PreparedVerifyingKey:
    return PreparedVerifyingKey(
        vk=vk,
        alpha_beta=pairing(vk.alpha_g1, vk.beta_g2),
        neg_gamma_g2=-vk.gamma_g2,
        neg_delta_g2=-vk.delta_g2,
    )


class HBasis(Enum):
    """What the H query's points are, hence which scalars the prover feeds them.

    COEFFICIENTS (bellperson): H[i] = τ^i·Z(τ)/δ for i < m−1, scalars are the coefficients of
    (A·B − C)/Z. ODD_COSET (snarkjs): the points absorb the division, and the scalars are the
    evaluations of A·B − C on the coset ω_{2m}·<ω_m>.
    """

    COEFFICIENTS = "coefficients"
    ODD_COSET = "odd-coset"


@dataclass(eq=False)
class ProvingKey:
    """bellperson `Parameters`: the vk plus the H, L, A, B_G1 and B_G2 queries.

    A, B_G1 and B_G2 hold only the variables of non-zero density (inputs first, then aux): the
    prover selects witness values with the densities recorded during synthesis.
    """

    vk: VerifyingKey
    h: G1Bases
    l: G1Bases
    a: G1Bases
    b_g1: G1Bases
    b_g2: G2Bases
    h_basis: HBasis = HBasis.COEFFICIENTS
    #: Root of unity the H basis was built for (None: bellperson's default for the domain size).
    domain_root: int | None = field(default=None)
    #: For ODD_COSET keys: the coset shift, a primitive 2m-th root of unity squaring to domain_root.
    odd_coset_shift: int | None = field(default=None)

    @property
    def domain_size(self) -> int:
        """m, the evaluation-domain size the key was generated for."""
        return len(self.h) + 1 if self.h_basis is HBasis.COEFFICIENTS else len(self.h)

    @property
    def num_aux(self) -> int:
        return len(self.l)

    @property
    def num_inputs(self) -> int:
        return len(self.vk.ic)
