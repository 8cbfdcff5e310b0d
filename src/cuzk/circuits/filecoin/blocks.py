"""Which Filecoin circuits are a header followed by identical blocks, and their block counts.

`cuzk.r1cs.blocks.compile_blocks` compiles an N-block circuit from recordings of its one- and
two-block versions, which each circuit makes (its `block_versions()` method, read by
`cuzk.r1cs.blocks.block_versions`):

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

This module holds what needs no circuit: the block count and a bound of the header rows of a
published circuit id (`block_count`, `block_header_rows`), for the compiled-circuit store's memory
estimate.
"""

from __future__ import annotations

from cuzk.circuits.filecoin.porep_config import StackedConfig
from cuzk.circuits.filecoin.post_config import FallbackPoStConfig
from cuzk.circuits.filecoin.snap_config import EmptySectorUpdateConfig
from cuzk.errors import CuzkError
from cuzk.filecoin.sizes import CircuitKind, parse_circuit_id

__all__ = ["block_count", "block_header_rows"]

#: Rows of one SHA-256 node of tree_d with its insertion (`hash2_circuit`: 45,379; a partition-path
#: level 45,382), rounded up; and of one challenge digest (index, Poseidon_GR, 255 bits).
_SHA256_NODE_ROWS = 45_400
_DIGEST_ROWS = 568
#: The rest of a SnapDeals header: k_and_h_select and its bits, phi, comm_r_old / comm_r_new (1,516 at 2KiB).
_SNAP_HEADER_OTHER_ROWS = 2_000


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
