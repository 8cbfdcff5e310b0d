"""Compound proofs end to end on real vanilla proofs made by cuzk.filecoin (docs/circuits.md §6, §9,
§10, §12, §13).

What is shown, per kind (2KiB):

* the partition circuits built from the vanilla proofs are satisfied (every row checked as it is
  emitted) and allocate exactly the public inputs a verifier derives from public data alone;
* tampering with a vanilla proof (a label, a sibling, a leaf) leaves the circuit unsatisfied, and
  vanilla proofs for other public values (prover id, sector, randomness) expose other inputs;
* the verification entry points accept proofs for the derived inputs and reject any other comm_r,
  randomness, prover id, ticket or seed: with a real Groth16 round trip on WinningPoSt-2KiB and
  insecure parameters, and for every kind with a trapdoor verifying key (`TrapdoorKey`: known
  discrete logs let a test forge a proof for chosen inputs in milliseconds, which checks the
  verifier-side input derivation and proof-length rules without generating a 2^22-point key).

The PoRep-2KiB and SnapDeals-2KiB Groth16 round trips (domains 2^22 and 2^21) take minutes on two
cores: they are marked slow and share their parameters with the rest of the run (tests/conftest.py).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from fixture_params import official_params

from cuzk.circuits.filecoin.compound import (
    CompoundError,
    ProofLengthError,
    PublicInputMismatchError,
    blank_circuit,
    sample_compound,
)
from cuzk.circuits.filecoin.compound_porep import PorepC2, seal_public_inputs, verify_seal
from cuzk.circuits.filecoin.compound_post import (
    WindowPoSt,
    WinningPoSt,
    fallback_post_public_inputs,
    verify_window_post,
    verify_winning_post,
)
from cuzk.circuits.filecoin.compound_snap import SnapUpdate, verify_update
from cuzk.circuits.filecoin.post import FallbackPoStCircuit
from cuzk.circuits.registry import lookup
from cuzk.cli.main import main
from cuzk.curve.points import G1Point, G2Point, Scalar
from cuzk.errors import CuzkError, SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.filecoin.c1 import SealCommitPhase1Output, VanillaStackedProof
from cuzk.filecoin.challenges import porep_challenges, post_sector_challenges, replica_id
from cuzk.filecoin.merkle import MerkleProof, PathElement
from cuzk.filecoin.porep import SealedSector, random_sector_data, seal
from cuzk.filecoin.post import window_post_vanilla, winning_post_vanilla
from cuzk.filecoin.sizes import post_proof, seal_proof, sector_params
from cuzk.filecoin.snap import ChallengeProof, PartitionProof, UpdatedSector, encode_update, partition_proof
from cuzk.filecoin.synthetic import generate_c1
from cuzk.groth16.formats.params_file import read_params, read_vk
from cuzk.groth16.keys import ProvingKey, VerifyingKey, prepare_verifying_key
from cuzk.groth16.proof import Proof, proofs_to_bytes
from cuzk.groth16.setup import ToxicWaste, generate_insecure_parameters
from cuzk.groth16.synthesis import circuit_shape

PROVER = bytes([0xE8, 0x07]) + bytes(30)  # actor 1000
OTHER_PROVER = bytes([0xE9, 0x07]) + bytes(30)
SECTOR = 42
RANDOMNESS = bytes(range(31)) + b"\x1f"


def _fr(b: bytes) -> int:
    return int.from_bytes(b, "little")


def _bump(b: bytes) -> bytes:
    """Another canonical field element."""
    return ((_fr(b) + 1) % R_MODULUS).to_bytes(32, "little")


# -- a verifying key with known discrete logs ----------------------------------------------------

def _scalar(x: int) -> Scalar:
    return Scalar.from_le_bytes((x % R_MODULUS).to_bytes(32, "little"))


@dataclass
class TrapdoorKey:
    """A verifying key whose α, β, γ, δ and IC discrete logs are known.

    For inputs x (x_0 = 1) and random a, b, the proof (a·G1, b·G2, c·G1) with
    c = (a·b − α·β − γ·Σ x_i·k_i) / δ satisfies e(A, B) = e(α, β)·e(Σ x_i·IC_i, γ)·e(C, δ) exactly
    for those inputs, and for no others (except with negligible probability).
    """

    alpha: int
    beta: int
    gamma: int
    delta: int
    ic_logs: list[int]
    vk: VerifyingKey
    rng: random.Random

    @classmethod
    def new(cls, num_inputs: int, seed: int) -> TrapdoorKey:
        rng = random.Random(seed)
        alpha, beta, gamma, delta = (1 + rng.randrange(R_MODULUS - 1) for _ in range(4))
        logs = [rng.randrange(R_MODULUS) for _ in range(num_inputs + 1)]
        g1, g2 = G1Point(), G2Point()
        vk = VerifyingKey(g1 * _scalar(alpha), g1 * _scalar(beta), g2 * _scalar(beta), g2 * _scalar(gamma),
                          g1 * _scalar(delta), g2 * _scalar(delta), [g1 * _scalar(k) for k in logs])
        return cls(alpha, beta, gamma, delta, logs, vk, rng)

    def forge(self, inputs: list[int]) -> Proof:
        assert len(inputs) + 1 == len(self.ic_logs)
        a, b = 1 + self.rng.randrange(R_MODULUS - 1), 1 + self.rng.randrange(R_MODULUS - 1)
        acc = sum(x * k for x, k in zip([1, *inputs], self.ic_logs, strict=True))
        c = (a * b - self.alpha * self.beta - self.gamma * acc) * pow(self.delta, -1, R_MODULUS)
        return Proof(G1Point() * _scalar(a), G2Point() * _scalar(b), G1Point() * _scalar(c))

    def forge_all(self, compound: object) -> bytes:
        return proofs_to_bytes([self.forge(compound.public_inputs(k))  # type: ignore[attr-defined]
                                for k in range(compound.partition_count)])  # type: ignore[attr-defined]


# -- fixtures ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def c1_2k() -> SealCommitPhase1Output:
    return generate_c1("2KiB", sparse=False, seed=5, prover_id=PROVER, sector_id=SECTOR)


@pytest.fixture(scope="module")
def sector_2k() -> SealedSector:
    return seal(seal_proof(5), random_sector_data(64, 11), PROVER, 7, bytes(32))


@pytest.fixture(scope="module")
def update_2k(sector_2k: SealedSector) -> UpdatedSector:
    return encode_update(sector_params("2KiB"), sector_2k, random_sector_data(64, 12))


def _winning(sector: SealedSector, sector_id: int = 7) -> WinningPoSt:
    vanilla = winning_post_vanilla(post_proof(0), {sector_id: sector}, RANDOMNESS, PROVER)
    return WinningPoSt.from_vanilla(vanilla, registered_proof=0, randomness=RANDOMNESS, prover_id=PROVER)


def _snap(update: UpdatedSector, proofs: list[PartitionProof] | None = None) -> SnapUpdate:
    return SnapUpdate.from_vanilla(proofs or [partition_proof(update, 0)], registered_proof="StackedDrg2KiBV1",
                                   comm_r_old=update.comm_r_old, comm_r_new=update.comm_r_new,
                                   comm_d_new=update.comm_d_new)


def _with_proof(c1: SealCommitPhase1Output, i: int, proof: VanillaStackedProof) -> SealCommitPhase1Output:
    """c1 with partition 0's i-th vanilla proof replaced."""
    part = list(c1.vanilla_proofs[0])
    part[i] = proof
    return replace(c1, vanilla_proofs=(tuple(part), *c1.vanilla_proofs[1:]))


def _bump_sibling(mp: MerkleProof, level: int = 0) -> MerkleProof:
    e = mp.base_path[level]
    bumped = PathElement((_bump(e.hashes[0]), *e.hashes[1:]), e.index)
    return replace(mp, base_path=(*mp.base_path[:level], bumped, *mp.base_path[level + 1:]))


# -- PoRep ----------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_porep_2kib_partition_is_satisfied_with_the_verifier_inputs(c1_2k: SealCommitPhase1Output) -> None:
    c2 = PorepC2.from_c1(c1_2k, prover_id=PROVER, sector_id=SECTOR)
    assert (c2.circuit_id, c2.partition_count) == ("porep-2k", 1)
    expected = c2.public_inputs(0)
    # docs/circuits.md §6 from public data: replica_id recomputed, challenges from replica_id and the seed
    rid = replica_id(PROVER, SECTOR, c1_2k.ticket, c1_2k.comm_d, seal_proof(5).porep_id)
    challenges = porep_challenges(seal_proof(5), rid, c1_2k.seed, c1_2k.comm_r, 0)
    assert expected[:3] == [_fr(rid), _fr(c1_2k.comm_d), _fr(c1_2k.comm_r)]
    assert [expected[3 + 18 * i] for i in range(2)] == challenges == [p.challenge for p in c1_2k.vanilla_proofs[0]]
    assert c2.witness_public_inputs(0) == expected and c2.mismatches(0) == []
    start = time.perf_counter()
    cs = c2.synthesize_partition(0, check=True)  # raises at the first unsatisfied row or on other inputs
    print(f"porep-2k synthesis with checks: {time.perf_counter() - start:.1f} s")
    assert cs.input_assignment[1:] == expected and len(expected) == 39
    assert cs.num_constraints == 2_687_921 + 40


@pytest.mark.slow
def test_porep_tampered_vanilla_proofs_leave_the_circuit_unsatisfied(c1_2k: SealCommitPhase1Output) -> None:
    """Each tamper sits in challenge 0, so checked synthesis stops within its first openings."""
    p = c1_2k.vanilla_proofs[0][0]
    rcp = p.replica_column_proofs
    cp = rcp.drg_parents[2]
    label = replace(cp, column=replace(cp.column, rows=(_bump(cp.column.rows[0]), *cp.column.rows[1:])))
    tampered = {
        "parent label": replace(p, replica_column_proofs=replace(
            rcp, drg_parents=(*rcp.drg_parents[:2], label, *rcp.drg_parents[3:]))),
        "tree_d sibling": replace(p, comm_d_proofs=_bump_sibling(p.comm_d_proofs, 1)),
        "data leaf": replace(p, comm_d_proofs=replace(p.comm_d_proofs, leaf=_bump(p.comm_d_proofs.leaf))),
    }
    for what, bad in tampered.items():
        c1 = _with_proof(c1_2k, 0, bad)
        c2 = PorepC2.from_c1(c1, prover_id=PROVER, sector_id=SECTOR)
        assert c2.vanilla_problems(), what  # the vanilla verifier sees it too
        assert c2.mismatches(0) == [], what  # same openings, so the same inputs: only the rows catch it
        with pytest.raises(SynthesisError):
            c2.synthesize_partition(0, check=True)


def test_porep_inputs_follow_the_public_data_not_the_c1(c1_2k: SealCommitPhase1Output) -> None:
    """A C1 for another prover, sector or seed answers other challenges: its witness exposes other inputs."""
    honest = PorepC2.from_c1(c1_2k, prover_id=PROVER, sector_id=SECTOR)
    wrong_prover = PorepC2.from_c1(c1_2k, prover_id=OTHER_PROVER, sector_id=SECTOR)
    wrong_sector = PorepC2.from_c1(c1_2k, prover_id=PROVER, sector_id=SECTOR + 1)
    assert honest.mismatches(0) == []
    for c2 in (wrong_prover, wrong_sector):
        diff = c2.mismatches(0)
        assert diff[0] == 0 and set(diff) & {3, 21}  # replica_id, and the challenges derived from it
        assert c2.witness_public_inputs(0) == honest.witness_public_inputs(0)
    reseeded = replace(c1_2k, seed=bytes(31) + b"\x01")  # same proofs, another interactive seed
    diff = PorepC2.from_c1(reseeded, prover_id=PROVER, sector_id=SECTOR).mismatches(0)
    assert diff and 0 not in diff and set(diff) & {3, 21}
    # the challenge is labeling_proofs[0].node: answering another node changes the inputs
    p = c1_2k.vanilla_proofs[0][1]
    moved = replace(p, labeling_proofs=(replace(p.labeling_proofs[0], node=p.challenge ^ 1), *p.labeling_proofs[1:]))
    c2 = PorepC2.from_c1(_with_proof(c1_2k, 1, moved), prover_id=PROVER, sector_id=SECTOR)
    assert c2.mismatches(0) == [3 + 18 + 15]  # [c, 6 DRG, 8 exp, >c<, c, c]: only the challenge input


@pytest.mark.parametrize("registered", [0, 10, 15], ids=["V1-legacy-graph", "synthetic", "non-interactive"])
def test_porep_features_derive_their_own_challenges(registered: int) -> None:
    """V1 (parents in the legacy order), SyntheticPoRep and NI-PoRep (13 partitions) C1 outputs map to
    circuits whose openings are the challenges `verify_seal` derives for that feature."""
    proof = seal_proof(registered)
    c1 = generate_c1("2KiB", sparse=False, seed=6, prover_id=PROVER, sector_id=SECTOR, registered_proof=proof)
    c2 = PorepC2.from_c1(c1, prover_id=PROVER, sector_id=SECTOR)
    assert c2.partition_count == proof.partitions == (13 if registered == 15 else 1)
    for k in range(c2.partition_count):
        assert c2.witness_public_inputs(k) == c2.public_inputs(k)
    interactive = seal_public_inputs(5, comm_r=c1.comm_r, comm_d=c1.comm_d, prover_id=PROVER, sector_id=SECTOR,
                                     ticket=c1.ticket, seed=c1.seed, k=0)
    assert interactive[3:] != c2.public_inputs(0)[3:]  # other porep_id, graph or challenge rule


def test_regression_record_public_inputs() -> None:
    """The first 2KiB V1_1 record of seal_regression_records-v16.json, inputs from its public data
    (docs/circuits.md §13)."""
    h = bytes.fromhex
    inputs = seal_public_inputs(
        "StackedDrg2KiBV1_1",
        comm_r=h("d67d57ea6808fd67bdedb331388b5005d3f837b6153c37ff90e720f10f34fc29"),
        comm_d=h("7e45f0925dc72593d6b296100e6ca63e3341c92a50c0e7a9461883a3c959ea28"),
        prover_id=h("101cbe4b9c42604f04c703c396f788c6cb2d6d7d58f45430b12eb2edd640076c"),
        sector_id=9259733836259213201,
        ticket=h("e8867f2000d5597a0a5f4382c52b8b89890019df5320d486a067f38e6c68624b"),
        seed=h("56964257e0d6c11e074117b36172fff3ebd1a6ec18fa79555e58df5a9d889dcb"), k=0)
    assert inputs[0] == _fr(h("da838d3efe2e28665cd17ebfa274f67af8c3b51dfb01e8c6bf8892e712d62006"))
    assert inputs[3:] == [57, 56, 56, 48, 50, 42, 55, 46, 41, 13, 46, 44, 31, 3, 15, 57, 57, 57,
                          58, 57, 45, 11, 54, 56, 57, 51, 52, 38, 18, 33, 8, 54, 40, 58, 58, 58]


def test_porep_c1_validation(c1_2k: SealCommitPhase1Output) -> None:
    def refused(c1: SealCommitPhase1Output, match: str, **kw: object) -> None:
        args = {"prover_id": PROVER, "sector_id": SECTOR, **kw}
        with pytest.raises(CompoundError, match=match):
            PorepC2.from_c1(c1, **args)  # type: ignore[arg-type]

    p = c1_2k.vanilla_proofs[0][0]
    rcp = p.replica_column_proofs
    other_root = replace(rcp.exp_parents[0], inclusion_proof=replace(rcp.exp_parents[0].inclusion_proof,
                                                                     root=_bump(p.comm_r_last_proof.root)))
    refused(_with_proof(c1_2k, 0, replace(p, replica_column_proofs=replace(
        rcp, exp_parents=(other_root, *rcp.exp_parents[1:])))), "inconsistent comm_c")
    q = c1_2k.vanilla_proofs[0][1]
    refused(_with_proof(c1_2k, 1, replace(q, comm_r_last_proof=replace(q.comm_r_last_proof, root=bytes(32)))),
            "inconsistent comm_r_last")
    refused(replace(c1_2k, vanilla_proofs=(c1_2k.vanilla_proofs[0][:1],)), "1 vanilla proofs, expected 2")
    refused(replace(c1_2k, vanilla_proofs=c1_2k.vanilla_proofs * 2), "2 partition")
    refused(replace(c1_2k, comm_d=_bump(c1_2k.comm_d)), "comm_d proof's root is not the C1 comm_d")
    refused(replace(c1_2k, comm_r=bytes(32)), "all-zero C1 comm_r")
    refused(replace(c1_2k, comm_r=b"\xff" * 32), "canonical")
    refused(replace(c1_2k, registered_proof=seal_proof(6)), r"6 path elements, expected 18 .*StackedDrg8MiBV1_1")
    refused(c1_2k, "32 bytes", prover_id=PROVER[:31])
    refused(c1_2k, "u64", sector_id=-1)
    c2 = PorepC2.from_c1(c1_2k, prover_id=PROVER, sector_id=SECTOR)
    with pytest.raises(CompoundError, match="partition 1 out of range"):
        c2.partition_circuit(1)


# -- PoSt -----------------------------------------------------------------------------------------------

def test_winning_post_2kib(sector_2k: SealedSector) -> None:
    """One sector, 66 openings → 66 one-challenge circuit sectors, challenged with indices 0..65."""
    w = _winning(sector_2k)
    assert (w.circuit_id, w.partition_count) == ("winning-2k", 1)
    inputs = w.public_inputs(0)
    assert len(inputs) == 132 and inputs[0::2] == [_fr(sector_2k.comm_r)] * 66
    assert inputs[1::2] == post_sector_challenges(post_proof(0), RANDOMNESS, [7])[7]
    assert w.witness_public_inputs(0) == inputs
    cs = w.synthesize_partition(0, check=True)
    assert cs.input_assignment[1:] == inputs and cs.num_constraints == 90_750 + 133
    # a tampered leaf fails the rows; a proof for another sector id exposes other challenges
    s = w.sector_proof.sectors[0]
    bad = replace(s.inclusion_proofs[5], leaf=_bump(s.inclusion_proofs[5].leaf))
    tampered = replace(w.sector_proof, sectors=(replace(s, inclusion_proofs=(
        *s.inclusion_proofs[:5], bad, *s.inclusion_proofs[6:])),))
    with pytest.raises(SynthesisError):
        WinningPoSt.from_vanilla([tampered], registered_proof=0, randomness=RANDOMNESS,
                                 prover_id=PROVER).synthesize_partition(0, check=True)
    relabelled = WinningPoSt.from_vanilla([replace(w.sector_proof, sector_id=8)], registered_proof=0,
                                          randomness=RANDOMNESS, prover_id=PROVER)
    assert len(relabelled.mismatches(0)) >= 60  # every odd position but the few equal by chance
    with pytest.raises(PublicInputMismatchError, match="winning-2k partition 0"):
        relabelled.synthesize_partition(0)


def test_window_post_2kib_partitions_and_the_repeat_rule(sector_2k: SealedSector) -> None:
    """Three sectors, two per partition: partition 1 holds one real sector, repeated in witness and inputs."""
    vanilla = window_post_vanilla(post_proof(10), {7: sector_2k, 8: sector_2k, 9: sector_2k}, RANDOMNESS)
    window = WindowPoSt.from_vanilla(vanilla, registered_proof=10, randomness=RANDOMNESS, prover_id=PROVER)
    assert (window.circuit_id, window.partition_count) == ("wpost-2k", 2)
    last = window.partition_circuit(1)
    assert isinstance(last, FallbackPoStCircuit) and last.openings is not None
    sectors = last.circuit_sectors()
    assert sectors[0] == sectors[1] and int(last.openings.sector_ids[1]) == 9
    inputs = window.public_inputs(1)
    assert len(inputs) == 22 and inputs[:11] == inputs[11:]
    challenges = post_sector_challenges(post_proof(10), RANDOMNESS, [7, 8, 9])
    assert inputs[1:11] == challenges[9] and window.public_inputs(0)[12:] == challenges[8]
    for k in range(2):
        cs = window.synthesize_partition(k, check=True)
        assert cs.input_assignment[1:] == window.public_inputs(k) and cs.num_constraints == 21_866 + 23
    # V1_0_0 indexes challenges by position; one partition proven alone gets its global index
    v1 = window_post_vanilla(post_proof(5), {7: sector_2k, 8: sector_2k, 9: sector_2k}, RANDOMNESS)
    whole = WindowPoSt.from_vanilla(v1, registered_proof=5, randomness=RANDOMNESS, prover_id=PROVER)
    alone = WindowPoSt.from_vanilla(v1[2:], registered_proof=5, randomness=RANDOMNESS, prover_id=PROVER,
                                    partition_index=1)
    assert whole.public_inputs(1) == alone.public_inputs(0) == alone.witness_public_inputs(0)
    assert whole.public_inputs(1) != window.public_inputs(1)
    wrong_index = WindowPoSt.from_vanilla(v1[2:], registered_proof=5, randomness=RANDOMNESS, prover_id=PROVER,
                                          partition_index=0)
    assert wrong_index.mismatches(0)
    # other randomness: other challenges, refused before proving
    other = WindowPoSt.from_vanilla(vanilla, registered_proof=10, randomness=_bump(RANDOMNESS), prover_id=PROVER)
    with pytest.raises(PublicInputMismatchError):
        other.synthesize_partition(0)


def test_post_validation(sector_2k: SealedSector) -> None:
    vanilla = window_post_vanilla(post_proof(10), {7: sector_2k, 8: sector_2k}, RANDOMNESS)
    kw = {"registered_proof": 10, "randomness": RANDOMNESS, "prover_id": PROVER}
    with pytest.raises(CompoundError, match="out of order"):
        WindowPoSt.from_vanilla(vanilla[::-1], **kw)  # type: ignore[arg-type]
    with pytest.raises(CompoundError, match="duplicate sector"):
        WindowPoSt.from_vanilla([vanilla[0], vanilla[0]], **kw)  # type: ignore[arg-type]
    with pytest.raises(CompoundError, match="at most 2 fit"):
        WindowPoSt.from_vanilla(window_post_vanilla(post_proof(10), {7: sector_2k, 8: sector_2k, 9: sector_2k},
                                                    RANDOMNESS), partition_index=0, **kw)  # type: ignore[arg-type]
    with pytest.raises(CompoundError, match="not a WindowPoSt proof"):
        WindowPoSt.from_vanilla(vanilla, registered_proof=0, randomness=RANDOMNESS, prover_id=PROVER)
    with pytest.raises(CompoundError, match="randomness is not a canonical"):
        WindowPoSt.from_vanilla(vanilla, registered_proof=10, randomness=b"\xff" * 32, prover_id=PROVER)
    with pytest.raises(CompoundError, match="prover_id must be 32 bytes"):
        WindowPoSt.from_vanilla(vanilla, registered_proof=10, randomness=RANDOMNESS, prover_id=b"")
    s = vanilla[0].sectors[0]
    with pytest.raises(CompoundError, match="9 inclusion proofs, expected 10"):
        WindowPoSt.from_vanilla([replace(vanilla[0], sectors=(replace(s, inclusion_proofs=s.inclusion_proofs[:9]),)),
                                 vanilla[1]], **kw)  # type: ignore[arg-type]
    with pytest.raises(CompoundError, match="inconsistent roots"):
        WindowPoSt.from_vanilla([replace(vanilla[0], sectors=(replace(s, comm_r_last=_bump(s.comm_r_last)),)),
                                 vanilla[1]], **kw)  # type: ignore[arg-type]
    with pytest.raises(CompoundError, match="2 sector proofs, expected 1"):
        WinningPoSt.from_vanilla(vanilla, registered_proof=0, randomness=RANDOMNESS, prover_id=PROVER)
    with pytest.raises(CompoundError, match="10 inclusion proofs, expected 66"):
        WinningPoSt.from_vanilla(vanilla[:1], registered_proof=0, randomness=RANDOMNESS, prover_id=PROVER)
    with pytest.raises(CompoundError, match=r"2 path elements, expected 6 .*Window8MiBV1_2, for 8MiB sectors"):
        WindowPoSt.from_vanilla(vanilla[:1], registered_proof=11, randomness=RANDOMNESS, prover_id=PROVER)


# -- SnapDeals --------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_snap_2kib_partition_is_satisfied(update_2k: UpdatedSector) -> None:
    snap = _snap(update_2k)
    assert (snap.circuit_id, snap.partition_count, snap.h) == ("snap-2k", 1, 1)
    inputs = snap.public_inputs(0)
    assert inputs == [1, _fr(update_2k.comm_r_old), _fr(update_2k.comm_d_new), _fr(update_2k.comm_r_new)]
    assert snap.witness_public_inputs(0) == inputs
    cs = snap.synthesize_partition(0, check=True)
    assert cs.input_assignment[1:] == inputs and cs.num_constraints == 1_705_039 + 5


@pytest.mark.slow
def test_snap_tampered_or_misattributed_proofs_fail(update_2k: UpdatedSector, sector_2k: SealedSector) -> None:
    part = partition_proof(update_2k, 0)
    cp = part.challenge_proofs[0]
    bad = replace(part, challenge_proofs=(replace(cp, proof_r_old=_bump_sibling(cp.proof_r_old)),
                                          *part.challenge_proofs[1:]))
    with pytest.raises(SynthesisError):
        _snap(update_2k, [bad]).synthesize_partition(0, check=True)
    # the proofs of another update presented for this one: other challenges, no satisfying witness
    other = encode_update(sector_params("2KiB"), sector_2k, random_sector_data(64, 13))
    with pytest.raises(CompoundError, match="root is not comm_d_new"):
        _snap(update_2k, [partition_proof(other, 0)])
    misattributed = SnapUpdate.from_vanilla([partition_proof(other, 0)], registered_proof=0,
                                            comm_r_old=update_2k.comm_r_old, comm_r_new=update_2k.comm_r_new,
                                            comm_d_new=other.comm_d_new)
    with pytest.raises(SynthesisError):
        misattributed.synthesize_partition(0, check=True)


def test_snap_validation(update_2k: UpdatedSector) -> None:
    part = partition_proof(update_2k, 0)
    with pytest.raises(CompoundError, match="2 partition proofs, expected 1"):
        _snap(update_2k, [part, part])
    with pytest.raises(CompoundError, match="7 apex leaves, expected 8"):
        _snap(update_2k, [replace(part, apex_leafs=part.apex_leafs[:7])])
    with pytest.raises(CompoundError, match="9 challenge proofs, expected 10"):
        _snap(update_2k, [replace(part, challenge_proofs=part.challenge_proofs[:9])])
    cp = part.challenge_proofs[3]
    moved = ChallengeProof(replace(cp.proof_r_old, root=bytes(32)), cp.proof_d_new, cp.proof_r_new)
    with pytest.raises(CompoundError, match="inconsistent roots"):
        _snap(update_2k, [replace(part, challenge_proofs=(*part.challenge_proofs[:3], moved,
                                                          *part.challenge_proofs[4:]))])
    with pytest.raises(CompoundError, match="comm_r_new is not a canonical"):
        SnapUpdate.from_vanilla([part], registered_proof=0, comm_r_old=update_2k.comm_r_old, comm_r_new=b"\xff" * 32,
                                comm_d_new=update_2k.comm_d_new)
    with pytest.raises(CompoundError, match="1 partition proofs, expected 4"):  # an 8MiB update proof type
        SnapUpdate.from_vanilla([part], registered_proof=1, comm_r_old=update_2k.comm_r_old,
                                comm_r_new=update_2k.comm_r_new, comm_d_new=update_2k.comm_d_new)


# -- verification entry points -----------------------------------------------------------------------

def test_verify_seal_derives_the_prover_inputs(c1_2k: SealCommitPhase1Output) -> None:
    """Forged proofs for the prover's inputs verify under `verify_seal`; any other public value fails."""
    c2 = PorepC2.from_c1(c1_2k, prover_id=PROVER, sector_id=SECTOR)
    key = TrapdoorKey.new(39, seed=1)
    proof = key.forge_all(c2)
    pvk = prepare_verifying_key(key.vk)
    public = {"comm_r": c1_2k.comm_r, "comm_d": c1_2k.comm_d, "prover_id": PROVER, "sector_id": SECTOR,
              "ticket": c1_2k.ticket, "seed": c1_2k.seed, "registered_proof": "StackedDrg2KiBV1_1"}
    assert verify_seal(pvk, proof, **public)  # type: ignore[arg-type]
    for name, value in (("comm_r", _bump(c1_2k.comm_r)), ("comm_d", _bump(c1_2k.comm_d)),
                        ("prover_id", OTHER_PROVER), ("sector_id", SECTOR + 1), ("ticket", _bump(c1_2k.ticket)),
                        ("seed", _bump(c1_2k.seed)), ("registered_proof", "StackedDrg2KiBV1")):
        assert not verify_seal(pvk, proof, **{**public, name: value}), name  # type: ignore[arg-type]
    with pytest.raises(ProofLengthError, match="192 bytes"):
        verify_seal(pvk, proof[:-1], **public)  # type: ignore[arg-type]
    with pytest.raises(ProofLengthError, match="got 384"):
        verify_seal(pvk, proof * 2, **public)  # type: ignore[arg-type]
    with pytest.raises(CompoundError, match="all-zero comm_d"):
        verify_seal(pvk, proof, **{**public, "comm_d": bytes(32)})  # type: ignore[arg-type]
    with pytest.raises(CuzkError):
        verify_seal(pvk, bytes(192), **public)  # not points


@pytest.mark.slow
def test_verify_seal_32gib_partitions_in_order() -> None:
    """A sparse 32GiB C1: 10 partitions of 18 challenges (327 inputs each), verified as one batch."""
    c2 = sample_compound("porep-32g", seed=2)
    assert isinstance(c2, PorepC2) and c2.partition_count == 10
    assert all(c2.witness_public_inputs(k) == c2.public_inputs(k) for k in range(10))
    key = TrapdoorKey.new(327, seed=2)
    proof = key.forge_all(c2)
    c1 = c2.c1
    public = {"comm_r": c1.comm_r, "comm_d": c1.comm_d, "prover_id": c2.prover_id, "sector_id": c2.sector_id,
              "ticket": c1.ticket, "seed": c1.seed, "registered_proof": c1.registered_proof}
    assert len(proof) == 1920 and verify_seal(key.vk, proof, **public)  # type: ignore[arg-type]
    swapped = proof[192:384] + proof[:192] + proof[384:]
    assert not verify_seal(key.vk, swapped, **public)  # type: ignore[arg-type]


def test_verify_post_derives_the_prover_inputs(sector_2k: SealedSector) -> None:
    w = _winning(sector_2k)
    key = TrapdoorKey.new(132, seed=3)
    proof = key.forge_all(w)
    kw = {"registered_proof": 0, "randomness": RANDOMNESS, "prover_id": PROVER}
    assert verify_winning_post(key.vk, proof, replicas={7: sector_2k.comm_r}, **kw)  # type: ignore[arg-type]
    assert not verify_winning_post(key.vk, proof, replicas={7: _bump(sector_2k.comm_r)}, **kw)  # type: ignore[arg-type]
    assert not verify_winning_post(key.vk, proof, replicas={8: sector_2k.comm_r}, **kw)  # type: ignore[arg-type]
    assert not verify_winning_post(key.vk, proof, replicas={7: sector_2k.comm_r}, registered_proof=0,
                                   randomness=_bump(RANDOMNESS), prover_id=PROVER)
    with pytest.raises(CompoundError, match="verifies exactly 1"):
        verify_winning_post(key.vk, proof, replicas={7: sector_2k.comm_r, 8: sector_2k.comm_r},
                            **kw)  # type: ignore[arg-type]

    vanilla = window_post_vanilla(post_proof(10), {9: sector_2k, 7: sector_2k, 8: sector_2k}, RANDOMNESS)
    vanilla.sort(key=lambda p: p.sector_id)
    window = WindowPoSt.from_vanilla(vanilla, registered_proof=10, randomness=RANDOMNESS, prover_id=PROVER)
    key = TrapdoorKey.new(22, seed=4)
    proof = key.forge_all(window)
    replicas = {9: sector_2k.comm_r, 7: sector_2k.comm_r, 8: sector_2k.comm_r}  # any order: sorted by id
    kw["registered_proof"] = "StackedDrgWindow2KiBV1_1"  # the chain name of the V1_2 proof
    assert verify_window_post(key.vk, proof, replicas=replicas, **kw)  # type: ignore[arg-type]
    assert not verify_window_post(key.vk, proof, replicas={**replicas, 8: _bump(sector_2k.comm_r)},
                                  **kw)  # type: ignore[arg-type]
    assert not verify_window_post(key.vk, proof, replicas=replicas, registered_proof=5, randomness=RANDOMNESS,
                                  prover_id=PROVER)  # V1 indexes challenges differently
    with pytest.raises(ProofLengthError, match="2 partition"):
        verify_window_post(key.vk, proof[:192], replicas=replicas, **kw)  # type: ignore[arg-type]
    assert fallback_post_public_inputs(10, randomness=RANDOMNESS, sectors=sorted(replicas.items()),
                                       k=1) == window.public_inputs(1)


def test_verify_update_derives_the_prover_inputs(update_2k: UpdatedSector) -> None:
    for snap in (_snap(update_2k), sample_compound("snap-8m", seed=4)):
        assert isinstance(snap, SnapUpdate)
        key = TrapdoorKey.new(4, seed=5)
        proof = key.forge_all(snap)
        assert len(proof) == 192 * snap.partition_count
        kw = {"registered_proof": snap.registered_proof, "comm_r_old": snap.comm_r_old, "comm_r_new": snap.comm_r_new,
              "comm_d_new": snap.comm_d_new}
        assert verify_update(key.vk, proof, **kw)  # type: ignore[arg-type]
        for name in ("comm_r_old", "comm_r_new", "comm_d_new"):
            assert not verify_update(key.vk, proof, **{**kw, name: _bump(kw[name])})  # type: ignore[arg-type]
    assert snap.partition_count == 4 and snap.public_inputs(3)[0] == 3 + 32  # docs/circuits.md §10: 8MiB k + 32


# -- the registry -------------------------------------------------------------------------------------------

def test_registry_knows_the_filecoin_circuits() -> None:
    spec = lookup("porep-32g")
    assert spec.is_filecoin and spec.params_file_name == (
        "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-"
        "82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820.params")
    assert "10 partition" in spec.description
    assert lookup("snap-2k").params_file_name.startswith("v28-empty-sector-update-merkletree-poseidon_hasher-8-0-0-")
    assert not lookup("mimc-5").is_filecoin and lookup("mimc-5").params_file_name is None
    shape = circuit_shape(lookup("wpost-2k").blank())
    assert (shape.num_constraints, shape.num_inputs) == (21_866 + 23, 23)
    example = lookup("wpost-2k").example(random.Random(1))
    assert len(example.public_inputs()) == 22  # type: ignore[attr-defined]
    with pytest.raises(CuzkError, match="unknown circuit 'porep-4k'"):
        lookup("porep-4k")
    assert isinstance(blank_circuit("winning-64g"), FallbackPoStCircuit)


@pytest.mark.slow
@pytest.mark.parametrize("circuit_id", ["porep-8m", "porep-64g", "winning-32g", "wpost-64g", "snap-32g"])
def test_larger_samples_expose_the_verifier_inputs(circuit_id: str) -> None:
    """Sparse sectors of the other sizes (sub/top tree levels, several partitions): openings match."""
    compound = sample_compound(circuit_id, seed=7)
    assert compound.circuit_id == circuit_id
    assert all(compound.mismatches(k) == [] for k in range(compound.partition_count))


# -- Groth16 round trips ---------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def winning_2k_params() -> ProvingKey:
    start = time.perf_counter()
    pk = generate_insecure_parameters(blank_circuit("winning-2k"), waste=ToxicWaste.random(random.Random(21)))
    print(f"winning-2k parameters: {time.perf_counter() - start:.1f} s, domain {pk.domain_size}")
    return pk


@pytest.mark.slow
def test_winning_post_groth16_round_trip(winning_2k_params: ProvingKey, sector_2k: SealedSector) -> None:
    w = _winning(sector_2k)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    proof = w.prove(winning_2k_params, timings=timings)
    print(f"winning-2k proof: {time.perf_counter() - start:.1f} s ({timings})")
    assert len(proof) == 192
    pvk = prepare_verifying_key(winning_2k_params.vk)
    kw = {"registered_proof": "StackedDrgWinning2KiBV1", "randomness": RANDOMNESS, "prover_id": PROVER}
    assert verify_winning_post(pvk, proof, replicas={7: sector_2k.comm_r}, **kw)  # type: ignore[arg-type]
    assert not verify_winning_post(pvk, proof, replicas={7: _bump(sector_2k.comm_r)}, **kw)  # type: ignore[arg-type]
    assert not verify_winning_post(pvk, proof, replicas={7: sector_2k.comm_r}, registered_proof=0,
                                   randomness=_bump(RANDOMNESS), prover_id=PROVER)
    # prover_id is not a public input of the PoSt circuit (as in Rust, it only has to be canonical)
    assert verify_winning_post(pvk, proof, replicas={7: sector_2k.comm_r}, registered_proof=0,
                               randomness=RANDOMNESS, prover_id=OTHER_PROVER)
    with pytest.raises(CompoundError, match="prover_id is not a canonical"):
        verify_winning_post(pvk, proof, replicas={7: sector_2k.comm_r}, registered_proof=0, randomness=RANDOMNESS,
                            prover_id=b"\xff" * 32)
    with pytest.raises(ProofLengthError, match="is 192 bytes"):
        verify_winning_post(pvk, proof + proof, replicas={7: sector_2k.comm_r}, **kw)  # type: ignore[arg-type]


@pytest.mark.slow
def test_window_post_round_trip_with_cli_parameters(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                    sector_2k: SealedSector) -> None:
    """`cuzk params gen --insecure wpost-2k`, then two partitions proven with the file's key (the second
    one repeating its single sector) and checked by `verify_window_post`."""
    out = tmp_path / "wpost-2k.params"
    start = time.perf_counter()
    assert main(["params", "gen", "--insecure", "wpost-2k", str(out), "--seed", "3"]) == 0
    assert "INSECURE" in capsys.readouterr().err
    print(f"wpost-2k parameters (CLI): {time.perf_counter() - start:.1f} s")
    pk = read_params(out)
    assert read_vk(out.with_suffix(".vk")).num_public_inputs == 22 and pk.domain_size == 1 << 15
    vanilla = window_post_vanilla(post_proof(10), {7: sector_2k, 8: sector_2k, 9: sector_2k}, RANDOMNESS)
    window = WindowPoSt.from_vanilla(vanilla, registered_proof=10, randomness=RANDOMNESS, prover_id=PROVER)
    start = time.perf_counter()
    proof = window.prove(pk)
    print(f"wpost-2k proofs (2 partitions): {time.perf_counter() - start:.1f} s")
    replicas = {sid: sector_2k.comm_r for sid in (7, 8, 9)}
    kw = {"registered_proof": 10, "prover_id": PROVER, "replicas": replicas}
    assert verify_window_post(pk.vk, proof, randomness=RANDOMNESS, **kw)  # type: ignore[arg-type]
    assert not verify_window_post(pk.vk, proof, randomness=_bump(RANDOMNESS), **kw)  # type: ignore[arg-type]
    assert not verify_window_post(pk.vk, proof[192:] + proof[:192], randomness=RANDOMNESS,
                                  **kw)  # type: ignore[arg-type]


@pytest.mark.slow
def test_porep_2kib_groth16_round_trip(c1_2k: SealCommitPhase1Output, porep_2k_params: Path) -> None:
    """Seal a 2KiB sector, prove its C2 with insecure parameters (domain 2^22), verify_seal."""
    c2 = PorepC2.from_c1(c1_2k, prover_id=PROVER, sector_id=SECTOR)
    pk = read_params(porep_2k_params)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    proof = c2.prove(pk, timings=timings)
    print(f"porep-2k proof: {time.perf_counter() - start:.1f} s ({timings})")
    public = {"comm_r": c1_2k.comm_r, "comm_d": c1_2k.comm_d, "prover_id": PROVER, "sector_id": SECTOR,
              "ticket": c1_2k.ticket, "seed": c1_2k.seed, "registered_proof": c1_2k.registered_proof}
    start = time.perf_counter()
    assert verify_seal(pk.vk, proof, **public)  # type: ignore[arg-type]
    print(f"porep-2k verification: {time.perf_counter() - start:.2f} s")
    assert not verify_seal(pk.vk, proof, **{**public, "prover_id": OTHER_PROVER})  # type: ignore[arg-type]
    assert not verify_seal(pk.vk, proof, **{**public, "comm_r": _bump(c1_2k.comm_r)})  # type: ignore[arg-type]


@pytest.mark.slow
def test_snap_2kib_groth16_round_trip(update_2k: UpdatedSector, official_params_dir: Path) -> None:
    """Encode new data into a sealed 2KiB sector, prove the update (domain 2^21), verify_update."""
    pk = read_params(official_params(official_params_dir, "snap-2k", 23))
    snap = _snap(update_2k)
    proof = snap.prove(pk)
    public = {"registered_proof": 0, "comm_r_old": update_2k.comm_r_old, "comm_r_new": update_2k.comm_r_new,
              "comm_d_new": update_2k.comm_d_new}
    assert verify_update(pk.vk, proof, **public)
    assert not verify_update(pk.vk, proof, **{**public, "comm_r_new": _bump(update_2k.comm_r_new)})
