"""The SnapDeals circuit's configuration and witness types (`EmptySectorUpdateConfig`,
`UpdateChallengeProof`) and the configurations of every accepted sector size, shared by the
circuit (`snap.py`) and its batched witness generator (`snap_witness.py`), which both build on this
module. `snap.py` re-exports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cuzk.filecoin.sizes import snap_apex, snap_challenges, snap_hs, snap_partitions
from cuzk.gadgets.multipack import CAPACITY
from cuzk.gadgets.por import POSEIDON, TreeShape
from cuzk.hashes.poseidon_constants import custom_tag

__all__ = [
    "GEN_RANDOMNESS_TAG",
    "PUBLISHED_SECTOR_SIZES",
    "SNAP_CONFIGS",
    "EmptySectorUpdateConfig",
    "Siblings",
    "UpdateChallengeProof",
]

#: Domain tag of phi, rho and the challenge digests: HashType::Custom(1) = 2^40.
GEN_RANDOMNESS_TAG = custom_tag(1)
_NODE_SIZE = 32
_KIB = 1 << 10

#: Sector sizes in bytes that storage-proofs-update accepts (ALLOWED_SECTOR_SIZES: test sizes and
#: published ones) → tree_r (sub, top) arities; the base arity is always 8 (validate_tree_r_shape).
_TREE_R_SHAPES: dict[int, tuple[int, int]] = {
    1 * _KIB: (4, 0),
    2 * _KIB: (0, 0),
    4 * _KIB: (2, 0),
    8 * _KIB: (4, 0),
    16 * _KIB: (8, 0),
    32 * _KIB: (8, 2),
    8 << 20: (0, 0),
    16 << 20: (2, 0),
    512 << 20: (0, 0),
    32 << 30: (8, 0),
    64 << 30: (8, 2),
}

#: Sector sizes with published SnapDeals parameters.
PUBLISHED_SECTOR_SIZES = (2 * _KIB, 8 << 20, 512 << 20, 32 << 30, 64 << 30)


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


@dataclass(frozen=True)
class EmptySectorUpdateConfig:
    """What decides the circuit's layout (Rust's `PublicParams` plus the tree_r type).

    Fields are explicit so that small non-published layouts can be built for tests; the published
    ones come from `for_sector_size`, which applies storage-proofs-update's constants.rs rules.
    """

    nodes: int
    partition_count: int
    challenge_count: int
    hs: tuple[int, ...]
    apex_leaf_count: int
    base_arity: int = 8
    sub_arity: int = 0
    top_arity: int = 0

    def __post_init__(self) -> None:
        if not _is_pow2(self.nodes) or self.nodes < 2:
            raise ValueError(f"sector nodes must be a power of two >= 2, got {self.nodes}")
        for name in ("partition_count", "apex_leaf_count"):
            if not _is_pow2(getattr(self, name)):
                raise ValueError(f"{name} must be a power of two, got {getattr(self, name)}")
        if self.random_bits_per_challenge < 1 or self.tree_d_low_levels < 0:
            raise ValueError(f"{self.partition_count} partitions of {self.apex_leaf_count} apex leaves do not fit "
                             f"a tree_d of {self.nodes} leaves")
        if self.challenge_count < 1 or not self.hs:
            raise ValueError("a SnapDeals circuit needs at least one challenge and one allowed h")
        if not all(1 <= h <= self.challenge_bit_len for h in self.hs):
            raise ValueError(f"every h must be in 1..{self.challenge_bit_len}, got {self.hs}")
        if self.partition_bit_len + len(self.hs) > CAPACITY:
            raise ValueError("k_and_h_select does not fit in a field element")
        _ = self.tree_r  # validates nodes against the arities

    @classmethod
    def for_sector_size(cls, sector_size: int) -> EmptySectorUpdateConfig:
        """The configuration storage-proofs-update uses for a sector size in bytes (docs/circuits.md §2 rules)."""
        try:
            return SNAP_CONFIGS[sector_size]
        except KeyError:
            sizes = ", ".join(str(s) for s in SNAP_CONFIGS)
            raise ValueError(f"no SnapDeals circuit for sector size {sector_size} (allowed: {sizes})") from None

    # -- derived sizes (Rust's PublicParams fields and gadget locals) ------------------------------
    @property
    def sector_size(self) -> int:
        return self.nodes * _NODE_SIZE

    @property
    def challenge_bit_len(self) -> int:
        """Bits of a challenge = height of tree_d."""
        return self.nodes.bit_length() - 1

    @property
    def partition_bit_len(self) -> int:
        return self.partition_count.bit_length() - 1

    @property
    def apex_leaf_bit_len(self) -> int:
        return self.apex_leaf_count.bit_length() - 1

    @property
    def random_bits_per_challenge(self) -> int:
        return self.challenge_bit_len - self.partition_bit_len

    @property
    def challenges_per_digest(self) -> int:
        return CAPACITY // self.random_bits_per_challenge

    @property
    def digests_per_partition(self) -> int:
        """ceil(challenges / per digest) (Rust computes it in f32; equal for every layout in use)."""
        return -(-self.challenge_count // self.challenges_per_digest)

    @property
    def tree_d_low_levels(self) -> int:
        """tree_d levels each challenge opens itself: from the leaf up to its apex leaf."""
        return self.challenge_bit_len - self.partition_bit_len - self.apex_leaf_bit_len

    @property
    def tree_r(self) -> TreeShape:
        """Shape of tree_r_old and tree_r_new."""
        return TreeShape(self.nodes, self.base_arity, self.sub_arity, self.top_arity, POSEIDON)

    @property
    def tree_d(self) -> TreeShape:
        return TreeShape.binary_sha256(self.nodes)

    # -- public inputs -------------------------------------------------------------------------------
    def h_select(self, h: int) -> int:
        """2^(index of h in hs): the circuit knows the allowed h values, the input names one."""
        if h not in self.hs:
            raise ValueError(f"h = {h} is not allowed for this sector size (allowed: {self.hs})")
        return 1 << self.hs.index(h)

    def k_and_h_select(self, k: int, h: int) -> int:
        if not 0 <= k < self.partition_count:
            raise ValueError(f"partition {k} is out of range 0..{self.partition_count - 1}")
        return k | self.h_select(h) << self.partition_bit_len

    def public_inputs(self, k: int, h: int, comm_r_old: int, comm_d_new: int, comm_r_new: int) -> list[int]:
        """[k_and_h_select, comm_r_old, comm_d_new, comm_r_new] (ONE excluded)."""
        return [self.k_and_h_select(k, h), comm_r_old, comm_d_new, comm_r_new]


def _rule_config(sector_size: int) -> EmptySectorUpdateConfig:
    """storage-proofs-update constants.rs: partition_count, challenge_count, hs, apex_leaf_count."""
    nodes = sector_size // _NODE_SIZE
    sub, top = _TREE_R_SHAPES[sector_size]
    return EmptySectorUpdateConfig(nodes, snap_partitions(nodes), snap_challenges(nodes), snap_hs(nodes),
                                   snap_apex(nodes), 8, sub, top)


#: Sector size in bytes → configuration, for every size storage-proofs-update accepts.
SNAP_CONFIGS: dict[int, EmptySectorUpdateConfig] = {size: _rule_config(size) for size in _TREE_R_SHAPES}


# -- witness ----------------------------------------------------------------------------------------

Siblings = Sequence[Sequence[int | None]]


@dataclass
class UpdateChallengeProof:
    """One challenge's witness (Rust's circuit `ChallengeProof`): the challenged node in tree_r_old,
    tree_d_new and tree_r_new with their paths as sibling lists, leaf level first (the positions
    come from the challenge bits inside the circuit). `path_d_new` is the full tree_d path: the
    circuit uses its low levels per challenge and, from the first challenge, its top
    partition_bit_len levels (the partition path, the same for every challenge of a partition).
    `leaf_r_new` is only compared with the value the circuit computes."""

    leaf_r_old: int | None
    path_r_old: Siblings
    leaf_d_new: int | None
    path_d_new: Siblings
    leaf_r_new: int | None
    path_r_new: Siblings

    @classmethod
    def blank(cls, config: EmptySectorUpdateConfig) -> UpdateChallengeProof:
        path_r = [[None] * (arity - 1) for arity in config.tree_r.arities]
        path_d = [[None] for _ in range(config.challenge_bit_len)]
        return cls(None, path_r, None, path_d, None, [list(level) for level in path_r])

    def check_layout(self, config: EmptySectorUpdateConfig) -> None:
        """Refuse paths whose sizes would change the rows."""
        arities = config.tree_r.arities
        for name, path in (("path_r_old", self.path_r_old), ("path_r_new", self.path_r_new)):
            if [len(level) + 1 for level in path] != list(arities):
                raise ValueError(f"{name}: tree_r has levels of arities {arities}, "
                                 f"got sibling counts {[len(level) for level in path]}")
        if len(self.path_d_new) != config.challenge_bit_len or any(len(level) != 1 for level in self.path_d_new):
            raise ValueError(f"path_d_new must have {config.challenge_bit_len} levels of one sibling")
