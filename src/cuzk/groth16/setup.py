"""Random, *insecure* Groth16 parameters for tests, demos and benchmarks (bellperson's generator).

The toxic waste (τ, α, β, γ, δ) is drawn in this process, so anyone holding it can forge proofs:
these parameters are for testing only. Real Filecoin parameters come from the trusted-setup
ceremony and can only be downloaded (filecoin-proofs.md §10).

Every query point is base·scalar for one of two bases, so the work is one batch fixed-base
multiplication per query after the QAP is evaluated at τ:
  uᵢ(τ), vᵢ(τ), wᵢ(τ) = Σ_rows coeff·L_row(τ) over the A, B, C columns of variable i,
with L_row the Lagrange basis of the size-m domain (m = the smallest power of two ≥ #constraints).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cuzk.curve.bases import G1Bases, G2Bases
from cuzk.curve.fixed_base import g1_fixed_base_batch, g2_fixed_base_batch
from cuzk.curve.points import G1Point, G2Point, Scalar
from cuzk.field import fr_vec
from cuzk.field.constants import R_MODULUS
from cuzk.field.ntt import Domain
from cuzk.groth16.keys import ProvingKey, VerifyingKey
from cuzk.groth16.synthesis import record_circuit
from cuzk.r1cs import Circuit, CsrMatrix, R1csMatrices

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ToxicWaste:
    """The secrets behind a parameter set. Whoever knows them can forge proofs."""

    tau: int
    alpha: int
    beta: int
    gamma: int
    delta: int
    g1_scalar: int  #: the G1 base is G1·g1_scalar (bellperson draws a random base point)
    g2_scalar: int

    @classmethod
    def random(cls, rng: random.Random | None = None) -> ToxicWaste:
        rng = rng or random.SystemRandom()
        return cls(*(1 + rng.randrange(R_MODULUS - 1) for _ in range(7)))


def _scalar(x: int) -> Scalar:
    return Scalar.from_le_bytes(x.to_bytes(32, "little"))


def _column_evaluations(matrix: CsrMatrix, lagrange: np.ndarray) -> np.ndarray:
    """For each variable (column): Σ_rows coeff·L_row(τ), Montgomery form (rows beyond the circuit's
    constraints are padding and have no terms)."""
    return fr_vec.spmv_transpose(matrix.row_ptr, matrix.cols, fr_vec.to_montgomery(matrix.coeffs),
                                 lagrange[: matrix.num_rows], matrix.num_cols)


def generate_parameters_for_matrices(r1cs: R1csMatrices, waste: ToxicWaste,
                                     progress: Progress | None = None) -> ProvingKey:
    """Parameters for a recorded circuit (input constraints already included)."""
    say = progress or (lambda _msg: None)
    domain = Domain.for_size(max(r1cs.num_constraints, 1))
    m = domain.size
    g1 = G1Point() * _scalar(waste.g1_scalar)
    g2 = G2Point() * _scalar(waste.g2_scalar)

    say(f"QAP at tau (domain 2^{domain.log_size})")
    lagrange = domain.lagrange_at(waste.tau)
    at = _column_evaluations(r1cs.a, lagrange)
    bt = _column_evaluations(r1cs.b, lagrange)
    ct = _column_evaluations(r1cs.c, lagrange)
    del lagrange

    gamma_inv = pow(waste.gamma, -1, R_MODULUS)
    delta_inv = pow(waste.delta, -1, R_MODULUS)
    # β·u(τ) + α·v(τ) + w(τ), then / γ for inputs (IC) and / δ for aux (L).
    ext = fr_vec.add(fr_vec.add(fr_vec.mul_scalar(at, waste.beta), fr_vec.mul_scalar(bt, waste.alpha)), ct)
    n_in = r1cs.num_inputs
    ic_scalars = fr_vec.from_montgomery(fr_vec.mul_scalar(ext[:n_in], gamma_inv))
    l_scalars = fr_vec.from_montgomery(fr_vec.mul_scalar(ext[n_in:], delta_inv))
    del ext, ct

    say(f"H query ({m - 1} points)")
    z_over_delta = (pow(waste.tau, m, R_MODULUS) - 1) * delta_inv % R_MODULUS
    h_scalars = fr_vec.from_montgomery(fr_vec.mul_scalar(fr_vec.powers(waste.tau, m - 1), z_over_delta))
    h = g1_fixed_base_batch(g1, h_scalars)
    del h_scalars

    say(f"L query ({len(l_scalars)} points)")
    l_points = g1_fixed_base_batch(g1, l_scalars)
    ic = G1Bases(g1_fixed_base_batch(g1, ic_scalars)).points()

    # A and B keep only the variables whose polynomial is non-zero at τ (bellperson drops the
    # points at infinity); the prover matches them with the densities seen during synthesis.
    at_c = fr_vec.from_montgomery(at)
    bt_c = fr_vec.from_montgomery(bt)
    a_sel = at_c[at_c.any(axis=1)]
    b_sel = bt_c[bt_c.any(axis=1)]
    say(f"A query ({len(a_sel)} points)")
    a_points = g1_fixed_base_batch(g1, a_sel)
    say(f"B queries ({len(b_sel)} points in G1 and G2)")
    b_g1 = g1_fixed_base_batch(g1, b_sel)
    b_g2 = g2_fixed_base_batch(g2, b_sel)

    vk = VerifyingKey(
        alpha_g1=g1 * _scalar(waste.alpha),
        beta_g1=g1 * _scalar(waste.beta),
        beta_g2=g2 * _scalar(waste.beta),
        gamma_g2=g2 * _scalar(waste.gamma),
        delta_g1=g1 * _scalar(waste.delta),
        delta_g2=g2 * _scalar(waste.delta),
        ic=ic,
    )
    return ProvingKey(vk=vk, h=G1Bases(h), l=G1Bases(l_points), a=G1Bases(a_points), b_g1=G1Bases(b_g1),
                      b_g2=G2Bases(b_g2))


def generate_insecure_parameters(circuit: Circuit, *, rng: random.Random | None = None,
                                 waste: ToxicWaste | None = None,
                                 progress: Progress | None = None) -> ProvingKey:
    """Random parameters for `circuit` (its structure only; no witness is computed)."""
    say = progress or (lambda _msg: None)
    say("recording the circuit")
    r1cs = record_circuit(circuit)
    return generate_parameters_for_matrices(r1cs, waste or ToxicWaste.random(rng), progress)
