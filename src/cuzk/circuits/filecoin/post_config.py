"""The Fallback PoSt circuit's configuration and witness types (`FallbackPoStConfig`, `PoStSector`)
and the published configurations, shared by the circuit (`post.py`) and its batched witness
generator (`post_witness.py`), which both build on this module. `post.py` re-exports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from cuzk.filecoin.sizes import ALL_SIZES, WINDOW_POST_CHALLENGES, WINNING_POST_CHALLENGES, WINNING_POST_SECTORS
from cuzk.gadgets.por import POSEIDON, PathLevel, TreeShape

__all__ = [
    "NODE_SIZE",
    "WINDOW_POST_CHALLENGE_COUNT",
    "WINDOW_POST_CONFIGS",
    "WINNING_POST_CHALLENGE_COUNT",
    "WINNING_POST_CONFIGS",
    "WINNING_POST_SECTOR_COUNT",
    "FallbackPoStConfig",
    "PoStSector",
]

NODE_SIZE = 32  #: bytes per tree leaf
WINNING_POST_CHALLENGE_COUNT = WINNING_POST_CHALLENGES  #: leaves challenged in the one winning sector
WINNING_POST_SECTOR_COUNT = WINNING_POST_SECTORS  #: real sectors in a WinningPoSt
WINDOW_POST_CHALLENGE_COUNT = WINDOW_POST_CHALLENGES  #: leaves challenged per WindowPoSt sector


@dataclass(frozen=True)
class FallbackPoStConfig:
    """What decides the circuit's layout: sector size (bytes), sectors per partition, challenges
    per sector, and the tree_r_last shape (Poseidon; 0 = no sub/top level)."""

    sector_size: int
    sector_count: int
    challenge_count: int
    base_arity: int = 8
    sub_arity: int = 0
    top_arity: int = 0

    def __post_init__(self) -> None:
        if self.sector_size % NODE_SIZE:
            raise ValueError(f"sector size {self.sector_size} is not a whole number of {NODE_SIZE}-byte nodes")
        if self.sector_count < 1 or self.challenge_count < 1:
            raise ValueError("a PoSt circuit needs at least one sector and one challenge per sector")
        _ = self.tree_r  # validates nodes against the arities

    @property
    def nodes(self) -> int:
        return self.sector_size // NODE_SIZE

    @cached_property  # read per sector and path: a TreeShape each time cost ~10 us
    def tree_r(self) -> TreeShape:
        """Shape of tree_r_last (comm_r_last is its root)."""
        return TreeShape(self.nodes, self.base_arity, self.sub_arity, self.top_arity, POSEIDON)

    @property
    def inputs_per_sector(self) -> int:
        """comm_r, then one leaf index per challenge."""
        return 1 + self.challenge_count

    @property
    def num_public_inputs(self) -> int:
        """Public inputs after ONE."""
        return self.sector_count * self.inputs_per_sector

    @classmethod
    def winning(cls, sector_size: int) -> FallbackPoStConfig:
        """The published WinningPoSt circuit of a sector size in bytes."""
        return _lookup(WINNING_POST_CONFIGS, sector_size, "WinningPoSt")

    @classmethod
    def window(cls, sector_size: int) -> FallbackPoStConfig:
        """The published WindowPoSt circuit (one partition) of a sector size in bytes."""
        return _lookup(WINDOW_POST_CONFIGS, sector_size, "WindowPoSt")


def _lookup(configs: dict[int, FallbackPoStConfig], sector_size: int, what: str) -> FallbackPoStConfig:
    try:
        return configs[sector_size]
    except KeyError:
        sizes = ", ".join(str(s) for s in configs)
        raise ValueError(f"no published {what} circuit for sector size {sector_size} (known: {sizes})") from None


#: filecoin-proofs `winning_post_setup_params`: the circuit has challenges / sectors "sectors" of
#: challenges / that many challenges each, i.e. 66 one-challenge sectors (the real sector repeated).
_WINNING_CIRCUIT_SECTORS = WINNING_POST_CHALLENGE_COUNT // WINNING_POST_SECTOR_COUNT
_WINNING_CIRCUIT_CHALLENGES = WINNING_POST_CHALLENGE_COUNT // _WINNING_CIRCUIT_SECTORS

#: Sector size in bytes → WinningPoSt circuit (66 sectors × 1 challenge), tree shapes from the size table.
WINNING_POST_CONFIGS: dict[int, FallbackPoStConfig] = {
    p.sector_bytes: FallbackPoStConfig(p.sector_bytes, _WINNING_CIRCUIT_SECTORS, _WINNING_CIRCUIT_CHALLENGES,
                                       p.tree_shape.base, p.tree_shape.sub, p.tree_shape.top)
    for p in ALL_SIZES
}

#: Sector size in bytes → WindowPoSt partition circuit: sectors per partition × 10 challenges.
WINDOW_POST_CONFIGS: dict[int, FallbackPoStConfig] = {
    p.sector_bytes: FallbackPoStConfig(p.sector_bytes, p.window_post_sectors, WINDOW_POST_CHALLENGE_COUNT,
                                       p.tree_shape.base, p.tree_shape.sub, p.tree_shape.top)
    for p in ALL_SIZES
}


@dataclass
class PoStSector:
    """One sector's witness (Rust's circuit `Sector`): its commitments, and per challenge the
    challenged tree_r_last leaf and its path. comm_r is public; the rest is private."""

    comm_r: int | None
    comm_c: int | None
    comm_r_last: int | None
    leaves: Sequence[int | None]
    paths: Sequence[Sequence[PathLevel]]

    @classmethod
    def blank(cls, config: FallbackPoStConfig) -> PoStSector:
        count = config.challenge_count
        return cls(None, None, None, [None] * count, [config.tree_r.blank_path() for _ in range(count)])

    def check_layout(self, config: FallbackPoStConfig) -> None:
        """Refuse witnesses whose sizes would change the rows."""
        if len(self.leaves) != config.challenge_count or len(self.paths) != config.challenge_count:
            raise ValueError(f"a sector has {config.challenge_count} challenges, got {len(self.leaves)} leaves "
                             f"and {len(self.paths)} paths")
        for i, path in enumerate(self.paths):
            config.tree_r.check_path(path, f"challenge {i} path")
