"""Sealing test sectors, PoRep vanilla proofs (C1) and their verifier (docs/circuits.md §5; docs/formats.md §4).

Sealing a sector (dense, every node materialised):

1. tree_d: binary SHA-256 tree over the data nodes; comm_d = root; replica_id from comm_d
   (docs/circuits.md §5).
2. Labels of layers 1..L (docs/circuits.md §5): label = fr32(SHA-256(replica_id ‖ layer BE32 ‖ node BE64 ‖ 0^20 ‖
   37 parent labels)); layer 1 repeats its 6 DRG-parent labels, later layers repeat the 14 parents
   (6 DRG parents of the same layer, 8 expander parents of the previous layer); node 0 hashes the
   64-byte prefix only. The layer loop is inherently sequential (a node's DRG parents precede it in the
   same layer) so it runs node by node, but every expander-parent gather is one numpy fancy index.
3. replica = label_L + data in Fr; tree_c over column hashes (Poseidon of arity L over a node's L
   labels), tree_r_last over the replica; comm_r = Poseidon_2(comm_c, comm_r_last).

A C1 output holds, per partition and challenge, a vanilla proof (docs/formats.md §4). `generate_c1`
(`cuzk.filecoin.synthetic`) builds one for any published size: densely for small sectors, or from a
sparse synthetic sector (`cuzk.filecoin.sparse`) for 32GiB/64GiB. :func:`verify_porep_vanilla` checks a
C1 the way C2 relies on it and lists every problem it finds instead of stopping at the first.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from cuzk.errors import CuzkError
from cuzk.field import fr_vec
from cuzk.field.constants import R_MODULUS
from cuzk.filecoin.c1 import (
    Column,
    ColumnProof,
    EncodingProof,
    LabelingProof,
    ReplicaColumnProof,
    SealCommitPhase1Output,
    VanillaStackedProof,
)
from cuzk.filecoin.challenges import porep_challenges
from cuzk.filecoin.challenges import replica_id as derive_replica_id
from cuzk.filecoin.graph import SdrGraph
from cuzk.filecoin.merkle import POSEIDON, SHA256, DenseTree, MerkleProof, SparseTree, TreeLayout, compute_roots
from cuzk.filecoin.poseidon_batch import as_limbs, hash_batch, limbs_to_bytes
from cuzk.filecoin.sha256 import FR32_MASK, sha256_fr32
from cuzk.filecoin.sizes import DRG_DEGREE, RegisteredSealProof
from cuzk.hashes.poseidon import hash_merkle
from cuzk.hashes.poseidon_constants import merkle_tree_tag

__all__ = [
    "SealCommitPhase1Output",
    "SealedSector",
    "SectorView",
    "c1_of",
    "column_hashes",
    "comm_r_of",
    "compute_labels",
    "create_label",
    "expand_parents",
    "label_parents",
    "random_sector_data",
    "seal",
    "vanilla_proof",
    "vanilla_proofs",
    "verify_porep_vanilla",
]

_Z20 = bytes(20)
#: dense sealing keeps every label in memory (L x N x 32 bytes): allowed up to 8MiB sectors
DENSE_MAX_NODES = 1 << 18


# -- labels ---------------------------------------------------------------------------------------------

def expand_parents(parent_labels: list[bytes] | tuple[bytes, ...]) -> tuple[bytes, ...]:
    """The 37-entry parent list: the given labels repeated cyclically (6 for layer 1, 14 otherwise)."""
    n = len(parent_labels)
    return tuple(parent_labels[i % n] for i in range(37))


def create_label(replica: bytes, layer: int, node: int, parents37: tuple[bytes, ...] | list[bytes]) -> bytes:
    """label(layer, node) from its 37 parent labels (also the encoding key when layer = L)."""
    return sha256_fr32(b"".join([replica, layer.to_bytes(4, "big"), node.to_bytes(8, "big"), _Z20, *parents37]))


def compute_labels(graph: SdrGraph, replica: bytes, layers: int, parents: np.ndarray | None = None) -> np.ndarray:
    """All labels of a dense sector: (layers, N, 32) uint8."""
    n = graph.nodes
    if parents is None:
        parents = graph.all_parents()
    drg = parents[:, :DRG_DEGREE].tolist()
    out = np.empty((layers, n, 32), dtype=np.uint8)
    sha = hashlib.sha256
    for layer in range(1, layers + 1):
        cur = bytearray(32 * n)
        head = replica + layer.to_bytes(4, "big")
        first = bytearray(sha(head + bytes(8) + _Z20).digest())
        first[31] &= FR32_MASK
        cur[:32] = first
        if layer == 1:
            for v in range(1, n):
                b6 = b"".join([cur[32 * p:32 * p + 32] for p in drg[v]])
                o = 32 * v
                cur[o:o + 32] = sha(b"".join([head, v.to_bytes(8, "big"), _Z20, b6, b6, b6, b6, b6, b6,
                                              b6[:32]])).digest()
                cur[o + 31] &= FR32_MASK
        else:
            exp = out[layer - 2][parents[:, DRG_DEGREE:]].tobytes()
            for v in range(1, n):
                b14 = b"".join([cur[32 * p:32 * p + 32] for p in drg[v]]) + exp[256 * v:256 * v + 256]
                o = 32 * v
                cur[o:o + 32] = sha(b"".join([head, v.to_bytes(8, "big"), _Z20, b14, b14, b14[:288]])).digest()
                cur[o + 31] &= FR32_MASK
        out[layer - 1] = np.frombuffer(bytes(cur), dtype=np.uint8).reshape(n, 32)
    return out


def column_hashes(labels: np.ndarray) -> np.ndarray:
    """tree_c leaves: Poseidon (arity L, MerkleTree tag) over each node's column; (N, 4) limbs."""
    layers, n = labels.shape[0], labels.shape[1]
    columns = np.ascontiguousarray(labels.transpose(1, 0, 2)).view("<u8").reshape(n, layers, 4).astype(np.uint64)
    return hash_batch(columns, merkle_tree_tag(layers))


def random_sector_data(nodes: int, seed: int) -> bytes:
    """Deterministic pseudo-random fr32-padded sector data (the top two bits of every node cleared)."""
    data = np.random.default_rng(seed).integers(0, 256, size=(nodes, 32), dtype=np.uint8)
    data[:, 31] &= FR32_MASK
    return data.tobytes()


# -- sectors ----------------------------------------------------------------------------------------------

class SectorView(Protocol):
    """What proof generation needs from a sealed sector, dense (:class:`SealedSector`) or sparse."""

    proof: RegisteredSealProof
    graph: SdrGraph
    replica_id: bytes
    tree_d: DenseTree | SparseTree
    tree_c: DenseTree | SparseTree
    tree_r: DenseTree | SparseTree

    @property
    def comm_d(self) -> bytes: ...

    @property
    def comm_c(self) -> bytes: ...

    @property
    def comm_r_last(self) -> bytes: ...

    @property
    def comm_r(self) -> bytes: ...

    def label(self, layer: int, node: int) -> bytes:
        """Label of `node` in `layer` (1-based)."""
        ...


@dataclass
class SealedSector:
    """A fully materialised sealed sector with its trees (2KiB / 8MiB test sectors)."""

    proof: RegisteredSealProof
    prover_id: bytes
    sector_id: int
    ticket: bytes
    graph: SdrGraph
    data: bytes
    labels: np.ndarray  #: (L, N, 32) uint8
    replica: bytes
    tree_d: DenseTree
    tree_c: DenseTree
    tree_r: DenseTree
    replica_id: bytes
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def comm_d(self) -> bytes:
        return self.tree_d.root

    @property
    def comm_c(self) -> bytes:
        return self.tree_c.root

    @property
    def comm_r_last(self) -> bytes:
        return self.tree_r.root

    @property
    def comm_r(self) -> bytes:
        return comm_r_of(self.comm_c, self.comm_r_last)

    def label(self, layer: int, node: int) -> bytes:
        return self.labels[layer - 1, node].tobytes()


def comm_r_of(comm_c: bytes, comm_r_last: bytes) -> bytes:
    """comm_r = Poseidon_2 (MerkleTree tag) of comm_c and comm_r_last."""
    return hash_merkle(2, [int.from_bytes(comm_c, "little"), int.from_bytes(comm_r_last, "little")]).to_bytes(
        32, "little")


def seal(proof: RegisteredSealProof, data: bytes, prover_id: bytes, sector_id: int, ticket: bytes) -> SealedSector:
    """Seal `data` (sector_bytes of fr32-padded bytes) with every node materialised."""
    size = proof.size
    if len(data) != size.sector_bytes:
        raise CuzkError(f"sector data must be {size.sector_bytes} bytes for {size.name}, got {len(data)}")
    if size.nodes > DENSE_MAX_NODES:
        raise CuzkError(f"dense sealing is for test sizes (2KiB, 8MiB); use a sparse sector for {size.name}")
    arr = np.frombuffer(data, dtype=np.uint8).reshape(-1, 32)
    if (arr[:, 31] & ~np.uint8(FR32_MASK)).any():
        bad = int(np.nonzero(arr[:, 31] & ~np.uint8(FR32_MASK))[0][0])
        raise CuzkError(f"sector data node {bad} is not fr32-padded (top two bits of byte 31 set)")
    timings: dict[str, float] = {}
    t = time.perf_counter()
    graph = SdrGraph(size.nodes, proof.porep_id, proof.api_version)
    parents = graph.all_parents()
    timings["graph"] = time.perf_counter() - t
    t = time.perf_counter()
    tree_d = DenseTree(TreeLayout.tree_d(size.nodes), data)
    rid = derive_replica_id(prover_id, sector_id, ticket, tree_d.root, proof.porep_id)
    timings["tree_d"] = time.perf_counter() - t
    t = time.perf_counter()
    labels = compute_labels(graph, rid, size.layers, parents)
    timings["labels"] = time.perf_counter() - t
    t = time.perf_counter()
    last = as_limbs(labels[-1])
    replica_limbs = fr_vec.add(last, as_limbs(data))
    layout = TreeLayout.tree_r(size)
    tree_c = DenseTree(layout, column_hashes(labels))
    timings["tree_c"] = time.perf_counter() - t
    t = time.perf_counter()
    tree_r = DenseTree(layout, replica_limbs)
    timings["tree_r_last"] = time.perf_counter() - t
    replica = replica_limbs.astype("<u8").tobytes()
    return SealedSector(proof, prover_id, sector_id, ticket, graph, bytes(data), labels, replica, tree_d, tree_c,
                        tree_r, rid, timings)


# -- vanilla proofs ---------------------------------------------------------------------------------------

def label_parents(get_label: Callable[[int, int], bytes], layer: int, parents: list[int]) -> tuple[bytes, ...]:
    """The 37 parent labels of a label in `layer`, given the 14 parents and a label(layer, node) getter."""
    if layer == 1:
        return expand_parents([get_label(1, p) for p in parents[:DRG_DEGREE]])
    return expand_parents([get_label(layer, p) for p in parents[:DRG_DEGREE]]
                          + [get_label(layer - 1, p) for p in parents[DRG_DEGREE:]])


def _column_proof(sector: SectorView, node: int) -> ColumnProof:
    layers = sector.proof.size.layers
    rows = tuple(sector.label(layer, node) for layer in range(1, layers + 1))
    return ColumnProof(Column(node, rows), sector.tree_c.proof(node))


def vanilla_proof(sector: SectorView, challenge: int) -> VanillaStackedProof:
    """The stacked vanilla proof of one challenge (rust `prove_layers`)."""
    layers = sector.proof.size.layers
    parents = sector.graph.parents(challenge)
    replica_columns = ReplicaColumnProof(
        _column_proof(sector, challenge),
        tuple(_column_proof(sector, p) for p in parents[:DRG_DEGREE]),
        tuple(_column_proof(sector, p) for p in parents[DRG_DEGREE:]))
    labeling = tuple(LabelingProof(label_parents(sector.label, layer, parents), layer, challenge)
                     for layer in range(1, layers + 1))
    encoding = EncodingProof(labeling[-1].parents, layers, challenge)
    return VanillaStackedProof(sector.tree_d.proof(challenge), sector.tree_r.proof(challenge), replica_columns,
                               labeling, encoding)


def vanilla_proofs(sector: SectorView, seed: bytes) -> list[tuple[VanillaStackedProof, ...]]:
    """Proofs for every partition's challenges (interactive, synthetic or NI per the registered proof)."""
    out = []
    for k in range(sector.proof.partitions):
        challenges = porep_challenges(sector.proof, sector.replica_id, seed, sector.comm_r, k)
        out.append(tuple(vanilla_proof(sector, c) for c in challenges))
    return out


def c1_of(sector: SectorView, seed: bytes, ticket: bytes) -> SealCommitPhase1Output:
    """Assemble the C1 output of a sealed sector for interactive seed `seed`."""
    return SealCommitPhase1Output(sector.proof, tuple(vanilla_proofs(sector, seed)), sector.comm_r, sector.comm_d,
                                  sector.replica_id, seed, ticket)


# -- verification ------------------------------------------------------------------------------------------

def _fr(b: bytes) -> int:
    return int.from_bytes(b, "little")


def verify_porep_vanilla(c1: SealCommitPhase1Output, *, prover_id: bytes | None = None,
                         sector_id: int | None = None) -> list[str]:
    """Every reason `c1` would not yield a valid C2 proof; an empty list means it verifies.

    Checks, per challenge: the challenge is the one derived from replica_id/seed (or comm_r for NI and
    synthetic proofs); comm_d, comm_r_last and every tree_c path hashes to its root and opens the right
    leaf index; column hashes are the tree_c leaves; all proofs share comm_c and comm_r_last and
    Poseidon_2(comm_c, comm_r_last) = comm_r; each labeling proof's parents are the column values C2 will
    use and hash to the challenged label; the encoding relation replica = label_L + data holds. With
    `prover_id` and `sector_id`, replica_id is also recomputed (as verify_seal does).
    """
    proof = c1.registered_proof
    size = proof.size
    layers = size.layers
    graph = SdrGraph(size.nodes, proof.porep_id, proof.api_version)
    problems: list[str] = []
    if prover_id is not None and sector_id is not None:
        expected = derive_replica_id(prover_id, sector_id, c1.ticket, c1.comm_d, proof.porep_id)
        if expected != c1.replica_id:
            problems.append(f"replica_id {c1.replica_id.hex()} is not the one derived from prover_id, sector_id, "
                            f"ticket, comm_d and porep_id ({expected.hex()})")
    if len(c1.vanilla_proofs) != proof.partitions:
        problems.append(f"{len(c1.vanilla_proofs)} partitions, expected {proof.partitions}")
    tree_d_layout = TreeLayout.tree_d(size.nodes)
    tree_r_layout = TreeLayout.tree_r(size)

    entries: list[tuple[str, VanillaStackedProof, int]] = []
    for k, part in enumerate(c1.vanilla_proofs):
        expected_challenges = porep_challenges(proof, c1.replica_id, c1.seed, c1.comm_r, k) \
            if k < proof.partitions else []
        if len(part) != proof.challenges_per_partition:
            problems.append(f"partition {k}: {len(part)} challenges, expected {proof.challenges_per_partition}")
        for i, p in enumerate(part):
            challenge = expected_challenges[i] if i < len(expected_challenges) else p.challenge
            where = f"partition {k} challenge {i} (node {challenge})"
            if p.challenge != challenge:
                problems.append(f"{where}: proof is for node {p.challenge}, but the derived challenge is {challenge}")
            entries.append((where, p, challenge))

    # Merkle paths: collect every Poseidon proof so their roots are computed in batches.
    poseidon_proofs: list[MerkleProof] = []
    poseidon_meta: list[tuple[str, int]] = []
    column_rows: list[tuple[bytes, ...]] = []
    comm_c_seen: set[bytes] = set()
    comm_r_last_seen: set[bytes] = set()
    for where, p, challenge in entries:
        d = p.comm_d_proofs
        problem = d.shape_problem(tree_d_layout)
        if problem:
            problems.append(f"{where}: comm_d proof {problem}")
        else:
            if d.path_index != challenge:
                problems.append(f"{where}: comm_d proof opens leaf {d.path_index}")
            if d.root != c1.comm_d:
                problems.append(f"{where}: comm_d proof root is not comm_d")
            if d.compute_root(SHA256) != d.root:
                problems.append(f"{where}: comm_d proof path does not hash to its root")
        r = p.comm_r_last_proof
        comm_r_last_seen.add(r.root)
        problem = r.shape_problem(tree_r_layout)
        if problem:
            problems.append(f"{where}: comm_r_last proof {problem}")
        else:
            if r.path_index != challenge:
                problems.append(f"{where}: comm_r_last proof opens leaf {r.path_index}")
            poseidon_proofs.append(r)
            poseidon_meta.append((f"{where}: comm_r_last proof", -1))
        parents = graph.parents(challenge)
        rcp = p.replica_column_proofs
        named = [("c_x", rcp.c_x, challenge)]
        named += [(f"drg parent {j}", c, parents[j]) for j, c in enumerate(rcp.drg_parents)]
        named += [(f"exp parent {j}", c, parents[DRG_DEGREE + j]) for j, c in enumerate(rcp.exp_parents)]
        if len(rcp.drg_parents) != DRG_DEGREE or len(rcp.exp_parents) != 8:
            problems.append(f"{where}: {len(rcp.drg_parents)} DRG and {len(rcp.exp_parents)} expander parent "
                            "columns, expected 6 and 8")
        for name, cp, node in named:
            comm_c_seen.add(cp.inclusion_proof.root)
            if cp.column.index != node:
                problems.append(f"{where}: {name} column is for node {cp.column.index}, expected {node}")
            if len(cp.column.rows) != layers:
                problems.append(f"{where}: {name} column has {len(cp.column.rows)} rows, expected {layers}")
                continue
            problem = cp.inclusion_proof.shape_problem(tree_r_layout)
            if problem:
                problems.append(f"{where}: {name} tree_c proof {problem}")
                continue
            if cp.inclusion_proof.path_index != node:
                problems.append(f"{where}: {name} tree_c proof opens leaf {cp.inclusion_proof.path_index}, "
                                f"expected {node}")
            poseidon_proofs.append(cp.inclusion_proof)
            poseidon_meta.append((f"{where}: {name} tree_c proof", len(column_rows)))
            column_rows.append(cp.column.rows)
        problems.extend(_check_labels(c1.replica_id, layers, where, p))

    roots = compute_roots(poseidon_proofs, POSEIDON)
    col_hashes: list[bytes] = []
    if column_rows:
        col_hashes = limbs_to_bytes(hash_batch(as_limbs([b"".join(rows) for rows in column_rows]).reshape(
            len(column_rows), layers, 4), merkle_tree_tag(layers)))
    for mp, (name, col), root in zip(poseidon_proofs, poseidon_meta, roots, strict=True):
        if root != mp.root:
            problems.append(f"{name}: path does not hash to its root")
        if col >= 0 and col_hashes[col] != mp.leaf:
            problems.append(f"{name}: leaf is not the hash of the column")

    if len(comm_c_seen) > 1:
        problems.append(f"tree_c proofs disagree on comm_c ({len(comm_c_seen)} different roots)")
    if len(comm_r_last_seen) > 1:
        problems.append(f"comm_r_last proofs disagree on comm_r_last ({len(comm_r_last_seen)} different roots)")
    if len(comm_c_seen) == 1 and len(comm_r_last_seen) == 1:
        expected_comm_r = comm_r_of(next(iter(comm_c_seen)), next(iter(comm_r_last_seen)))
        if expected_comm_r != c1.comm_r:
            problems.append("comm_r is not Poseidon_2(comm_c, comm_r_last) of the proofs' roots")
    return problems


def _check_labels(replica: bytes, layers: int, where: str, p: VanillaStackedProof) -> list[str]:
    """Labeling proofs use the column values C2 wires in, and hash to the challenged labels; encoding holds."""
    problems = []
    rcp = p.replica_column_proofs
    if len(p.labeling_proofs) != layers:
        return [f"{where}: {len(p.labeling_proofs)} labeling proofs, expected {layers}"]
    if len(rcp.drg_parents) != DRG_DEGREE or len(rcp.exp_parents) != 8 or any(
            len(c.column.rows) != layers for c in (rcp.c_x, *rcp.drg_parents, *rcp.exp_parents)):
        return problems  # already reported; the label checks would only repeat it

    drg_cols = [c.column.rows for c in rcp.drg_parents]
    exp_cols = [c.column.rows for c in rcp.exp_parents]
    challenge = rcp.c_x.column.index
    for layer, lp in enumerate(p.labeling_proofs, start=1):
        at = f"{where}: labeling proof layer {layer}"
        if lp.layer_index != layer:
            problems.append(f"{at}: layer_index is {lp.layer_index}")
        if lp.node != challenge:
            problems.append(f"{at}: node is {lp.node}, the column is for {challenge}")
        if layer == 1:
            wired = expand_parents([c[0] for c in drg_cols])
        else:
            wired = expand_parents([c[layer - 1] for c in drg_cols] + [c[layer - 2] for c in exp_cols])
        if tuple(lp.parents) != wired:
            problems.append(f"{at}: parents differ from the parent columns' labels")
        if create_label(replica, layer, lp.node, lp.parents) != rcp.c_x.column.rows[layer - 1]:
            problems.append(f"{at}: label hashed from the parents does not match column row {layer}")
    enc = p.encoding_proof
    at = f"{where}: encoding proof"
    if enc.layer_index != layers or enc.node != challenge:
        problems.append(f"{at}: is for layer {enc.layer_index} node {enc.node}, expected layer {layers} node "
                        f"{challenge}")
    key = create_label(replica, enc.layer_index, enc.node, enc.parents)
    if (_fr(key) + _fr(p.comm_d_proofs.leaf)) % R_MODULUS != _fr(p.comm_r_last_proof.leaf):
        problems.append(f"{at}: replica leaf != key + data leaf")
    return problems
