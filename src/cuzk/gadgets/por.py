"""Merkle inclusion ("proof of retrievability"), row for row as storage-proofs-core's `por.rs`
(docs/circuits.md §6).

Filecoin trees are a stack of levels: `base_levels` levels of the base arity, then optionally one
sub level and one top level that combine several base trees. Per level the gadget allocates
log2(arity) index bits (LSB first), allocates the arity - 1 siblings, inserts the current node
among them (`insertion.insert`) and hashes: binary/4/8-ary SHA-256 with fr32 truncation for tree_d,
Poseidon with the MerkleTree tag for tree_c / tree_r_last. The concatenated index bits, packed
into one public input, equal the leaf index; the last row ties the computed root to the given one.

Variants, all emitting the same per-level rows:

* `enforce_inclusion`: leaf and root already allocated, path bits public (PoRep's five kinds of
  openings);
* `alloc_leaf_and_enforce_inclusion`: the leaf is allocated as the first step (PoSt);
* `por_no_challenge_input`: caller-supplied index bits and siblings, no bit allocation and no
  public input (SnapDeals);
* `PoRCircuit`: the standalone circuit of storage-proofs-core's tests (private leaf, root
  allocated after the path input, optionally made public).

A path is a list of `PathLevel(siblings, index)`, leaf level first; values are Python ints, or
None in blank circuits (key generation), where nothing is ever evaluated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, NamedTuple

from cuzk.gadgets.boolean import IS_KIND, AllocatedBit, Boolean, reverse_bit_numbering
from cuzk.gadgets.insertion import insert
from cuzk.gadgets.multipack import pack_into_inputs
from cuzk.gadgets.num import AllocatedNum, equal
from cuzk.gadgets.poseidon import poseidon_hash_circuit
from cuzk.gadgets.sha256 import hash_circuit
from cuzk.hashes.poseidon import hash_merkle
from cuzk.hashes.poseidon_constants import merkle_tree_tag, poseidon_constants
from cuzk.r1cs import ConstraintSystem

__all__ = [
    "POSEIDON",
    "SHA256",
    "Hasher",
    "NativeTree",
    "PathLevel",
    "PoRCircuit",
    "TreeShape",
    "alloc_leaf_and_enforce_inclusion",
    "alloc_path_values",
    "ascend",
    "enforce_inclusion",
    "native_node_hash",
    "node_hash_circuit",
    "por_no_challenge_input",
    "por_public_inputs",
]

Hasher = Literal["sha256", "poseidon"]
SHA256: Hasher = "sha256"
POSEIDON: Hasher = "poseidon"

#: fr32 truncation of a SHA-256 digest read little-endian: the top two bits are cleared.
_FR32_MASK = (1 << 254) - 1


class PathLevel(NamedTuple):
    """One level of a Merkle path: the arity - 1 sibling values in order, and the node's position
    among the arity children (0..arity-1). Both None in a blank circuit."""

    siblings: Sequence[int | None]
    index: int | None


def _log2(n: int, what: str) -> int:
    if n < 2 or n & (n - 1):
        raise ValueError(f"{what} must be a power of two >= 2, got {n}")
    return n.bit_length() - 1


@dataclass(frozen=True)
class TreeShape:
    """A Filecoin Merkle tree: `leaves` leaves, base arity, optional sub and top arities (0 = none).

    `leaves` = base_arity^base_levels · sub · top; the sub/top levels combine `sub·top` base trees.
    As in Rust, a top level requires a sub level.
    """

    leaves: int
    base_arity: int = 8
    sub_arity: int = 0
    top_arity: int = 0
    hasher: Hasher = POSEIDON

    def __post_init__(self) -> None:
        if self.hasher not in (SHA256, POSEIDON):
            raise ValueError(f"unknown tree hasher {self.hasher!r}")
        _log2(self.base_arity, "base arity")
        if self.sub_arity:
            _log2(self.sub_arity, "sub-tree arity")
        if self.top_arity:
            _log2(self.top_arity, "top-tree arity")
            if not self.sub_arity:
                raise ValueError("a top-tree level needs a sub-tree level")
        per_base, rest = divmod(self.leaves, self.base_tree_count)
        levels = 0
        while rest == 0 and per_base % self.base_arity == 0 and per_base > 1:
            per_base //= self.base_arity
            levels += 1
        if rest or per_base != 1 or levels == 0:
            raise ValueError(f"{self.leaves} leaves do not fit a {self.describe()} tree")

    @classmethod
    def binary_sha256(cls, leaves: int) -> TreeShape:
        """tree_d: a binary SHA-256 tree."""
        return cls(leaves, 2, 0, 0, SHA256)

    @property
    def base_tree_count(self) -> int:
        return (self.sub_arity or 1) * (self.top_arity or 1)

    @property
    def base_levels(self) -> int:
        per_base = self.leaves // self.base_tree_count
        return (per_base.bit_length() - 1) // (self.base_arity.bit_length() - 1)

    @cached_property  # read per path level by the circuits and the witness generators
    def arities(self) -> tuple[int, ...]:
        """Arity of each path level, leaf level first."""
        extra = tuple(a for a in (self.sub_arity, self.top_arity) if a)
        return (self.base_arity,) * self.base_levels + extra

    @property
    def index_bit_count(self) -> int:
        return self.leaves.bit_length() - 1

    def describe(self) -> str:
        return f"{self.hasher} {self.base_arity}-{self.sub_arity}-{self.top_arity}"

    def blank_path(self) -> list[PathLevel]:
        return [PathLevel([None] * (arity - 1), None) for arity in self.arities]

    def check_path(self, path: Sequence[PathLevel], what: str = "path") -> None:
        """The path's level count and sibling counts decide the rows; refuse any other layout."""
        arities = self.arities
        if len(path) != len(arities):
            raise ValueError(f"{what}: a {self.describe()} tree over {self.leaves} leaves has "
                             f"{len(arities)} levels, got {len(path)}")
        for level, (arity, step) in enumerate(zip(arities, path, strict=True)):
            if len(step.siblings) != arity - 1:
                raise ValueError(f"{what}: level {level} needs {arity - 1} siblings, got {len(step.siblings)}")
            if step.index is not None and not 0 <= step.index < arity:
                raise ValueError(f"{what}: level {level} index {step.index} is not in 0..{arity - 1}")


# -- native counterpart (witness construction and tests) ----------------------------------------

def native_node_hash(hasher: Hasher, children: Sequence[int]) -> int:
    """The node the circuit computes from `children`: fr32-truncated SHA-256 of their 32-byte LE
    encodings, or Poseidon with the MerkleTree tag of that arity."""
    if hasher == SHA256:
        digest = hashlib.sha256(b"".join(c.to_bytes(32, "little") for c in children)).digest()
        return int.from_bytes(digest, "little") & _FR32_MASK
    return hash_merkle(len(children), children)


class NativeTree:
    """An in-memory tree of a given shape, for building witnesses of small circuits.

    Level k+1 hashes level k in consecutive groups of arity_k, so the base trees sit side by side
    and the sub/top levels combine their roots, exactly Filecoin's layout.
    """

    def __init__(self, shape: TreeShape, leaves: Sequence[int]) -> None:
        if len(leaves) != shape.leaves:
            raise ValueError(f"the tree has {shape.leaves} leaves, got {len(leaves)}")
        self.shape = shape
        self.levels: list[list[int]] = [list(leaves)]
        for arity in shape.arities:
            below = self.levels[-1]
            self.levels.append([native_node_hash(shape.hasher, below[i:i + arity])
                                for i in range(0, len(below), arity)])

    @property
    def root(self) -> int:
        return self.levels[-1][0]

    def path(self, index: int) -> list[PathLevel]:
        """The opening of leaf `index`: per level, the siblings and the node's position."""
        if not 0 <= index < self.shape.leaves:
            raise ValueError(f"leaf {index} is out of range 0..{self.shape.leaves - 1}")
        out = []
        for arity, level in zip(self.shape.arities, self.levels, strict=False):
            pos = index % arity
            group = level[index - pos:index - pos + arity]
            out.append(PathLevel(group[:pos] + group[pos + 1:], pos))
            index //= arity
        return out


# -- the gadget ---------------------------------------------------------------------------------

def node_hash_circuit(cs: ConstraintSystem, hasher: Hasher, children: Sequence[AllocatedNum]) -> AllocatedNum:
    """filecoin-hashers `hash_multi_leaf_circuit`.

    SHA-256: each child is decomposed (255 bits + unpacking row, in order), padded with one
    constant-false bit and byte-reversed into stream order; the concatenation is hashed and
    packed (fr32). Poseidon: the MerkleTree-tagged hash of that arity.
    """
    if hasher == SHA256:
        message: list[Boolean] = []
        for child in children:
            message.extend(reverse_bit_numbering(child.to_bits_le(cs)))
        return hash_circuit(cs, message)
    arity = len(children)
    values = [c.value for c in children] if cs.needs_values else None
    out = poseidon_hash_circuit(cs, [c.variable for c in children], poseidon_constants(arity),
                                merkle_tree_tag(arity), values)
    return AllocatedNum(out.variable, out.value)


def _index_bits(cs: ConstraintSystem, index: int | None, count: int) -> list[Boolean]:
    """`count` AllocatedBits of `index`, LSB first, each with its booleanity row."""
    known = index is not None and cs.needs_values
    return [Boolean(IS_KIND, AllocatedBit.alloc(cs, bool(index >> i & 1) if known else None))  # type: ignore[operator]
            for i in range(count)]


def ascend(cs: ConstraintSystem, shape: TreeShape, path: Sequence[PathLevel],
           leaf: AllocatedNum) -> tuple[AllocatedNum, list[Boolean]]:
    """The per-level rows (bits, siblings, insertion, hash) from `leaf` up; returns the computed
    root and all index bits in level order."""
    shape.check_path(path)
    cur = leaf
    all_bits: list[Boolean] = []
    for arity, step in zip(shape.arities, path, strict=True):
        bits = _index_bits(cs, step.index, arity.bit_length() - 1)
        all_bits.extend(bits)
        siblings = [AllocatedNum.alloc(cs, "path element", value) for value in step.siblings]
        cur = node_hash_circuit(cs, shape.hasher, insert(cs, cur, bits, siblings))
    return cur, all_bits


def enforce_inclusion(cs: ConstraintSystem, shape: TreeShape, path: Sequence[PathLevel], leaf: AllocatedNum,
                      root: AllocatedNum) -> AllocatedNum:
    """PoRep's opening: ascend, pack all index bits into one public input, row computed·ONE = root.

    Returns the public input (the leaf index)."""
    computed, bits = ascend(cs, shape, path, leaf)
    (path_input,) = pack_into_inputs(cs, bits)
    equal(cs, computed, root, "enforce root is correct")
    return path_input


def alloc_leaf_and_enforce_inclusion(cs: ConstraintSystem, shape: TreeShape, path: Sequence[PathLevel],
                                     leaf_value: int | None, root: AllocatedNum) -> tuple[AllocatedNum, AllocatedNum]:
    """PoSt's opening: the leaf is a fresh aux variable allocated first. Returns (leaf, path input)."""
    leaf = AllocatedNum.alloc(cs, "value", leaf_value)
    return leaf, enforce_inclusion(cs, shape, path, leaf, root)


def alloc_path_values(cs: ConstraintSystem, siblings: Sequence[Sequence[int | None]]) -> list[list[AllocatedNum]]:
    """Allocate the siblings of a path, level by level, in order (SnapDeals allocates a whole path
    before checking it)."""
    return [[AllocatedNum.alloc(cs, "path sibling", value) for value in level] for level in siblings]


def por_no_challenge_input(cs: ConstraintSystem, hasher: Hasher, index_bits: Sequence[Boolean],
                           leaf: AllocatedNum, path_values: Sequence[Sequence[AllocatedNum]],
                           root: AllocatedNum) -> None:
    """Merkle check with given (already allocated) index bits and siblings: per level insert +
    hash, then row computed·ONE = root; no bit allocation, no public input.

    Each level's arity is its sibling count + 1 and consumes log2(arity) of `index_bits` (LSB
    first); all bits must be consumed, as Rust asserts.
    """
    cur = leaf
    offset = 0
    for siblings in path_values:
        count = _log2(len(siblings) + 1, "level arity")
        bits = index_bits[offset:offset + count]
        if len(bits) != count:
            raise ValueError("fewer index bits than the path's levels need")
        offset += count
        cur = node_hash_circuit(cs, hasher, insert(cs, cur, bits, siblings))
    if offset != len(index_bits):
        raise ValueError(f"{len(index_bits)} index bits given, the path uses {offset}")
    equal(cs, cur, root, "calculated root == provided root")


@dataclass
class PoRCircuit:
    """storage-proofs-core's standalone `PoRCircuit`: leaf allocated first, the path rows, the
    path input, then the root allocated (after the path input), the root row and, unless
    `private`, the root made public. Inputs: [leaf index] or [leaf index, root]."""

    shape: TreeShape
    leaf: int | None
    path: Sequence[PathLevel]
    root: int | None
    private: bool = False

    @classmethod
    def blank(cls, shape: TreeShape, private: bool = False) -> PoRCircuit:
        return cls(shape, None, shape.blank_path(), None, private)

    def synthesize(self, cs: ConstraintSystem) -> None:
        leaf = AllocatedNum.alloc(cs, "value", self.leaf)
        computed, bits = ascend(cs, self.shape, self.path, leaf)
        pack_into_inputs(cs, bits)
        root = AllocatedNum.alloc(cs, "root_value", self.root)
        equal(cs, computed, root, "enforce root is correct")
        if not self.private:
            root.inputize(cs, "root")


def por_public_inputs(challenge: int, root: int | None = None) -> list[int]:
    """`PoRCompound::generate_public_inputs`: the leaf index, then the root if it is public."""
    return [challenge] if root is None else [challenge, root]
