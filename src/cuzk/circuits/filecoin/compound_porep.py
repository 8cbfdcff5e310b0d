"""PoRep C2 as a compound proof: a C1 output in, one StackedCircuit per partition, `verify_seal`.

The prover side (`PorepC2.from_c1`) mirrors `seal_commit_phase2` + `StackedCompound::circuit`
(docs/circuits.md §6; docs/formats.md §4): the circuit takes replica_id, comm_d and comm_r as found in the C1
output, comm_c and comm_r_last from the roots of the vanilla proofs (they must agree across every
challenge), and per challenge the data leaf, the tree_d / tree_r_last / tree_c paths and the 14
parent columns; the challenge itself is `labeling_proofs[0].node`.

The verifier side (`seal_public_inputs`, `verify_seal`) mirrors `verify_seal`: replica_id is
recomputed from prover_id, sector number, ticket, comm_d and porep_id; the challenges are recomputed
from replica_id and the seed (interactive), from the synthetic set (SyntheticPoRep) or from comm_r
(NonInteractivePoRep); then the inputs of docs/circuits.md §6. A C1 output whose replica_id, challenges or paths do
not match those public values therefore yields a witness with other public inputs, and its proof
fails verification — `PorepC2.synthesize_partition` refuses it before any proving work.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from cuzk.circuits.filecoin.compound import (
    DENSE_SAMPLE_NODES,
    SAMPLE_PROVER_ID,
    CompoundError,
    CompoundProof,
    check_bytes32,
    check_fr,
    check_nonzero,
    check_proof_shape,
    path_levels,
    verify_partition_proofs,
)
from cuzk.circuits.filecoin.porep import (
    BASE_DEGREE,
    EXP_DEGREE,
    ChallengeProof,
    ColumnOpening,
    StackedCircuit,
    StackedConfig,
    porep_public_inputs,
)
from cuzk.filecoin.c1 import ColumnProof, SealCommitPhase1Output, VanillaStackedProof
from cuzk.filecoin.challenges import porep_challenges, replica_id
from cuzk.filecoin.graph import SdrGraph
from cuzk.filecoin.merkle import TreeLayout
from cuzk.filecoin.porep import verify_porep_vanilla
from cuzk.filecoin.sizes import ApiVersion, CircuitKind, RegisteredSealProof, SectorParams, circuit_id, seal_proof
from cuzk.filecoin.synthetic import generate_c1
from cuzk.groth16.keys import PreparedVerifyingKey, VerifyingKey

__all__ = ["PorepC2", "seal_public_inputs", "verify_seal"]

_U64 = 1 << 64


def _registered(proof: RegisteredSealProof | int | str) -> RegisteredSealProof:
    return proof if isinstance(proof, RegisteredSealProof) else seal_proof(proof)


@functools.lru_cache(maxsize=8)
def _graph(nodes: int, porep_id: bytes, api_version: ApiVersion) -> SdrGraph:
    """One graph per porep_id: its Feistel tables take ~0.5 s to build at 32GiB, and every partition's
    public inputs need the parents of its challenges."""
    return SdrGraph(nodes, porep_id, api_version)


def _check_sector_id(sector_id: int) -> int:
    if not isinstance(sector_id, int) or not 0 <= sector_id < _U64:
        raise CompoundError(f"sector number must be a u64, got {sector_id!r}")
    return sector_id


def seal_public_inputs(registered_proof: RegisteredSealProof | int | str, *, comm_r: bytes, comm_d: bytes,
                       prover_id: bytes, sector_id: int, ticket: bytes, seed: bytes, k: int) -> list[int]:
    """Partition k's public inputs as `verify_seal` derives them (docs/circuits.md §5, §6), ONE excluded:
    [replica_id, comm_d, comm_r] then per challenge [c, 6 DRG parents, 8 expander parents, c, c, c]."""
    proof = _registered(registered_proof)
    comm_r_fr = check_fr(comm_r, "comm_r")
    comm_d_fr = check_fr(comm_d, "comm_d")
    check_bytes32(prover_id, "prover_id")
    check_bytes32(ticket, "ticket")
    check_bytes32(seed, "seed")
    _check_sector_id(sector_id)
    if not 0 <= k < proof.partitions:
        raise CompoundError(f"{proof.name}: partition {k} out of range ({proof.partitions} partitions)")
    rid = replica_id(prover_id, sector_id, ticket, comm_d, proof.porep_id)
    challenges = porep_challenges(proof, rid, seed, comm_r, k)
    graph = _graph(proof.size.nodes, proof.porep_id, proof.api_version)
    rows = graph.parents_array(challenges).tolist()
    return porep_public_inputs(int.from_bytes(rid, "little"), comm_d_fr, comm_r_fr,
                               [(c, row[:BASE_DEGREE], row[BASE_DEGREE:]) for c, row in zip(challenges, rows,
                                                                                            strict=True)])


def verify_seal(vk: VerifyingKey | PreparedVerifyingKey, proof_bytes: bytes, *, comm_r: bytes, comm_d: bytes,
                prover_id: bytes, sector_id: int, ticket: bytes, seed: bytes,
                registered_proof: RegisteredSealProof | int | str) -> bool:
    """filecoin-proofs `verify_seal`: P·192 bytes, per-partition public inputs, one batch check.

    comm_r and comm_d must be non-zero canonical field elements (CompoundError otherwise), the
    proof exactly P·192 bytes (ProofLengthError). For NonInteractivePoRep this checks the P raw
    partition proofs the circuits produce; the SnarkPack aggregate Rust verifies instead is not
    handled here.
    """
    proof = _registered(registered_proof)
    check_nonzero(comm_d, "comm_d")
    check_nonzero(comm_r, "comm_r")
    inputs = [seal_public_inputs(proof, comm_r=comm_r, comm_d=comm_d, prover_id=prover_id, sector_id=sector_id,
                                 ticket=ticket, seed=seed, k=k) for k in range(proof.partitions)]
    return verify_partition_proofs(vk, proof_bytes, inputs, f"{proof.name} seal proof")


@dataclass
class PorepC2(CompoundProof):
    """A seal commit phase 2 request: the C1 output plus what C2 receives beside it.

    Build with `from_c1`, which validates the C1 layout and the agreement of its roots; the
    vanilla proofs' hashes are not re-checked there (the circuit does; `vanilla_problems` runs the
    full vanilla verifier when an early, itemised answer is wanted). Values inside the vanilla proofs
    are canonical field elements by construction: the C1 JSON and bincode readers refuse others.
    """

    c1: SealCommitPhase1Output
    prover_id: bytes
    sector_id: int
    config: StackedConfig
    comm_c: int
    comm_r_last: int

    @property
    def registered_proof(self) -> RegisteredSealProof:
        return self.c1.registered_proof

    @property
    def circuit_id(self) -> str:  # type: ignore[override]
        return circuit_id(CircuitKind.POREP, self.registered_proof.size)

    @property
    def partition_count(self) -> int:  # type: ignore[override]
        return self.registered_proof.partitions

    @classmethod
    def from_c1(cls, c1: SealCommitPhase1Output, *, prover_id: bytes, sector_id: int) -> PorepC2:
        proof = c1.registered_proof
        size = proof.size
        check_bytes32(prover_id, "prover_id")
        _check_sector_id(sector_id)
        for name in ("comm_r", "comm_d", "replica_id"):
            check_fr(getattr(c1, name), f"C1 {name}")
        check_bytes32(c1.seed, "C1 seed")
        check_bytes32(c1.ticket, "C1 ticket")
        for name in ("comm_r", "comm_d", "seed"):
            check_nonzero(getattr(c1, name), f"C1 {name}")
        try:
            config = StackedConfig.production(size.sector_bytes)
        except ValueError as err:
            raise CompoundError(str(err)) from None
        if len(c1.vanilla_proofs) != proof.partitions:
            raise CompoundError(f"{proof.name}: C1 has {len(c1.vanilla_proofs)} partition(s) of vanilla proofs, "
                                f"expected {proof.partitions}")
        if proof.challenges_per_partition != config.challenges:
            raise CompoundError(f"{proof.name}: {proof.challenges_per_partition} challenges per partition, but the "
                                f"{size.name} circuit has {config.challenges}")
        tree_d, tree_r = TreeLayout.tree_d(size.nodes), TreeLayout.tree_r(size)
        comm_c: bytes | None = None
        comm_r_last: bytes | None = None
        for k, part in enumerate(c1.vanilla_proofs):
            if len(part) != config.challenges:
                raise CompoundError(f"partition {k}: {len(part)} vanilla proofs, expected {config.challenges} "
                                    "(one per challenge)")
            for i, p in enumerate(part):
                where = f"partition {k} challenge {i}"
                _check_layout(p, config, tree_d, tree_r, where, proof)
                if p.comm_d_proofs.root != c1.comm_d:
                    raise CompoundError(f"{where}: the comm_d proof's root is not the C1 comm_d")
                roots_c = {cp.inclusion_proof.root for cp in _columns(p)}
                comm_c = comm_c if comm_c is not None else p.replica_column_proofs.c_x.inclusion_proof.root
                if roots_c != {comm_c}:
                    raise CompoundError(f"{where}: inconsistent comm_c: the tree_c proofs of the C1 output have "
                                        "different roots")
                comm_r_last = comm_r_last if comm_r_last is not None else p.comm_r_last_proof.root
                if p.comm_r_last_proof.root != comm_r_last:
                    raise CompoundError(f"{where}: inconsistent comm_r_last: the tree_r_last proofs of the C1 output "
                                        "have different roots")
        assert comm_c is not None and comm_r_last is not None  # at least one partition with one challenge
        return cls(c1, bytes(prover_id), sector_id, config, check_fr(comm_c, "comm_c (tree_c root)"),
                   check_fr(comm_r_last, "comm_r_last (tree_r_last root)"))

    @classmethod
    def sample(cls, size: SectorParams, *, seed: int = 0) -> PorepC2:
        """Over a fresh C1 output of a test sector (dense 2KiB, sparse beyond; V1_1, interactive)."""
        c1 = generate_c1(size, sparse=size.nodes > DENSE_SAMPLE_NODES, seed=seed, prover_id=SAMPLE_PROVER_ID,
                         sector_id=1)
        return cls.from_c1(c1, prover_id=SAMPLE_PROVER_ID, sector_id=1)

    def partition_circuit(self, k: int) -> StackedCircuit:
        self._check_k(k)
        c1 = self.c1
        proofs = [_challenge_proof(p) for p in c1.vanilla_proofs[k]]
        return StackedCircuit(self.config, int.from_bytes(c1.replica_id, "little"), int.from_bytes(c1.comm_d, "little"),
                              int.from_bytes(c1.comm_r, "little"), self.comm_r_last, self.comm_c, proofs)

    def public_inputs(self, k: int) -> list[int]:
        self._check_k(k)
        c1 = self.c1
        return seal_public_inputs(self.registered_proof, comm_r=c1.comm_r, comm_d=c1.comm_d, prover_id=self.prover_id,
                                  sector_id=self.sector_id, ticket=c1.ticket, seed=c1.seed, k=k)

    def witness_public_inputs(self, k: int) -> list[int]:
        self._check_k(k)
        c1 = self.c1
        inputs = [int.from_bytes(v, "little") for v in (c1.replica_id, c1.comm_d, c1.comm_r)]
        for p in c1.vanilla_proofs[k]:
            rcp = p.replica_column_proofs
            inputs.append(p.comm_d_proofs.path_index)
            inputs += [cp.inclusion_proof.path_index for cp in (*rcp.drg_parents, *rcp.exp_parents)]
            inputs += [p.challenge, p.comm_r_last_proof.path_index, rcp.c_x.inclusion_proof.path_index]
        return inputs

    def vanilla_problems(self) -> list[str]:
        """Everything the vanilla verifier finds wrong with the C1 output (empty = valid)."""
        return verify_porep_vanilla(self.c1, prover_id=self.prover_id, sector_id=self.sector_id)


def _columns(p: VanillaStackedProof) -> tuple[ColumnProof, ...]:
    rcp = p.replica_column_proofs
    return (rcp.c_x, *rcp.drg_parents, *rcp.exp_parents)


def _check_layout(p: VanillaStackedProof, config: StackedConfig, tree_d: TreeLayout, tree_r: TreeLayout,
                  where: str, proof: RegisteredSealProof) -> None:
    """What would change the circuit's rows, or leave the challenge undefined, is refused here."""
    rcp = p.replica_column_proofs
    if len(rcp.drg_parents) != BASE_DEGREE or len(rcp.exp_parents) != EXP_DEGREE:
        raise CompoundError(f"{where}: {len(rcp.drg_parents)} DRG and {len(rcp.exp_parents)} expander parent "
                            f"columns, expected {BASE_DEGREE} and {EXP_DEGREE}")
    if not p.labeling_proofs:
        raise CompoundError(f"{where}: no labeling proofs (the challenge is labeling_proofs[0].node)")
    if not 0 <= p.challenge < config.nodes:
        raise CompoundError(f"{where}: challenge {p.challenge} is not a node of a {config.nodes}-node sector")
    registered = f"{proof.name}, for {proof.size.name} sectors"
    check_proof_shape(p.comm_d_proofs, tree_d, f"{where}: comm_d proof", registered)
    check_proof_shape(p.comm_r_last_proof, tree_r, f"{where}: comm_r_last proof", registered)
    for j, cp in enumerate(_columns(p)):
        name = "c_x" if j == 0 else f"drg parent {j - 1}" if j <= BASE_DEGREE else f"exp parent {j - 1 - BASE_DEGREE}"
        if len(cp.column.rows) != config.layers:
            raise CompoundError(f"{where}: {name} column has {len(cp.column.rows)} rows, expected {config.layers}")
        check_proof_shape(cp.inclusion_proof, tree_r, f"{where}: {name} tree_c proof", registered)


def _challenge_proof(p: VanillaStackedProof) -> ChallengeProof:
    """docs/circuits.md §6: the circuit's witness of one challenge."""
    rcp = p.replica_column_proofs

    def opening(cp: ColumnProof) -> ColumnOpening:
        return ColumnOpening([int.from_bytes(r, "little") for r in cp.column.rows], path_levels(cp.inclusion_proof))

    return ChallengeProof(
        challenge=p.challenge,
        data_leaf=int.from_bytes(p.comm_d_proofs.leaf, "little"),
        comm_d_path=path_levels(p.comm_d_proofs),
        drg_parents=[opening(cp) for cp in rcp.drg_parents],
        exp_parents=[opening(cp) for cp in rcp.exp_parents],
        comm_r_last_path=path_levels(p.comm_r_last_proof),
        comm_c_path=path_levels(rcp.c_x.inclusion_proof),
    )
