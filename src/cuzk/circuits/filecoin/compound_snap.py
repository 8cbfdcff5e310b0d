"""SnapDeals (EmptySectorUpdate) as a compound proof: one vanilla PartitionProof per partition in,
one EmptySectorUpdateCircuit per partition out, and `verify_update` (docs/circuits.md §10, §12).

Mirrors `generate_empty_sector_update_proof_with_vanilla` + `EmptySectorUpdateCompound::circuit`:
partition k's circuit takes comm_c, the apex leaves and the challenge openings from the k-th
partition proof, root_r_old / root_r_new from the roots of its first challenge's openings, and the
public comm_r_old, comm_d_new, comm_r_new and h (always the size's default h, `hs[3]`, as Rust's
`SectorUpdateConfig`). The four public inputs (docs/circuits.md §10) depend on public values only; the challenges
are derived inside the circuit from comm_r_new, so a partition proof that opens other leaves, or
leaves that do not encode as claimed, leaves the circuit unsatisfied rather than changing an input.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from cuzk.circuits.filecoin.compound import (
    DENSE_SAMPLE_NODES,
    CompoundError,
    CompoundProof,
    check_fr,
    check_proof_shape,
    path_siblings,
    sample_sector,
    verify_partition_proofs,
)
from cuzk.circuits.filecoin.snap import EmptySectorUpdateCircuit, EmptySectorUpdateConfig, UpdateChallengeProof
from cuzk.filecoin.merkle import TreeLayout
from cuzk.filecoin.porep import random_sector_data
from cuzk.filecoin.sha256 import fr_to_bytes
from cuzk.filecoin.sizes import CircuitKind, RegisteredUpdateProof, SectorParams, circuit_id, update_proof
from cuzk.filecoin.snap import PartitionProof, encode_update, encode_update_sparse, partition_proof
from cuzk.groth16.keys import PreparedVerifyingKey, VerifyingKey

__all__ = ["SnapUpdate", "update_public_inputs", "verify_update"]


def _registered(registered_proof: RegisteredUpdateProof | int | str) -> RegisteredUpdateProof:
    return registered_proof if isinstance(registered_proof, RegisteredUpdateProof) else update_proof(registered_proof)


def _config(proof: RegisteredUpdateProof) -> EmptySectorUpdateConfig:
    return EmptySectorUpdateConfig.for_sector_size(proof.size.sector_bytes)


def update_public_inputs(registered_proof: RegisteredUpdateProof | int | str, *, comm_r_old: bytes,
                         comm_d_new: bytes, comm_r_new: bytes, k: int) -> list[int]:
    """Partition k's inputs (ONE excluded): [k + (h_select << log2 P), comm_r_old, comm_d_new, comm_r_new]."""
    proof = _registered(registered_proof)
    config = _config(proof)
    if not 0 <= k < config.partition_count:
        raise CompoundError(f"{proof.name}: partition {k} out of range ({config.partition_count} partitions)")
    return config.public_inputs(k, proof.size.snap_h, check_fr(comm_r_old, "comm_r_old"),
                                check_fr(comm_d_new, "comm_d_new"), check_fr(comm_r_new, "comm_r_new"))


def verify_update(vk: VerifyingKey | PreparedVerifyingKey, proof_bytes: bytes, *,
                  registered_proof: RegisteredUpdateProof | int | str, comm_r_old: bytes, comm_r_new: bytes,
                  comm_d_new: bytes) -> bool:
    """filecoin-proofs `verify_empty_sector_update_proof`: P·192 bytes, inputs per partition."""
    proof = _registered(registered_proof)
    inputs = [update_public_inputs(proof, comm_r_old=comm_r_old, comm_d_new=comm_d_new, comm_r_new=comm_r_new, k=k)
              for k in range(_config(proof).partition_count)]
    return verify_partition_proofs(vk, proof_bytes, inputs, f"{proof.name} update proof")


@dataclass
class SnapUpdate(CompoundProof):
    """A SnapDeals proving request: the partition proofs plus the three public commitments."""

    registered_proof: RegisteredUpdateProof
    partition_proofs: tuple[PartitionProof, ...]
    comm_r_old: bytes
    comm_r_new: bytes
    comm_d_new: bytes
    config: EmptySectorUpdateConfig

    @property
    def circuit_id(self) -> str:  # type: ignore[override]
        return circuit_id(CircuitKind.SNAP, self.registered_proof.size)

    @property
    def partition_count(self) -> int:  # type: ignore[override]
        return self.config.partition_count

    @property
    def h(self) -> int:
        return self.registered_proof.size.snap_h

    @classmethod
    def from_vanilla(cls, partition_proofs: Sequence[PartitionProof], *,
                     registered_proof: RegisteredUpdateProof | int | str, comm_r_old: bytes, comm_r_new: bytes,
                     comm_d_new: bytes) -> SnapUpdate:
        proof = _registered(registered_proof)
        for name, value in (("comm_r_old", comm_r_old), ("comm_r_new", comm_r_new), ("comm_d_new", comm_d_new)):
            check_fr(value, name)
        config = _config(proof)
        if len(partition_proofs) != config.partition_count:
            raise CompoundError(f"{proof.name}: {len(partition_proofs)} partition proofs, expected "
                                f"{config.partition_count}")
        tree_r, tree_d = TreeLayout.tree_r(proof.size), TreeLayout.tree_d(proof.size.nodes)
        registered = f"{proof.name}, for {proof.size.name} sectors"
        comm_c = partition_proofs[0].comm_c
        roots: tuple[bytes, bytes] | None = None
        for k, part in enumerate(partition_proofs):
            pk = f"partition {k}"
            check_fr(part.comm_c, f"{pk}: comm_c")
            if part.comm_c != comm_c:
                raise CompoundError(f"{pk}: comm_c differs from partition 0's (one sector has one comm_c)")
            if len(part.apex_leafs) != config.apex_leaf_count:
                raise CompoundError(f"{pk}: {len(part.apex_leafs)} apex leaves, expected {config.apex_leaf_count}")
            if len(part.challenge_proofs) != config.challenge_count:
                raise CompoundError(f"{pk}: {len(part.challenge_proofs)} challenge proofs, expected "
                                    f"{config.challenge_count}")
            for leaf_index, leaf in enumerate(part.apex_leafs):
                check_fr(leaf, f"{pk}: apex leaf {leaf_index}")
            top: list[tuple[bytes, ...]] | None = None
            for i, cp in enumerate(part.challenge_proofs):
                at = f"{pk} challenge {i}"
                check_proof_shape(cp.proof_r_old, tree_r, f"{at}: proof_r_old", registered)
                check_proof_shape(cp.proof_d_new, tree_d, f"{at}: proof_d_new", registered)
                check_proof_shape(cp.proof_r_new, tree_r, f"{at}: proof_r_new", registered)
                roots = roots or (cp.proof_r_old.root, cp.proof_r_new.root)
                if (cp.proof_r_old.root, cp.proof_r_new.root) != roots:
                    raise CompoundError(f"{at}: inconsistent roots: the tree_r_old / tree_r_new proofs of the update "
                                        "do not all have the same roots")
                if cp.proof_d_new.root != comm_d_new:
                    raise CompoundError(f"{at}: proof_d_new's root is not comm_d_new")
                path_top = [e.hashes for e in cp.proof_d_new.path[config.challenge_bit_len - config.partition_bit_len:]]
                top = top if top is not None else path_top
                if path_top != top:
                    raise CompoundError(f"{at}: proof_d_new leaves the partition by another path than challenge 0 "
                                        "(the circuit checks the partition path once)")
        return cls(proof, tuple(partition_proofs), bytes(comm_r_old), bytes(comm_r_new), bytes(comm_d_new), config)

    @classmethod
    def sample(cls, size: SectorParams, *, seed: int = 0) -> SnapUpdate:
        """Over fresh partition proofs of an update of a test sector: dense new data for 2KiB; for
        larger (sparse) sectors, new data at 256 seeded nodes and zero elsewhere."""
        sector = sample_sector(size, seed)
        rng = random.Random(seed)
        if size.nodes <= DENSE_SAMPLE_NODES:
            update = encode_update(size, sector, random_sector_data(size.nodes, seed + 1))
        else:
            positions = rng.sample(range(size.nodes), 256)
            update = encode_update_sparse(size, sector, {v: fr_to_bytes(rng.getrandbits(254)) for v in positions})
        proofs = [partition_proof(update, k) for k in range(size.snap_partitions)]
        return cls.from_vanilla(proofs, registered_proof=size.index, comm_r_old=update.comm_r_old,
                                comm_r_new=update.comm_r_new, comm_d_new=update.comm_d_new)

    def partition_circuit(self, k: int) -> EmptySectorUpdateCircuit:
        self._check_k(k)
        part = self.partition_proofs[k]
        first = part.challenge_proofs[0]

        def fr(b: bytes) -> int:
            return int.from_bytes(b, "little")

        proofs = [UpdateChallengeProof(fr(cp.proof_r_old.leaf), path_siblings(cp.proof_r_old), fr(cp.proof_d_new.leaf),
                                       path_siblings(cp.proof_d_new), fr(cp.proof_r_new.leaf),
                                       path_siblings(cp.proof_r_new))
                  for cp in part.challenge_proofs]
        return EmptySectorUpdateCircuit(self.config, k, self.h, fr(self.comm_r_old), fr(self.comm_d_new),
                                        fr(self.comm_r_new), fr(part.comm_c), fr(first.proof_r_old.root),
                                        fr(first.proof_r_new.root), [fr(a) for a in part.apex_leafs], proofs)

    def public_inputs(self, k: int) -> list[int]:
        self._check_k(k)
        return update_public_inputs(self.registered_proof, comm_r_old=self.comm_r_old, comm_d_new=self.comm_d_new,
                                    comm_r_new=self.comm_r_new, k=k)

    def witness_public_inputs(self, k: int) -> list[int]:
        """The same four values: the witness exposes only k, h and the three commitments; vanilla
        proofs answering other challenges show up as an unsatisfied circuit instead."""
        return self.partition_circuit(k).public_inputs()
