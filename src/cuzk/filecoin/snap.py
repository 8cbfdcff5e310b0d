"""SnapDeals (EmptySectorUpdate) vanilla proofs: encoding, partition proofs, bincode, verification
(docs/circuits.md §10; docs/formats.md §5).

An update writes new data into an already sealed sector without re-sealing:
phi = Poseidon_GR(comm_d_new, comm_r_old); every node v gets rho = Poseidon_GR(phi, v >> (log2 N - h));
new replica = old replica + data_new · rho (in Fr). comm_r_new = Poseidon_2(comm_c, root(tree_r_new)),
with the *old* comm_c. A partition proof opens, for each challenge, the old replica, the new data and
the new replica at the same leaf, plus the partition's "apex leaves" (one tree_d_new row) that the
circuit hashes up to comm_d_new.

Dense sectors (2KiB, 8MiB) update every node. For sparse sectors (32GiB, 64GiB) the new data is zero
except at a few seeded positions, fixed before the challenges are known (they derive from
comm_r_new), so the new trees are sparse trees too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cuzk.errors import CuzkError
from cuzk.field import fr_vec
from cuzk.field.constants import R_MODULUS
from cuzk.filecoin.challenges import snap_challenges
from cuzk.filecoin.codec import BincodeReader, BincodeWriter
from cuzk.filecoin.merkle import POSEIDON, SHA256, DenseTree, MerkleProof, SparseTree, TreeLayout, compute_roots
from cuzk.filecoin.porep import comm_r_of
from cuzk.filecoin.poseidon_batch import as_limbs, hash_custom_gr_batch, limbs_to_bytes
from cuzk.filecoin.post import ReplicaView
from cuzk.filecoin.sha256 import FR32_MASK, hash2_sha
from cuzk.filecoin.sizes import SectorParams
from cuzk.hashes.poseidon import hash_custom_gr

__all__ = [
    "ChallengeProof",
    "PartitionProof",
    "UpdatedSector",
    "encode_update",
    "encode_update_sparse",
    "k_and_h_select",
    "partition_proof",
    "phi",
    "rho",
    "rhos_bytes",
    "verify_snap_vanilla",
]


@dataclass(frozen=True)
class ChallengeProof:
    proof_r_old: MerkleProof
    proof_d_new: MerkleProof
    proof_r_new: MerkleProof


@dataclass(frozen=True)
class PartitionProof:
    """storage-proofs-update PartitionProof: the FFI's per-partition SnapDeals vanilla proof."""

    comm_c: bytes
    apex_leafs: tuple[bytes, ...]
    challenge_proofs: tuple[ChallengeProof, ...]

    def to_bincode(self) -> bytes:
        w = BincodeWriter()
        w.bytes32(self.comm_c)
        w.u64(len(self.apex_leafs))
        for leaf in self.apex_leafs:
            w.bytes32(leaf)
        w.u64(len(self.challenge_proofs))
        for cp in self.challenge_proofs:
            cp.proof_r_old.write_bincode(w)
            cp.proof_d_new.write_bincode(w)
            cp.proof_r_new.write_bincode(w)
        return w.getvalue()

    @classmethod
    def from_bincode(cls, data: bytes, size: SectorParams, source: str = "<SnapDeals partition proof>",
                     ) -> PartitionProof:
        r = BincodeReader(data, source)
        tree_r, tree_d = TreeLayout.tree_r(size), TreeLayout.tree_d(size.nodes)
        comm_c = r.fr("comm_c")
        apex = tuple(r.fr(f"apex_leafs[{i}]") for i in range(r.length("apex_leafs.len", size.snap_apex_leaves)))
        proofs = []
        for i in range(r.length("challenge_proofs.len", size.snap_challenges)):
            at = f"challenge_proofs[{i}]"
            proofs.append(ChallengeProof(MerkleProof.read_bincode(r, f"{at}.proof_r_old", tree_r),
                                         MerkleProof.read_bincode(r, f"{at}.proof_d_new", tree_d),
                                         MerkleProof.read_bincode(r, f"{at}.proof_r_new", tree_r)))
        r.finish()
        return cls(comm_c, apex, tuple(proofs))


def phi(comm_d_new: bytes, comm_r_old: bytes) -> bytes:
    """phi = Poseidon_GR(comm_d_new, comm_r_old)."""
    return hash_custom_gr(int.from_bytes(comm_d_new, "little"), int.from_bytes(comm_r_old, "little")).to_bytes(
        32, "little")


def rho(phi_value: bytes, high: int) -> int:
    """rho(high) = Poseidon_GR(phi, high) as an Fr int."""
    return hash_custom_gr(int.from_bytes(phi_value, "little"), high)


def _rhos(phi_value: bytes, h: int) -> np.ndarray:
    """All 2^h rho values, (2^h, 4) canonical limbs."""
    highs = np.zeros((1 << h, 4), dtype=np.uint64)
    highs[:, 0] = np.arange(1 << h, dtype=np.uint64)
    return hash_custom_gr_batch(np.repeat(as_limbs(phi_value), 1 << h, axis=0), highs)


def k_and_h_select(size: SectorParams, k: int, h: int | None = None) -> int:
    """The first public input of partition k: k + (2^index(h in hs) << log2 partitions)."""
    h = size.snap_h if h is None else h
    pb = size.snap_partitions.bit_length() - 1
    return k + ((1 << size.snap_hs.index(h)) << pb)


@dataclass
class UpdatedSector:
    """The result of an update: old and new trees and commitments."""

    size: SectorParams
    h: int
    comm_c: bytes
    tree_r_old: DenseTree | SparseTree
    tree_d_new: DenseTree | SparseTree
    tree_r_new: DenseTree | SparseTree

    @property
    def comm_r_old(self) -> bytes:
        return comm_r_of(self.comm_c, self.tree_r_old.root)

    @property
    def comm_d_new(self) -> bytes:
        return self.tree_d_new.root

    @property
    def comm_r_new(self) -> bytes:
        return comm_r_of(self.comm_c, self.tree_r_new.root)

    # PoSt on the updated sector works like on any replica
    @property
    def tree_r(self) -> DenseTree | SparseTree:
        return self.tree_r_new

    @property
    def comm_r_last(self) -> bytes:
        return self.tree_r_new.root

    @property
    def comm_r(self) -> bytes:
        return self.comm_r_new


def _check_h(size: SectorParams, h: int | None) -> int:
    h = size.snap_h if h is None else h
    if h not in size.snap_hs:
        raise CuzkError(f"h = {h} is not allowed for {size.name} (allowed: {sorted(set(size.snap_hs))})")
    return h


def encode_update(size: SectorParams, old: ReplicaView, new_data: bytes, h: int | None = None) -> UpdatedSector:
    """Dense update: encode `new_data` (sector_bytes, fr32-padded) into the old replica tree."""
    h = _check_h(size, h)
    if not isinstance(old.tree_r, DenseTree):
        raise CuzkError("dense SnapDeals encoding needs a dense old replica; use encode_update_sparse")
    if len(new_data) != size.sector_bytes:
        raise CuzkError(f"new data must be {size.sector_bytes} bytes, got {len(new_data)}")
    tree_d = DenseTree(TreeLayout.tree_d(size.nodes), new_data)
    phi_value = phi(tree_d.root, old.comm_r)
    rhos = _rhos(phi_value, h)
    per_node = np.repeat(rhos, size.nodes >> h, axis=0)
    # Montgomery product of (data·R) and rho gives data·rho in canonical form
    scaled = fr_vec.mul(fr_vec.to_montgomery(as_limbs(new_data)), per_node)
    new_replica = fr_vec.add(old.tree_r.levels[0], scaled)
    tree_r_new = DenseTree(TreeLayout.tree_r(size), new_replica)
    return UpdatedSector(size, h, old.comm_c, old.tree_r, tree_d, tree_r_new)


def encode_update_sparse(size: SectorParams, old: ReplicaView, new_data: dict[int, bytes],
                         h: int | None = None) -> UpdatedSector:
    """Sparse update: new data is zero except at the nodes in `new_data`; other replica leaves are unchanged."""
    h = _check_h(size, h)
    old_tree = old.tree_r
    if not isinstance(old_tree, SparseTree):
        raise CuzkError("sparse SnapDeals encoding needs a sparse old replica tree")
    for v, d in new_data.items():
        if len(d) != 32 or d[31] & ~FR32_MASK & 0xFF:
            raise CuzkError(f"new data of node {v} must be 32 fr32-padded bytes")
    tree_d = SparseTree(TreeLayout.tree_d(size.nodes), bytes(32), new_data)
    phi_value = phi(tree_d.root, old.comm_r)
    shift = size.log2_nodes - h
    leaves = dict(old_tree.levels[0])
    for v, d in new_data.items():
        old_leaf = int.from_bytes(old_tree.leaf(v), "little")
        value = (old_leaf + int.from_bytes(d, "little") * rho(phi_value, v >> shift)) % R_MODULUS
        leaves[v] = value.to_bytes(32, "little")
    tree_r_new = SparseTree(TreeLayout.tree_r(size), old_tree.defaults[0], leaves)
    return UpdatedSector(size, h, old.comm_c, old_tree, tree_d, tree_r_new)


def partition_proof(update: UpdatedSector, k: int) -> PartitionProof:
    """The vanilla proof of partition k (storage-proofs-update `prove`)."""
    size = update.size
    a = size.snap_apex_leaves
    pb = size.snap_partitions.bit_length() - 1
    ab = a.bit_length() - 1
    apex_level = size.log2_nodes - pb - ab
    apex = tuple(update.tree_d_new.node(apex_level, k * a + i) for i in range(a))
    proofs = tuple(ChallengeProof(update.tree_r_old.proof(c), update.tree_d_new.proof(c), update.tree_r_new.proof(c))
                   for c in snap_challenges(size, update.comm_r_new, k))
    return PartitionProof(update.comm_c, apex, proofs)


def verify_snap_vanilla(size: SectorParams, comm_r_old: bytes, comm_d_new: bytes, comm_r_new: bytes,
                        proofs: list[PartitionProof], h: int | None = None) -> list[str]:
    """Problems with a SnapDeals update's partition proofs (empty = valid).

    Beyond rust's vanilla verifier (paths, roots, the rho relation, apex siblings present in the apex
    tree) it checks what the circuit enforces: the tree_d_new path passes through the partition's apex
    leaf at the right position and through the apex root.
    """
    problems: list[str] = []
    h = size.snap_h if h is None else h
    if h not in size.snap_hs:
        return [f"h = {h} is not allowed for {size.name}"]
    if len(proofs) != size.snap_partitions:
        problems.append(f"{len(proofs)} partition proofs, expected {size.snap_partitions}")
    tree_r, tree_d = TreeLayout.tree_r(size), TreeLayout.tree_d(size.nodes)
    a = size.snap_apex_leaves
    pb = size.snap_partitions.bit_length() - 1
    ab = a.bit_length() - 1
    apex_level = size.log2_nodes - pb - ab
    shift = size.log2_nodes - h
    phi_value = phi(comm_d_new, comm_r_old)
    rho_cache: dict[int, int] = {}
    poseidon: list[MerkleProof] = []
    names: list[str] = []
    for k, part in enumerate(proofs[:size.snap_partitions]):
        pk = f"partition {k}"
        if len(part.apex_leafs) != a:
            problems.append(f"{pk}: {len(part.apex_leafs)} apex leaves, expected {a}")
            continue
        row = list(part.apex_leafs)
        apex_rows = [row]
        for _ in range(ab):
            row = [hash2_sha(row[i], row[i + 1]) for i in range(0, len(row), 2)]
            apex_rows.append(row)
        challenges = snap_challenges(size, comm_r_new, k)
        if len(part.challenge_proofs) != len(challenges):
            problems.append(f"{pk}: {len(part.challenge_proofs)} challenge proofs, expected {len(challenges)}")
        root_r_old = root_r_new = b""
        if part.challenge_proofs:
            root_r_old = part.challenge_proofs[0].proof_r_old.root
            root_r_new = part.challenge_proofs[0].proof_r_new.root
            if comm_r_of(part.comm_c, root_r_old) != comm_r_old:
                problems.append(f"{pk}: comm_r_old is not Poseidon_2(comm_c, root_r_old)")
            if comm_r_of(part.comm_c, root_r_new) != comm_r_new:
                problems.append(f"{pk}: comm_r_new is not Poseidon_2(comm_c, root_r_new)")
        for i, (cp, c) in enumerate(zip(part.challenge_proofs, challenges, strict=False)):
            at = f"{pk} challenge {i} (node {c})"
            bad = False
            for name, mp, layout in (("proof_r_old", cp.proof_r_old, tree_r), ("proof_d_new", cp.proof_d_new, tree_d),
                                     ("proof_r_new", cp.proof_r_new, tree_r)):
                shape = mp.shape_problem(layout)
                if shape:
                    problems.append(f"{at}: {name} {shape}")
                    bad = True
                elif mp.path_index != c:
                    problems.append(f"{at}: {name} opens leaf {mp.path_index}")
            if bad:
                continue
            if cp.proof_r_old.root != root_r_old or cp.proof_r_new.root != root_r_new:
                problems.append(f"{at}: tree_r roots differ from the partition's first challenge")
            if cp.proof_d_new.root != comm_d_new:
                problems.append(f"{at}: proof_d_new root is not comm_d_new")
            nodes = cp.proof_d_new.path_nodes(SHA256)
            if nodes[-1] != cp.proof_d_new.root:
                problems.append(f"{at}: proof_d_new path does not hash to its root")
            if nodes[apex_level] != part.apex_leafs[(c >> apex_level) & (a - 1)]:
                problems.append(f"{at}: proof_d_new does not pass through the partition's apex leaf")
            if nodes[apex_level + ab] != apex_rows[-1][0]:
                problems.append(f"{at}: proof_d_new does not pass through the apex root")
            high = c >> shift
            if high not in rho_cache:
                rho_cache[high] = rho(phi_value, high)
            old = int.from_bytes(cp.proof_r_old.leaf, "little")
            data = int.from_bytes(cp.proof_d_new.leaf, "little")
            if (old + data * rho_cache[high]) % R_MODULUS != int.from_bytes(cp.proof_r_new.leaf, "little"):
                problems.append(f"{at}: new replica leaf != old leaf + data · rho")
            for name, mp in (("proof_r_old", cp.proof_r_old), ("proof_r_new", cp.proof_r_new)):
                poseidon.append(mp)
                names.append(f"{at}: {name}")
    for mp, name, root in zip(poseidon, names, compute_roots(poseidon, POSEIDON), strict=True):
        if root != mp.root:
            problems.append(f"{name} path does not hash to its root")
    return problems


def rhos_bytes(phi_value: bytes, h: int) -> list[bytes]:
    """All rho values as 32-byte LE strings (for inspection and tests)."""
    return limbs_to_bytes(_rhos(phi_value, h))
