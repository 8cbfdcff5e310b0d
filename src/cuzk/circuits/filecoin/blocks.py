"""Which Filecoin circuits are a header followed by identical blocks, and their small versions.

`cuzk.r1cs.blocks.compile_blocks` compiles an N-block circuit from recordings of its one- and
two-block versions; this module knows how to make them:

- PoRep (`StackedCircuit`): the header is replica_id / comm_d / comm_r and comm_r's Poseidon; a
  block is one challenge (`StackedConfig.challenges`), 18 inputs and ~7.2M rows at 32GiB.
- PoSt (`FallbackPoStCircuit`): no header beyond ONE; a block is one sector
  (`FallbackPoStConfig.sector_count`): 66 for WinningPoSt, 2349 for a 32GiB WindowPoSt partition.

SnapDeals is not block-shaped: its header derives the challenges' random bits from
ceil(challenges / per digest) digests, with that count as a coefficient, so a one- or two-challenge
circuit has another header than the real one; it is compiled by recording it whole.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cuzk.circuits.filecoin.porep import StackedCircuit, StackedConfig
from cuzk.circuits.filecoin.post import FallbackPoStCircuit, FallbackPoStConfig
from cuzk.errors import CuzkError
from cuzk.filecoin.sizes import CircuitKind, parse_circuit_id
from cuzk.r1cs import Circuit

__all__ = ["BlockVersions", "block_count", "block_versions"]


@dataclass(frozen=True)
class BlockVersions:
    """The blank one- and two-block circuits of a circuit made of `blocks` identical blocks."""

    one: Circuit
    two: Circuit
    blocks: int
    what: str  #: what a block is ("challenge", "sector"), for messages


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
    return None


def block_count(circuit_id: str) -> int | None:
    """Blocks of a published Filecoin circuit id (what `block_versions` of its blank circuit says),
    without building the circuit; None for SnapDeals and for ids that are not Filecoin circuits."""
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
    return None
