"""Merkle trees of Filecoin: binary SHA-256 (tree_d) and Poseidon 8 / 8-8 / 8-8-2 (tree_c, tree_r).

A tree is described by a :class:`TreeLayout`: the arity of every level from the leaves up, split into
base levels (arity 8 or 2), an optional sub level and an optional top level. Because every base tree
has a power-of-8 number of leaves, the "8 base trees + sub level" of a 32GiB tree_r is exactly one
tree whose levels have arities 8,...,8,8 — so one level-by-level builder covers every shape, and the
shape only matters when a proof is cut into the Single/Sub/Top variants of docs/formats.md §4.

Two implementations share the proof logic:

* :class:`DenseTree` stores every level (numpy (n, 4) uint64 limb arrays) — 2KiB and 8MiB sectors.
* :class:`SparseTree` is a tree over N leaves that all equal one default value except a few given
  ones. Per level it keeps only the nodes above given leaves; every other node equals the level's
  default subtree root, precomputed once. Building costs O(given leaves x depth) hashes, which is what
  makes 32GiB/64GiB synthetic sectors possible. Both produce identical roots and proofs (tested).

Values are 32-byte little-endian strings everywhere outside the trees. Poseidon levels are hashed in
batches by `poseidon_batch`; SHA-256 nodes use hashlib.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cuzk.filecoin.codec import BincodeReader, BincodeWriter, JsonReader, bytes_json
from cuzk.filecoin.poseidon_batch import as_limbs, hash_batch, limbs_to_bytes
from cuzk.filecoin.sha256 import FR32_MASK
from cuzk.filecoin.sizes import SectorParams
from cuzk.hashes.poseidon_constants import merkle_tree_tag

__all__ = [
    "POSEIDON",
    "SHA256",
    "DenseTree",
    "MerkleProof",
    "PathElement",
    "SparseTree",
    "TreeLayout",
    "compute_roots",
    "hash_level",
]

SHA256 = "sha256"
POSEIDON = "poseidon"
_KINDS = ("Single", "Sub", "Top")


# -- layouts -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TreeLayout:
    """Hasher and level arities of a tree; sub/top arity 0 = level absent."""

    hasher: str
    base_arity: int
    base_levels: int
    sub_arity: int = 0
    top_arity: int = 0

    @classmethod
    def tree_d(cls, nodes: int) -> TreeLayout:
        """Binary SHA-256 tree over `nodes` leaves (tree_d, SnapDeals tree_d_new)."""
        return cls(SHA256, 2, nodes.bit_length() - 1)

    @classmethod
    def tree_r(cls, size: SectorParams) -> TreeLayout:
        """The Poseidon shape of tree_c / tree_r_last / SnapDeals tree_r_new for a sector size."""
        s = size.tree_shape
        return cls(POSEIDON, s.base, size.base_path_length, s.sub, s.top)

    @property
    def arities(self) -> tuple[int, ...]:
        extra = tuple(a for a in (self.sub_arity, self.top_arity) if a)
        return (self.base_arity,) * self.base_levels + extra

    @property
    def leaves(self) -> int:
        n = 1
        for a in self.arities:
            n *= a
        return n

    @property
    def kind(self) -> str:
        return "Top" if self.top_arity else "Sub" if self.sub_arity else "Single"

    @property
    def depth(self) -> int:
        return len(self.arities)


# -- proofs --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PathElement:
    """One level of a path: the arity-1 siblings and the position of the current node (0..arity-1)."""

    hashes: tuple[bytes, ...]
    index: int

    @property
    def arity(self) -> int:
        return len(self.hashes) + 1


@dataclass(frozen=True)
class MerkleProof:
    """rust-fil-proofs' MerkleProof: Single (base path), Sub (+ sub path) or Top (+ sub + top paths)."""

    root: bytes
    leaf: bytes
    base_path: tuple[PathElement, ...]
    sub_path: tuple[PathElement, ...] | None = None
    top_path: tuple[PathElement, ...] | None = None

    @property
    def kind(self) -> str:
        return "Top" if self.top_path is not None else "Sub" if self.sub_path is not None else "Single"

    @property
    def path(self) -> tuple[PathElement, ...]:
        return self.base_path + (self.sub_path or ()) + (self.top_path or ())

    @property
    def path_index(self) -> int:
        """The leaf index the path opens: Σ index_level · (product of lower arities)."""
        idx, weight = 0, 1
        for e in self.path:
            idx += e.index * weight
            weight *= e.arity
        return idx

    def shape_problem(self, layout: TreeLayout) -> str | None:
        """Why this proof cannot belong to a tree of `layout` (kind, path lengths, arities), or None."""
        if self.kind != layout.kind:
            return f"is a {self.kind} proof, expected {layout.kind}"
        path = self.path
        if len(path) != layout.depth:
            return f"has {len(path)} path elements, expected {layout.depth}"
        for level, (e, a) in enumerate(zip(path, layout.arities, strict=True)):
            if e.arity != a:
                return f"level {level} has {len(e.hashes)} siblings, expected {a - 1}"
            if not 0 <= e.index < a:
                return f"level {level} index {e.index} is not in 0..{a - 1}"
        return None

    def compute_root(self, hasher: str) -> bytes:
        """Hash the leaf up the path (the root the path implies)."""
        return compute_roots([self], hasher)[0]

    def verify(self, hasher: str) -> bool:
        """The path hashes the leaf to the stated root."""
        return self.compute_root(hasher) == self.root

    def path_nodes(self, hasher: str) -> list[bytes]:
        """The node values along the path: [leaf, level-1 node, ..., computed root] (one hash per level)."""
        nodes = [self.leaf]
        for e in self.path:
            children = list(e.hashes)
            children.insert(min(e.index, len(children)), nodes[-1])
            nodes.append(limbs_to_bytes(hash_level(as_limbs(children).reshape(1, len(children), 4), hasher))[0])
        return nodes

    # -- serde JSON -------------------------------------------------------------------------------

    def to_json(self) -> dict:
        def path(elements: Sequence[PathElement]) -> dict:
            return {"path": [{"hashes": [bytes_json(h) for h in e.hashes], "index": e.index} for e in elements]}

        if self.kind == "Single":
            body = {"root": bytes_json(self.root), "leaf": bytes_json(self.leaf), "path": path(self.base_path)}
        else:
            body = {"base_proof": path(self.base_path), "sub_proof": path(self.sub_path or ())}
            if self.top_path is not None:
                body["top_proof"] = path(self.top_path)
            body["root"] = bytes_json(self.root)
            body["leaf"] = bytes_json(self.leaf)
        return {"data": {self.kind: body}}

    @classmethod
    def from_json(cls, value: object, reader: JsonReader, where: str) -> MerkleProof:
        data = reader.obj(value, where, ("data",))["data"]
        kind, body = reader.variant(data, f"{where}.data", _KINDS)
        at = f"{where}.data.{kind}"

        def path(v: object, p: str) -> tuple[PathElement, ...]:
            elements = reader.array(reader.obj(v, p, ("path",))["path"], f"{p}.path")
            out = []
            for i, e in enumerate(elements):
                ep = f"{p}.path[{i}]"
                e = reader.obj(e, ep, ("hashes", "index"))
                out.append(PathElement(reader.frs(e["hashes"], f"{ep}.hashes"),
                                       reader.uint(e["index"], f"{ep}.index", 64)))
            return tuple(out)

        if kind == "Single":
            body = reader.obj(body, at, ("root", "leaf", "path"))
            return cls(reader.fr(body["root"], f"{at}.root"), reader.fr(body["leaf"], f"{at}.leaf"),
                       path(body["path"], f"{at}.path"))
        keys = ("base_proof", "sub_proof", "root", "leaf") + (("top_proof",) if kind == "Top" else ())
        body = reader.obj(body, at, keys)
        return cls(reader.fr(body["root"], f"{at}.root"), reader.fr(body["leaf"], f"{at}.leaf"),
                   path(body["base_proof"], f"{at}.base_proof"), path(body["sub_proof"], f"{at}.sub_proof"),
                   path(body["top_proof"], f"{at}.top_proof") if kind == "Top" else None)

    # -- bincode ----------------------------------------------------------------------------------

    def write_bincode(self, w: BincodeWriter) -> None:
        def path(elements: Sequence[PathElement]) -> None:
            w.u64(len(elements))
            for e in elements:
                w.u64(len(e.hashes))
                for h in e.hashes:
                    w.bytes32(h)
                w.u64(e.index)

        w.u32(_KINDS.index(self.kind))
        if self.kind == "Single":
            w.bytes32(self.root)
            w.bytes32(self.leaf)
            path(self.base_path)
            return
        path(self.base_path)
        path(self.sub_path or ())
        if self.top_path is not None:
            path(self.top_path)
        w.bytes32(self.root)
        w.bytes32(self.leaf)

    @classmethod
    def read_bincode(cls, r: BincodeReader, field: str, layout: TreeLayout | None = None) -> MerkleProof:
        """Read one proof; with `layout`, lengths are checked as they are read (precise errors)."""
        start = r.offset
        kind = _KINDS[r.tag(f"{field}.kind", 3)]
        if layout is not None and kind != layout.kind:
            raise r.error(f"{kind} proof, expected {layout.kind} for this sector size", f"{field}.kind", start)
        arities = layout.arities if layout is not None else None

        def path(p: str, first_level: int, count: int | None) -> tuple[PathElement, ...]:
            n = r.length(f"{p}.len", count)
            out = []
            for i in range(n):
                level = first_level + i
                expected = arities[level] - 1 if arities is not None and level < len(arities) else None
                m = r.length(f"{p}[{i}].hashes.len", expected)
                hashes = tuple(r.fr(f"{p}[{i}].hashes[{j}]") for j in range(m))
                istart = r.offset
                index = r.u64(f"{p}[{i}].index")
                if index > m:
                    raise r.error(f"path index {index} exceeds arity {m + 1}", f"{p}[{i}].index", istart)
                out.append(PathElement(hashes, index))
            return tuple(out)

        base_len = layout.base_levels if layout is not None else None
        one = 1 if layout is not None else None
        if kind == "Single":
            root = r.fr(f"{field}.root")
            leaf = r.fr(f"{field}.leaf")
            return cls(root, leaf, path(f"{field}.path", 0, base_len))
        base = path(f"{field}.base_path", 0, base_len)
        sub = path(f"{field}.sub_path", len(base), one)
        top = path(f"{field}.top_path", len(base) + len(sub), one) if kind == "Top" else None
        root = r.fr(f"{field}.root")
        leaf = r.fr(f"{field}.leaf")
        return cls(root, leaf, base, sub, top)


def _split_path(layout: TreeLayout, elements: list[PathElement], root: bytes, leaf: bytes) -> MerkleProof:
    b = layout.base_levels
    if layout.kind == "Single":
        return MerkleProof(root, leaf, tuple(elements))
    sub = (elements[b],)
    top = (elements[b + 1],) if layout.kind == "Top" else None
    return MerkleProof(root, leaf, tuple(elements[:b]), sub, top)


# -- hashing -------------------------------------------------------------------------------------------

def hash_level(children: np.ndarray, hasher: str) -> np.ndarray:
    """Hash each row of `children` ((n, arity, 4) limbs) into one node: (n, 4) limbs."""
    children = np.ascontiguousarray(children, dtype=np.uint64)
    n, arity = children.shape[0], children.shape[1]
    if hasher == POSEIDON:
        return hash_batch(children, merkle_tree_tag(arity))
    if hasher != SHA256 or arity != 2:
        raise ValueError(f"unsupported tree hasher {hasher!r} with arity {arity}")
    data = children.astype("<u8").tobytes()
    sha = hashlib.sha256
    out = bytearray(b"".join([sha(data[i:i + 64]).digest() for i in range(0, 64 * n, 64)]))
    out[31::32] = bytes(b & FR32_MASK for b in out[31::32])
    return np.frombuffer(bytes(out), dtype="<u8").reshape(n, 4).astype(np.uint64)


def compute_roots(proofs: Sequence[MerkleProof], hasher: str) -> list[bytes]:
    """The root each proof's path implies, hashing level by level across proofs in batches."""
    roots: list[bytes] = [b""] * len(proofs)
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, p in enumerate(proofs):
        groups.setdefault(tuple(e.arity for e in p.path), []).append(i)
    for arities, members in groups.items():
        cur = as_limbs([proofs[i].leaf for i in members])
        for level, arity in enumerate(arities):
            children = np.empty((len(members), arity, 4), dtype=np.uint64)
            for row, i in enumerate(members):
                e = proofs[i].path[level]
                pos = min(e.index, arity - 1)
                sib = as_limbs(list(e.hashes)) if e.hashes else np.empty((0, 4), np.uint64)
                children[row, :pos] = sib[:pos]
                children[row, pos] = cur[row]
                children[row, pos + 1:] = sib[pos:]
            cur = hash_level(children, hasher)
        for row, value in zip(members, limbs_to_bytes(cur), strict=True):
            roots[row] = value
    return roots


# -- trees ---------------------------------------------------------------------------------------------

class _Tree(ABC):
    layout: TreeLayout

    @abstractmethod
    def node(self, level: int, index: int) -> bytes:
        """Node `index` of `level` (0 = leaves) as 32 bytes."""

    def _siblings(self, level: int, start: int, arity: int, skip: int) -> tuple[bytes, ...]:
        return tuple(self.node(level, j) for j in range(start, start + arity) if j != skip)

    @property
    def root(self) -> bytes:
        return self.node(self.layout.depth, 0)

    def leaf(self, index: int) -> bytes:
        return self.node(0, index)

    def proof(self, index: int) -> MerkleProof:
        """Inclusion proof of leaf `index`, cut into Single/Sub/Top per the layout."""
        if not 0 <= index < self.layout.leaves:
            raise ValueError(f"leaf {index} outside the tree [0, {self.layout.leaves})")
        elements = []
        idx = index
        for level, a in enumerate(self.layout.arities):
            pos = idx % a
            elements.append(PathElement(self._siblings(level, idx - pos, a, idx), pos))
            idx //= a
        return _split_path(self.layout, elements, self.root, self.leaf(index))


class DenseTree(_Tree):
    """Every level stored; leaves given as 32-byte values ((N, 4) limbs, (N, 32) uint8 or bytes)."""

    def __init__(self, layout: TreeLayout, leaves: np.ndarray | bytes) -> None:
        self.layout = layout
        cur = as_limbs(leaves)
        if cur.shape[0] != layout.leaves:
            raise ValueError(f"tree needs {layout.leaves} leaves, got {cur.shape[0]}")
        self.levels = [cur]
        for a in layout.arities:
            cur = hash_level(cur.reshape(-1, a, 4), layout.hasher)
            self.levels.append(cur)

    def node(self, level: int, index: int) -> bytes:
        return self.levels[level][index].astype("<u8").tobytes()

    def level_bytes(self, level: int) -> list[bytes]:
        return limbs_to_bytes(self.levels[level])


class SparseTree(_Tree):
    """A tree whose leaves all equal `default_leaf` except those in `leaves` ({index: value}).

    Only the nodes above given leaves are computed and stored; any other node of level k is the
    default subtree root `defaults[k]` (default leaf hashed up k levels).
    """

    def __init__(self, layout: TreeLayout, default_leaf: bytes, leaves: dict[int, bytes] | None = None) -> None:
        self.layout = layout
        self.defaults = [bytes(default_leaf)]
        for a in layout.arities:
            children = np.repeat(as_limbs(self.defaults[-1]), a, axis=0).reshape(1, a, 4)
            self.defaults.append(limbs_to_bytes(hash_level(children, layout.hasher))[0])
        given = dict(leaves or {})
        for idx in given:
            if not 0 <= idx < layout.leaves:
                raise ValueError(f"leaf {idx} outside the tree [0, {layout.leaves})")
        self.levels: list[dict[int, bytes]] = [given]
        for level, a in enumerate(layout.arities):
            below = self.levels[-1]
            parents = sorted({i // a for i in below})
            if not parents:
                self.levels.append({})
                continue
            default = self.defaults[level]
            flat = [below.get(p * a + j, default) for p in parents for j in range(a)]
            hashed = hash_level(as_limbs(flat).reshape(len(parents), a, 4), layout.hasher)
            self.levels.append(dict(zip(parents, limbs_to_bytes(hashed), strict=True)))

    def node(self, level: int, index: int) -> bytes:
        return self.levels[level].get(index, self.defaults[level])

    @property
    def explicit_nodes(self) -> int:
        return sum(len(level) for level in self.levels)

