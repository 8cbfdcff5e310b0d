"""Proving circom circuits from snarkjs artefacts: a `.zkey` proving key and a `.wtns` witness.

snarkjs keeps A, B1, B2 points for every variable (points at infinity where a variable is absent)
and builds its H query for the evaluations of A·B − C on the coset ω_{2m}·<ω_m>, with ffjavascript's
roots of unity (derived from the non-residue 5, where bellperson uses the generator 7). We map that
onto our `ProvingKey` (densities = the non-infinity points) so the same prover serves both.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from cuzk.curve.bases import G1Bases, G2Bases
from cuzk.curve.msm import msm_bases_async
from cuzk.errors import CuzkError
from cuzk.field import fr_vec
from cuzk.field.constants import R_MODULUS
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.formats.wtns import read_wtns
from cuzk.groth16.formats.zkey import Zkey, read_zkey, unchecked_b2_limbs
from cuzk.groth16.keys import HBasis, ProvingKey, VerifyingKey
from cuzk.groth16.proof import Proof
from cuzk.groth16.prover import prove


def _is_infinity(limbs: np.ndarray) -> np.ndarray:
    """Rows of affine limbs that are the point at infinity (all zeros)."""
    return ~limbs.any(axis=1)


@dataclass(eq=False)
class CircomKey:
    """A zkey as a cuzk proving key, plus what is needed to turn a witness into an assignment."""

    pk: ProvingKey
    zkey: Zkey
    a_aux_density: np.ndarray
    b_input_density: np.ndarray
    b_aux_density: np.ndarray

    @property
    def n_public(self) -> int:
        return self.zkey.n_public

    def assignment(self, witness: np.ndarray, *, source: str = "witness") -> Assignment:
        """A/B/C evaluations per constraint from the zkey's coefficients and a full witness."""
        zk = self.zkey
        if witness.shape[0] != zk.n_vars:
            raise CuzkError(f"{source}: the witness has {witness.shape[0]} values but the zkey's circuit has "
                            f"{zk.n_vars} variables")
        if witness.shape[0] == 0 or not (witness[0, 0] == 1 and not witness[0, 1:].any()):
            raise CuzkError(f"{source}: witness[0] must be 1 (the constant ONE signal)")
        w_mont = fr_vec.to_montgomery(witness)
        evaluations = []
        for matrix in (0, 1):
            sel = zk.coef_matrix == matrix
            rows = zk.coef_constraint[sel].astype(np.int64)
            order = np.argsort(rows, kind="stable")
            rows = rows[order]
            cols = zk.coef_signal[sel].astype(np.int64)[order]
            coeffs = fr_vec.to_montgomery(zk.coef_value[sel][order])
            row_ptr = np.zeros(zk.domain_size + 1, np.int64)
            np.cumsum(np.bincount(rows, minlength=zk.domain_size), out=row_ptr[1:])
            evaluations.append(fr_vec.spmv(row_ptr, cols, coeffs, w_mont))
        a_m, b_m = evaluations
        # circom's R1CS is satisfied row by row, so C's evaluations are A∘B (snarkjs does the same).
        c = fr_vec.from_montgomery(fr_vec.mul(a_m, b_m))
        n_in = zk.n_public + 1
        return Assignment(
            a=fr_vec.from_montgomery(a_m),
            b=fr_vec.from_montgomery(b_m),
            c=c,
            inputs=witness[:n_in],
            aux=witness[n_in:],
            a_aux_density=self.a_aux_density,
            b_input_density=self.b_input_density,
            b_aux_density=self.b_aux_density,
        )


def circom_key(zk: Zkey, *, source: str = "zkey") -> CircomKey:
    n_in = zk.n_public + 1
    a_dense = ~_is_infinity(zk.affine["a"])
    if not a_dense[:n_in].all():
        raise CuzkError(f"{source}: A points of the public inputs must not be at infinity "
                        "(snarkjs adds one A row per input)")
    b_dense = ~_is_infinity(zk.affine["b1"])
    if not np.array_equal(b_dense, ~_is_infinity(zk.affine["b2"])):
        raise CuzkError(f"{source}: B1 and B2 disagree on which variables are absent")
    vk = VerifyingKey(alpha_g1=zk.alpha_g1, beta_g1=zk.beta_g1, beta_g2=zk.beta_g2, gamma_g2=zk.gamma_g2,
                      delta_g1=zk.delta_g1, delta_g2=zk.delta_g2, ic=list(zk.ic))
    pk = ProvingKey(
        vk=vk,
        h=G1Bases(affine=zk.affine["h"]),
        l=G1Bases(affine=zk.affine["c"]),
        a=G1Bases(affine=zk.affine["a"][a_dense]),
        b_g1=G1Bases(affine=zk.affine["b1"][b_dense]),
        b_g2=G2Bases(affine=zk.affine["b2"][b_dense]),
        h_basis=HBasis.ODD_COSET,
        domain_root=zk.coset_shift * zk.coset_shift % R_MODULUS,
        odd_coset_shift=zk.coset_shift,
    )
    return CircomKey(pk=pk, zkey=zk, a_aux_density=a_dense[n_in:], b_input_density=b_dense[:n_in],
                     b_aux_density=b_dense[n_in:])


def prove_circom(zkey_path: str | os.PathLike[str], wtns_path: str | os.PathLike[str], *, r: int | None = None,
                 s: int | None = None, timings: MutableMapping[str, float] | None = None) -> tuple[Proof, Assignment]:
    """Read a snarkjs zkey and a circom witness and prove, as `snarkjs groth16 prove` does.

    The B_G2 MSM, the longest, starts on the MSM pool as soon as the witness and the key's B2
    section are in memory, so that it runs while the rest of the key is read, checked and turned
    into an assignment: mostly single-threaded work that would otherwise leave cores idle. Its sum
    over every variable equals the prover's sum over the B-dense ones, since the others are the
    identity in B2 (`circom_key` checks B1 and B2 agree on them). When reading the key fails, the
    MSM is abandoned and the key's own error is raised."""
    witness = read_wtns(wtns_path)
    b2 = unchecked_b2_limbs(zkey_path)
    started: dict[str, list[Future]] = {}
    if b2 is not None and b2.shape[0] == witness.shape[0]:
        started["b_g2"] = msm_bases_async(G2Bases(affine=b2), witness)
    try:
        key = circom_key(read_zkey(zkey_path), source=str(zkey_path))
        asg = key.assignment(witness, source=str(wtns_path))
        return prove(key.pk, asg, r=r, s=s, timings=timings, started=started), asg
    except BaseException:
        for future in started.get("b_g2", ()):
            future.cancel()   # tiles not yet running; the running ones end on their own
        raise
