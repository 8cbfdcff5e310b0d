"""The Groth16 prover (bellperson's algorithm), on the CPU.

Given the assignment, the proof is

    A = α + Σ w_j·A_j + r·δ                      (G1)
    B = β + Σ w_j·B_j + s·δ                      (G2; B_G1 is the same sum in G1)
    C = s·α + r·β + r·s·δ + s·ΣA + r·ΣB_G1 + Σ h_i·H_i + Σ_aux w_j·L_j

where h are the coefficients of (A(x)·B(x) − C(x)) / Z(x) for the polynomials interpolating the
per-constraint evaluations. The steps are separate functions so that another backend can replace
the heavy ones (H polynomial, MSMs) and still share `assemble_proof` bit for bit.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, MutableMapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from cuzk.curve.msm import gather, msm_bases
from cuzk.curve.points import G1Point, G2Point, Scalar
from cuzk.errors import CuzkError
from cuzk.field import fr_vec
from cuzk.field.constants import R_MODULUS, fr_root_of_unity
from cuzk.field.ntt import Domain
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.keys import HBasis, ProvingKey, VerifyingKey
from cuzk.groth16.proof import Proof

_HALF = (R_MODULUS + 1) // 2


class KeyMismatchError(CuzkError):
    """The assignment does not fit the proving key (wrong circuit or wrong parameters)."""


def _padded_montgomery(values: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros((size, 4), dtype=np.uint64)
    out[: values.shape[0]] = values
    return fr_vec.to_montgomery(out)


@dataclass(frozen=True)
class Reduction:
    """How a key's H scalars come from the per-constraint evaluations a, b, c (ark-groth16's
    `R1CSToQAP`): the coefficients of the quotient (A·B − C) / Z (`divide`), read from A·B on the coset
    `shift`·D with shift^m = −1 (`quotient_shift`), or A·B − C evaluated on the coset `shift`·D for
    points that absorb 1/Z. The one place that reads `HBasis`: the CPU prover and the device phases
    both follow it."""

    shift: int
    divide: bool

    def h_length(self, m: int) -> int:
        """The H scalars for a domain of m: with `divide` the top coefficient is zero and dropped."""
        return m - 1 if self.divide else m


def quotient_shift(m: int) -> int:
    """A coset shift g with g^m = −1 (a root of unity of order 2m), for `compute_h`'s quotient."""
    return fr_root_of_unity(m.bit_length())


def reduction(pk: ProvingKey) -> Reduction:
    """The reduction pk's H query was made for (KeyMismatchError when it lacks what that needs)."""
    if pk.h_basis is HBasis.COEFFICIENTS:
        return Reduction(quotient_shift(pk.domain_size), divide=True)
    # snarkjs: the "odd" coset ω_{2m}·D; the key's points absorb 1/Z.
    if pk.odd_coset_shift is None:
        raise KeyMismatchError("an odd-coset proving key needs its coset shift")
    return Reduction(pk.odd_coset_shift, divide=False)


def compute_h(pk: ProvingKey, asg: Assignment) -> np.ndarray:
    """The scalars of the H query, canonical (len(pk.h), 4)."""
    m = pk.domain_size
    if asg.num_constraints > m:
        raise KeyMismatchError(f"the circuit has {asg.num_constraints} constraints but the key's domain "
                               f"holds {m}")
    red = reduction(pk)
    domain = Domain(m.bit_length() - 1, pk.domain_root)
    h = quotient(domain, red, *(_padded_montgomery(v, m) for v in (asg.a, asg.b, asg.c)))
    return fr_vec.from_montgomery(h[: red.h_length(m)])


def quotient(domain: Domain, red: Reduction, a: np.ndarray, b: np.ndarray, c: np.ndarray,
             transforms: int = 6) -> np.ndarray:
    """H's scalars before `h_length` cuts them, Montgomery, from a, b, c padded to the domain
    (Montgomery, all three overwritten). `transforms` = 7: bellperson's way for `divide` (C on the
    coset too, A·B − C divided by Z there), kept to compare against."""
    # To coefficients, then evaluations on the coset, where A·B is a pointwise product.
    a, b = (domain.coset_ntt_inplace(domain.intt_inplace(v), red.shift) for v in (a, b))
    fr_vec.mul_inplace(a, b)
    del b
    if not red.divide or transforms == 7:
        a = fr_vec.sub(a, domain.coset_ntt_inplace(domain.intt_inplace(c), red.shift))
        if not red.divide:
            return a
        z_inv = pow(domain.vanishing_on_coset(red.shift), -1, R_MODULUS)
        return domain.icoset_ntt_inplace(fr_vec.mul_scalar_inplace(a, z_inv), red.shift)
    # A·B = L + x^m·U (deg L < m): on D it is L + U, which is C when every constraint holds, and on the
    # coset, where x^m = shift^m = −1, it is L − U. So H = (A·B − C) / Z = U = (C − (L − U)) / 2: six
    # transforms, where evaluating C on the coset as well would take seven (docs/formats.md §3).
    a = domain.icoset_ntt_inplace(a, red.shift)
    return fr_vec.mul_scalar_inplace(fr_vec.sub_inplace(domain.intt_inplace(c), a), _HALF)


@dataclass(frozen=True)
class QueryScalars:
    """The witness values each query is multiplied with, after density selection."""

    a: np.ndarray
    b: np.ndarray  #: shared by B_G1 and B_G2
    l: np.ndarray


def check_query_sizes(pk: ProvingKey, asg: Assignment) -> None:
    """Refuse an assignment that does not fit the key (KeyMismatchError naming the count): inputs,
    aux, the density vectors' lengths, and the A/B query lengths the densities select. Backends
    that gather the query scalars elsewhere (the CUDA backend, on the device) call it alone."""
    n_in, n_aux = asg.inputs.shape[0], asg.aux.shape[0]
    if n_in != pk.num_inputs:
        raise KeyMismatchError(f"the circuit has {n_in} inputs (ONE included) but the key has {pk.num_inputs}")
    if n_aux != pk.num_aux:
        raise KeyMismatchError(f"the circuit has {n_aux} aux variables but the key's L query has {pk.num_aux}")
    for what, density, want in (("A aux", asg.a_aux_density, n_aux), ("B aux", asg.b_aux_density, n_aux),
                                ("B input", asg.b_input_density, n_in)):
        if density.shape != (want,):
            raise KeyMismatchError(f"the assignment's {what} density has shape {density.shape}, expected ({want},)")
    n_a = n_in + int(np.count_nonzero(asg.a_aux_density))
    n_b = int(np.count_nonzero(asg.b_input_density)) + int(np.count_nonzero(asg.b_aux_density))
    for name, got, want in (("A", n_a, len(pk.a)), ("B_G1", n_b, len(pk.b_g1)), ("B_G2", n_b, len(pk.b_g2))):
        if got != want:
            raise KeyMismatchError(f"the key's {name} query has {want} points but the circuit has {got} "
                                   f"variables of non-zero {name[0]} density")


def select_query_scalars(pk: ProvingKey, asg: Assignment) -> QueryScalars:
    """Pick the witness entries matching the density-filtered A/B queries, checking sizes first."""
    check_query_sizes(pk, asg)
    a = np.concatenate([asg.inputs, asg.aux[asg.a_aux_density]])
    b = np.concatenate([asg.inputs[asg.b_input_density], asg.aux[asg.b_aux_density]])
    return QueryScalars(a=a, b=b, l=asg.aux)


@dataclass(frozen=True)
class MsmResults:
    h: G1Point
    l: G1Point
    a: G1Point
    b_g1: G1Point
    b_g2: G2Point


def assemble_proof(vk: VerifyingKey, sums: MsmResults, r: int, s: int) -> Proof:
    """Combine the MSM results with the randomisers r, s (bellperson's order of operations)."""
    r_sc = Scalar.from_le_bytes(r.to_bytes(32, "little"))
    s_sc = Scalar.from_le_bytes(s.to_bytes(32, "little"))
    rs_sc = Scalar.from_le_bytes((r * s % R_MODULUS).to_bytes(32, "little"))
    g_a = vk.alpha_g1 + sums.a + vk.delta_g1 * r_sc
    g_b = vk.beta_g2 + sums.b_g2 + vk.delta_g2 * s_sc
    g_c = (vk.delta_g1 * rs_sc + vk.alpha_g1 * s_sc + vk.beta_g1 * r_sc
           + sums.a * s_sc + sums.b_g1 * r_sc + sums.h + sums.l)
    return Proof(g_a, g_b, g_c)


def random_nonzero_scalar() -> int:
    return 1 + secrets.randbelow(R_MODULUS - 1)


def prove(pk: ProvingKey, asg: Assignment, *, r: int | None = None, s: int | None = None,
          timings: MutableMapping[str, float] | None = None,
          started: Mapping[str, Sequence[Future]] | None = None) -> Proof:
    """One Groth16 proof on the CPU. `timings` (seconds) receives: h, msm_h, msm_l, msm_a,
    msm_b_g1, msm_b_g2, select, assemble.

    `started` maps MSM names (`MsmResults` fields) to `msm_bases_async` futures the caller started
    earlier, e.g. while it was still reading the key; they must compute the same sum as the query
    (the caller's responsibility), and that MSM's timing is then the time spent waiting for it."""
    clock = time.perf_counter
    t = timings if timings is not None else {}
    early = dict(started or {})
    if not early.keys() <= set(MsmResults.__dataclass_fields__):
        raise ValueError(f"unknown MSM names in started: {sorted(early.keys() - set(MsmResults.__dataclass_fields__))}")

    start = clock()
    h_scalars = compute_h(pk, asg)
    t["h"] = clock() - start

    start = clock()
    q = select_query_scalars(pk, asg)
    t["select"] = clock() - start

    def timed(name: str, bases, scalars):
        begin = clock()
        out = gather(early[name]) if name in early else msm_bases(bases, scalars)
        t[f"msm_{name}"] = clock() - begin
        return out

    sums = MsmResults(
        b_g2=timed("b_g2", pk.b_g2, q.b),
        h=timed("h", pk.h, h_scalars),
        l=timed("l", pk.l, q.l),
        a=timed("a", pk.a, q.a),
        b_g1=timed("b_g1", pk.b_g1, q.b),
    )
    start = clock()
    proof = assemble_proof(pk.vk, sums, random_nonzero_scalar() if r is None else r % R_MODULUS,
                           random_nonzero_scalar() if s is None else s % R_MODULUS)
    t["assemble"] = clock() - start
    return proof
