"""Which Filecoin circuits are a header followed by identical blocks, and their small versions.

`cuzk.r1cs.blocks.compile_blocks` compiles an N-block circuit from recordings of its one- and
two-block versions; this module knows how to make them:

- PoRep (`StackedCircuit`): the header is replica_id / comm_d / comm_r and comm_r's Poseidon; a
  block is one challenge (`StackedConfig.challenges`), 18 inputs and ~7.2M rows at 32GiB.
- PoSt (`FallbackPoStCircuit`): no header beyond ONE; a block is one sector
  (`FallbackPoStConfig.sector_count`): 66 for WinningPoSt, 2349 for a 32GiB WindowPoSt partition.
- SnapDeals (`EmptySectorUpdateCircuit`): a block is one challenge (10 or 86). Its header derives
  the challenges' random bits from ceil(challenges / per digest) digests, with that count as a
  coefficient, so a circuit of one or two challenges would have another header: the small version
  is a `SnapChallengeSubset`, the real header with only challenges 0 and 1. Challenge k's rows use
  its own slice of the digests' bits, header variables that move from block to block by no fixed
  step; the version says where each challenge's bits are (`BlockVersions.per_block_header_aux`).
  The header is large (from 8MiB on the 128 apex leaves' SHA-256 tree: ~5.9M rows, 59% of snap-8m,
  7% of snap-32g), so only the two-challenge version is recorded and the one-challenge recording is cut
  out of it where the version noted that challenge 0 ends (`BlockVersions.first_block`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from cuzk.circuits.filecoin.porep import StackedCircuit, StackedConfig
from cuzk.circuits.filecoin.post import FallbackPoStCircuit, FallbackPoStConfig
from cuzk.circuits.filecoin.snap import EmptySectorUpdateCircuit, EmptySectorUpdateConfig, SnapChallengeSubset
from cuzk.errors import CuzkError
from cuzk.filecoin.sizes import CircuitKind, parse_circuit_id
from cuzk.r1cs import Circuit, R1csMatrices
from cuzk.r1cs.blocks import BlockStructureError, first_block_of

__all__ = ["BlockVersions", "block_count", "block_header_rows", "block_versions"]

#: Rows of one SHA-256 node of tree_d with its insertion (`hash2_circuit`: 45,379; a partition-path
#: level 45,382), rounded up; and of one challenge digest (index, Poseidon_GR, 255 bits).
_SHA256_NODE_ROWS = 45_400
_DIGEST_ROWS = 568
#: The rest of a SnapDeals header: k_and_h_select and its bits, phi, comm_r_old / comm_r_new (1,516 at 2KiB).
_SNAP_HEADER_OTHER_ROWS = 2_000


@dataclass(frozen=True)
class BlockVersions:
    """The blank one- and two-block circuits of a circuit made of `blocks` identical blocks.

    `one` is None where the one-block recording is cut out of the two-block one: `first_block`
    does that, once `two` has been recorded. `per_block_header_aux`, for blocks that each use their
    own header variables (SnapDeals), gives the table `compile_blocks` takes, also once `two` has
    been recorded."""

    one: Circuit | None
    two: Circuit
    blocks: int
    what: str  #: what a block is ("challenge", "sector"), for messages
    per_block_header_aux: Callable[[], np.ndarray] | None = None
    first_block: Callable[[R1csMatrices], R1csMatrices] | None = None

    def __post_init__(self) -> None:
        if (self.one is None) == (self.first_block is None):
            raise ValueError("block versions need either a one-block circuit or a way to cut it from two blocks")


def block_versions(circuit: object) -> BlockVersions | None:
    """The small blank versions of `circuit` (a partition instance is unwrapped), or None when it is
    not a circuit made of identical blocks. Values never matter: the R1CS depends only on the config."""
    inner = getattr(circuit, "circuit", circuit)  # compound.PartitionInstance wraps the circuit
    if isinstance(inner, StackedCircuit):
        config = inner.config
        return BlockVersions(StackedCircuit.blank(replace(config, challenges=1)),
                             StackedCircuit.blank(replace(config, challenges=2)), config.challenges, "challenge")
    if isinstance(inner, FallbackPoStCircuit):
        config = inner.config
        return BlockVersions(FallbackPoStCircuit.blank(replace(config, sector_count=1)),
                             FallbackPoStCircuit.blank(replace(config, sector_count=2)), config.sector_count,
                             "sector")
    if isinstance(inner, EmptySectorUpdateCircuit) and inner.config.challenge_count >= 2:
        two = SnapChallengeSubset(inner.config, (0, 1))
        return BlockVersions(None, two, inner.config.challenge_count, "challenge",
                             per_block_header_aux=lambda: _random_bit_aux(two),
                             first_block=lambda recorded: _snap_first_challenge(two, recorded))
    return None


def _recorded(two: SnapChallengeSubset) -> SnapChallengeSubset:
    if two.random_bit_aux is None or len(two.ends) != 3:
        raise CuzkError("the SnapDeals two-challenge version must be recorded first")
    return two


def _random_bit_aux(two: SnapChallengeSubset) -> np.ndarray:
    """Where each challenge's random bits are, as the recording of the SnapDeals header saw them."""
    return _recorded(two).random_bit_aux  # type: ignore[return-value]


def _snap_first_challenge(two: SnapChallengeSubset, recorded: R1csMatrices) -> R1csMatrices:
    """The header + challenge 0 recording, cut from the two-challenge one where challenge 0 ended."""
    header, first, second = _recorded(two).ends
    sizes = [tuple(b - a for a, b in zip(start, end, strict=True)) for start, end in ((header, first), (first, second))]
    if sizes[0] != sizes[1]:
        raise BlockStructureError(f"SnapDeals challenges 0 and 1 differ in (rows, inputs, aux): {sizes[0]} and "
                                  f"{sizes[1]}")
    return first_block_of(recorded, *first)


def block_header_rows(circuit_id: str) -> int:
    """An upper bound of the header rows of a published Filecoin circuit id compiled block by block,
    where the header is not small against a block (SnapDeals: the apex tree, the partition path and
    the digests; 319,169 rows at 2KiB, ~5.9M from 8MiB on); 0 for the others, whose header rows the
    build memory estimate's per-block share covers (`engine.compiled_store.build_memory_estimate`)."""
    try:
        kind, size = parse_circuit_id(circuit_id)
    except CuzkError:
        return 0
    if kind is not CircuitKind.SNAP:
        return 0
    config = EmptySectorUpdateConfig.for_sector_size(size.sector_bytes)
    return ((config.apex_leaf_count - 1 + config.partition_bit_len) * _SHA256_NODE_ROWS
            + config.digests_per_partition * _DIGEST_ROWS + _SNAP_HEADER_OTHER_ROWS)


def block_count(circuit_id: str) -> int | None:
    """Blocks of a published Filecoin circuit id (what `block_versions` of its blank circuit says),
    without building the circuit; None for ids that are not Filecoin circuits."""
    try:
        kind, size = parse_circuit_id(circuit_id)
    except CuzkError:
        return None
    if kind is CircuitKind.POREP:
        return StackedConfig.production(size.sector_bytes).challenges
    if kind is CircuitKind.WINNING:
        return FallbackPoStConfig.winning(size.sector_bytes).sector_count
    if kind is CircuitKind.WINDOW:
        return FallbackPoStConfig.window(size.sector_bytes).sector_count
    if kind is CircuitKind.SNAP:
        return EmptySectorUpdateConfig.for_sector_size(size.sector_bytes).challenge_count
    return None
