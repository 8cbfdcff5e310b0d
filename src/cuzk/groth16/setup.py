"""Random, *insecure* Groth16 parameters for tests, demos and benchmarks (bellperson's generator).

The toxic waste (τ, α, β, γ, δ) is drawn in this process, so anyone holding it can forge proofs:
these parameters are for testing only. Real Filecoin parameters come from the trusted-setup
ceremony and can only be downloaded (docs/circuits.md §12).

Every query point is base·scalar for one of two bases, so the work is one batch fixed-base
multiplication per query after the QAP is evaluated at τ:
  uᵢ(τ), vᵢ(τ), wᵢ(τ) = Σ_rows coeff·L_row(τ) over the A, B, C columns of variable i,
with L_row the Lagrange basis of the size-m domain (m = the smallest power of two ≥ #constraints).

The QAP comes from a recording (`qap_at_tau`) or, for circuits too large to record in memory
(PoRep-32GiB: 130M constraints), from a compiled circuit (`qap_at_tau_compiled`, the same numbers).
The multiplications go through a `FixedBaseMultiplier`: the CPU by default, a GPU backend's
(`ProverBackend.fixed_base_g1/g2`) for large keys. `write_insecure_parameters` streams the points
straight into the `.params` file; `generate_parameters_for_matrices` keeps them in memory.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from cuzk.curve.bases import G1Bases, G2Bases
from cuzk.curve.fixed_base import g1_fixed_base_into, g2_fixed_base_into
from cuzk.curve.points import G1_UNCOMPRESSED_BYTES, G2_UNCOMPRESSED_BYTES, G1Point, G2Point, Scalar
from cuzk.field import fr_vec
from cuzk.field.constants import R_MODULUS
from cuzk.field.ntt import Domain
from cuzk.groth16.formats.params_file import VECTOR_NAMES, ParamsFileWriter
from cuzk.groth16.keys import ProvingKey, VerifyingKey
from cuzk.groth16.synthesis import record_circuit
from cuzk.r1cs import Circuit, R1csMatrices
from cuzk.r1cs.compiled import CompiledCircuit, CompiledMatrix, compile_matrices
from cuzk.r1cs.spmv import spmv_table_transpose

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


class FixedBaseMultiplier(Protocol):
    """out[i] = blstrs uncompressed encoding of scalars[i]·base; scalars canonical (n, 4) uint64,
    out (n, 96) or (n, 192) uint8. `ProverBackend` implements it (CPU or GPU)."""

    def fixed_base_g1(self, base: G1Point, scalars: np.ndarray, out: np.ndarray) -> None: ...

    def fixed_base_g2(self, base: G2Point, scalars: np.ndarray, out: np.ndarray) -> None: ...


class CpuFixedBase:
    """The CPU multiplier (`cuzk.curve.fixed_base`, all cores)."""

    def fixed_base_g1(self, base: G1Point, scalars: np.ndarray, out: np.ndarray) -> None:
        g1_fixed_base_into(base, scalars, out)

    def fixed_base_g2(self, base: G2Point, scalars: np.ndarray, out: np.ndarray) -> None:
        g2_fixed_base_into(base, scalars, out)


def _scalar(x: int) -> Scalar:
    return Scalar.from_le_bytes(x.to_bytes(32, "little"))


@dataclass(frozen=True)
class QapAtTau:
    """uᵢ(τ), vᵢ(τ), wᵢ(τ) of every variable (inputs, then aux), (n, 4) uint64 Montgomery."""

    at: np.ndarray
    bt: np.ndarray
    ct: np.ndarray
    num_inputs: int
    domain: Domain

    @property
    def num_aux(self) -> int:
        return self.at.shape[0] - self.num_inputs


def qap_at_tau(r1cs: R1csMatrices, tau: int) -> QapAtTau:
    """The QAP of a recorded circuit (input constraints already included) at τ, through its compact
    form (one transposed-product kernel serves both)."""
    return qap_at_tau_compiled(compile_matrices(r1cs, "recorded"), tau)


def qap_at_tau_compiled(compiled: CompiledCircuit, tau: int) -> QapAtTau:
    """The same numbers as `qap_at_tau` from a compiled circuit (coefficient-table CSR)."""
    domain = Domain.for_size(max(compiled.num_constraints, 1))
    lagrange = domain.lagrange_at(tau)

    def columns(matrix: CompiledMatrix) -> np.ndarray:
        return spmv_table_transpose(matrix.row_ptr, matrix.cols, matrix.coeff_idx, compiled.coeff_table,
                                    lagrange, compiled.num_variables)

    return QapAtTau(columns(compiled.a), columns(compiled.b), columns(compiled.c), compiled.num_inputs, domain)


class _QueryScalars:
    """The scalar of every query point (canonical limbs), computed query by query so that only one
    large vector of them exists at a time beside the QAP."""

    def __init__(self, qap: QapAtTau, waste: ToxicWaste) -> None:
        self.qap = qap
        self.waste = waste
        self.gamma_inv = pow(waste.gamma, -1, R_MODULUS)
        self.delta_inv = pow(waste.delta, -1, R_MODULUS)
        # A and B keep only the variables whose polynomial is non-zero at τ (bellperson drops the
        # points at infinity); the prover matches them with the densities seen during synthesis.
        self.a_rows = np.flatnonzero(qap.at.any(axis=1))
        self.b_rows = np.flatnonzero(qap.bt.any(axis=1))
        self._ext: np.ndarray | None = None

    def counts(self) -> dict[str, int]:
        return {"h": self.qap.domain.size - 1, "l": self.qap.num_aux, "a": len(self.a_rows),
                "b_g1": len(self.b_rows), "b_g2": len(self.b_rows)}

    def _extended(self) -> np.ndarray:
        """β·u(τ) + α·v(τ) + w(τ), Montgomery; divided by γ for inputs (IC), by δ for aux (L)."""
        if self._ext is None:
            q, w = self.qap, self.waste
            ext = fr_vec.mul_scalar(q.at, w.beta)
            fr_vec.add_inplace(ext, fr_vec.mul_scalar(q.bt, w.alpha))
            fr_vec.add_inplace(ext, q.ct)
            self._ext = ext
        return self._ext

    def ic(self) -> np.ndarray:
        return fr_vec.from_montgomery(fr_vec.mul_scalar(self._extended()[: self.qap.num_inputs], self.gamma_inv))

    def of(self, name: str) -> np.ndarray:
        q, w = self.qap, self.waste
        if name == "h":
            m = q.domain.size
            z_over_delta = (pow(w.tau, m, R_MODULUS) - 1) * self.delta_inv % R_MODULUS
            return fr_vec.from_montgomery(fr_vec.mul_scalar_inplace(fr_vec.powers(w.tau, m - 1), z_over_delta))
        if name == "l":
            scalars = fr_vec.from_montgomery(fr_vec.mul_scalar(self._extended()[q.num_inputs:], self.delta_inv))
            self._ext = None  # IC is computed first; L is the last use
            return scalars
        if name == "a":
            return fr_vec.from_montgomery(q.at[self.a_rows])
        if name in ("b_g1", "b_g2"):
            return fr_vec.from_montgomery(q.bt[self.b_rows])
        raise ValueError(f"unknown query {name!r}")


def _bases(waste: ToxicWaste) -> tuple[G1Point, G2Point]:
    return G1Point() * _scalar(waste.g1_scalar), G2Point() * _scalar(waste.g2_scalar)


def _verifying_key(queries: _QueryScalars, multiplier: FixedBaseMultiplier) -> VerifyingKey:
    w = queries.waste
    g1, g2 = _bases(w)
    ic_scalars = queries.ic()
    ic = np.empty((len(ic_scalars), G1_UNCOMPRESSED_BYTES), dtype=np.uint8)
    multiplier.fixed_base_g1(g1, ic_scalars, ic)
    return VerifyingKey(alpha_g1=g1 * _scalar(w.alpha), beta_g1=g1 * _scalar(w.beta), beta_g2=g2 * _scalar(w.beta),
                        gamma_g2=g2 * _scalar(w.gamma), delta_g1=g1 * _scalar(w.delta),
                        delta_g2=g2 * _scalar(w.delta), ic=G1Bases(ic).points())


def _fill_vectors(queries: _QueryScalars, multiplier: FixedBaseMultiplier, out: Callable[[str], np.ndarray],
                  say: Progress) -> None:
    """Every query vector, in file order, into out(name)."""
    g1, g2 = _bases(queries.waste)
    scalars = None
    for name in VECTOR_NAMES:
        if name != "b_g2":  # B_G2 reuses B_G1's scalars
            scalars = queries.of(name)
        say(f"{name.upper()} query ({len(scalars):,} points)")
        if name == "b_g2":
            multiplier.fixed_base_g2(g2, scalars, out(name))
        else:
            multiplier.fixed_base_g1(g1, scalars, out(name))


def generate_parameters_for_qap(qap: QapAtTau, waste: ToxicWaste, progress: Progress | None = None,
                                multiplier: FixedBaseMultiplier | None = None) -> ProvingKey:
    """The whole key in memory."""
    say = progress or (lambda _msg: None)
    mult = multiplier or CpuFixedBase()
    queries = _QueryScalars(qap, waste)
    vk = _verifying_key(queries, mult)
    counts = queries.counts()
    vectors = {name: np.empty((counts[name], G2_UNCOMPRESSED_BYTES if name == "b_g2" else G1_UNCOMPRESSED_BYTES),
                              dtype=np.uint8) for name in VECTOR_NAMES}
    _fill_vectors(queries, mult, vectors.__getitem__, say)
    return ProvingKey(vk=vk, h=G1Bases(vectors["h"]), l=G1Bases(vectors["l"]), a=G1Bases(vectors["a"]),
                      b_g1=G1Bases(vectors["b_g1"]), b_g2=G2Bases(vectors["b_g2"]))


def generate_parameters_for_matrices(r1cs: R1csMatrices, waste: ToxicWaste, progress: Progress | None = None,
                                     multiplier: FixedBaseMultiplier | None = None) -> ProvingKey:
    """Parameters for a recorded circuit (input constraints already included)."""
    say = progress or (lambda _msg: None)
    say(f"QAP at tau (domain 2^{Domain.for_size(max(r1cs.num_constraints, 1)).log_size})")
    return generate_parameters_for_qap(qap_at_tau(r1cs, waste.tau), waste, progress, multiplier)


def write_insecure_parameters(path: str | Path, qap: QapAtTau, waste: ToxicWaste, *,
                              multiplier: FixedBaseMultiplier | None = None, progress: Progress | None = None,
                              force_official_name: bool = False) -> VerifyingKey:
    """Write the `.params` for `qap` straight into the file (atomically); returns the verifying key.
    The same bytes as `write_params(path, generate_parameters_for_qap(qap, waste))`."""
    say = progress or (lambda _msg: None)
    mult = multiplier or CpuFixedBase()
    queries = _QueryScalars(qap, waste)
    vk = _verifying_key(queries, mult)
    with ParamsFileWriter(path, vk, queries.counts(), force_official_name=force_official_name) as writer:
        _fill_vectors(queries, mult, writer.vector, say)
        say("flushing the file")
        writer.commit()
    return vk


def generate_insecure_parameters(circuit: Circuit, *, rng: random.Random | None = None,
                                 waste: ToxicWaste | None = None,
                                 progress: Progress | None = None) -> ProvingKey:
    """Random parameters for `circuit` (its structure only; no witness is computed)."""
    say = progress or (lambda _msg: None)
    say("recording the circuit")
    r1cs = record_circuit(circuit)
    return generate_parameters_for_matrices(r1cs, waste or ToxicWaste.random(rng), progress)
