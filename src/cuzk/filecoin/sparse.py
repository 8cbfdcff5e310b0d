"""Sparse synthetic sectors: valid C1 outputs for 32GiB/64GiB without materialising 2^30 nodes.

Why this is possible: the vanilla verifier and the PoRep circuit check, for each challenge c, only
(a) Merkle paths from the opened leaves to comm_d / comm_c / comm_r_last, (b) that each label of c is
the SHA-256 of its 37 parent labels *as found in the opened parent columns*, and (c) replica(c) =
label_L(c) + data(c). Nothing checks the parents' own labels against *their* parents. So a sector in
which almost every node is a default value, and only the challenged nodes are honestly labelled,
yields proofs that pass every check — which is all a C2 benchmark needs.

Construction (all choices deterministic in `seed`):

* Data: all zero (a committed-capacity sector). comm_d is therefore the published CC comm_d of the
  size, and it is fixed before anything else — it must be, since replica_id depends on comm_d and the
  challenges on replica_id.
* Challenges: the interactive challenges of every partition, derived from replica_id and the seed
  randomness exactly as a real prover would.
* Labels: every node that is neither challenged nor a parent of a challenged node has the per-layer
  default label D_l (pseudo-random). Parents of challenged nodes get their own pseudo-random labels
  (node 0 gets its true rule label, hash of the prefix, as it has no parents). Challenged nodes get
  their true labels, computed layer by layer and, within a layer, in increasing node order: a label
  depends only on DRG parents (smaller index, same layer) and expander parents (previous layer), so
  a challenged node that is itself a parent of another challenge is always labelled first.
* Trees: tree_d, tree_c and tree_r_last are :class:`SparseTree` s with the default leaf (zero data,
  column hash of (D_1..D_L), replica D_L + 0) and explicit leaves for the explicit nodes.

Limitation: this works only for interactive PoRep (V1, V1_1). Synthetic and NI-PoRep derive their
challenges from comm_r, which depends on which nodes are labelled honestly — choosing the labelled set
before knowing the challenges is exactly what those proofs are designed to prevent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cuzk.errors import CuzkError
from cuzk.filecoin.challenges import interactive_challenges
from cuzk.filecoin.challenges import replica_id as derive_replica_id
from cuzk.filecoin.graph import SdrGraph
from cuzk.filecoin.merkle import SparseTree, TreeLayout
from cuzk.filecoin.porep import comm_r_of, create_label, label_parents
from cuzk.filecoin.poseidon_batch import as_limbs, hash_batch, limbs_to_bytes
from cuzk.filecoin.sha256 import sha256_fr32
from cuzk.filecoin.sizes import RegisteredSealProof
from cuzk.hashes.poseidon_constants import merkle_tree_tag

__all__ = ["SparseSector", "sparse_sector"]

_FREE_TAG = b"cuzk sparse sector free label"
_DEFAULT_TAG = b"cuzk sparse sector default label"


@dataclass
class SparseSector:
    """A sealed sector in which only challenged nodes and their parents differ from the defaults."""

    proof: RegisteredSealProof
    graph: SdrGraph
    prover_id: bytes
    sector_id: int
    ticket: bytes
    replica_id: bytes
    challenges: list[list[int]]  #: per partition
    default_labels: tuple[bytes, ...]  #: per layer
    labels: dict[int, list[bytes]]  #: explicit nodes -> labels of layers 1..L
    tree_d: SparseTree
    tree_c: SparseTree
    tree_r: SparseTree

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
        row = self.labels.get(node)
        return row[layer - 1] if row is not None else self.default_labels[layer - 1]


def _free_label(seed: int, node: int, layer: int) -> bytes:
    return sha256_fr32(b"".join([_FREE_TAG, seed.to_bytes(8, "little"), node.to_bytes(8, "little"),
                                 layer.to_bytes(4, "little")]))


def sparse_sector(proof: RegisteredSealProof, *, seed: int, prover_id: bytes, sector_id: int, ticket: bytes,
                  seed_randomness: bytes) -> SparseSector:
    """Build the sparse sector whose interactive challenges for `seed_randomness` all verify."""
    if proof.synthetic or proof.non_interactive:
        raise CuzkError(f"{proof.name}: sparse sectors support interactive PoRep only (V1, V1_1); synthetic and "
                        "non-interactive challenges depend on comm_r, so they cannot be anticipated")
    size = proof.size
    seed &= (1 << 64) - 1
    layers, nodes = size.layers, size.nodes
    graph = SdrGraph(nodes, proof.porep_id, proof.api_version)
    tree_d = SparseTree(TreeLayout.tree_d(nodes), bytes(32))
    rid = derive_replica_id(prover_id, sector_id, ticket, tree_d.root, proof.porep_id)
    challenges = [interactive_challenges(nodes, rid, seed_randomness, k, proof.challenges_per_partition)
                  for k in range(proof.partitions)]
    challenged = sorted({c for part in challenges for c in part})
    parents = {c: [int(p) for p in row] for c, row in zip(challenged, graph.parents_array(np.array(challenged)),
                                                          strict=True)}
    explicit = set(challenged).union(*parents.values())
    labels: dict[int, list[bytes]] = {}
    for v in sorted(explicit - set(challenged)):
        if v == 0:
            labels[v] = [create_label(rid, layer, 0, ()) for layer in range(1, layers + 1)]
        else:
            labels[v] = [_free_label(seed, v, layer) for layer in range(1, layers + 1)]
    defaults = tuple(sha256_fr32(_DEFAULT_TAG + seed.to_bytes(8, "little") + layer.to_bytes(4, "little"))
                     for layer in range(1, layers + 1))
    for c in challenged:
        labels[c] = [b""] * layers

    def get(layer: int, node: int) -> bytes:
        row = labels.get(node)
        return row[layer - 1] if row is not None else defaults[layer - 1]

    for layer in range(1, layers + 1):
        for c in challenged:
            labels[c][layer - 1] = create_label(rid, layer, c, label_parents(get, layer, parents[c]))

    order = sorted(labels)
    tag = merkle_tree_tag(layers)
    hashes = hash_batch(as_limbs([b"".join(labels[v]) for v in order] + [b"".join(defaults)]).reshape(-1, layers, 4),
                        tag)
    col = limbs_to_bytes(hashes)
    layout = TreeLayout.tree_r(size)
    tree_c = SparseTree(layout, col[-1], dict(zip(order, col[:-1], strict=True)))
    # data is zero everywhere, so replica = label_L + 0 = label_L
    tree_r = SparseTree(layout, defaults[-1], {v: labels[v][-1] for v in order})
    return SparseSector(proof, graph, prover_id, sector_id, ticket, rid, challenges, defaults, labels, tree_d, tree_c,
                        tree_r)
