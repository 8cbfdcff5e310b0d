"""The Fallback PoSt circuit (WinningPoSt and WindowPoSt), row for row as storage-proofs-post's
`FallbackPoStCircuit` (docs/circuits.md §9).

One partition proves `sector_count` sectors, each the same sub-circuit, in order:

1. comm_r_last, comm_c and comm_r allocated (private), comm_r made public;
2. comm_r = Poseidon2(comm_c, comm_r_last) (MerkleTree tag), row comm_r·ONE = h;
3. per challenge, a tree_r_last opening with the leaf allocated first, index bits public (one
   input each, equal to the challenged leaf index), root comm_r_last.

Winning and Window PoSt differ only in the counts: WinningPoSt lays its single real sector out as
66 sectors of one challenge each, WindowPoSt proves up to `sector_count` sectors of 10 challenges.
A partition with fewer real sectors repeats the last one, in the witness and in the public inputs.
prover_id is part of Rust's circuit struct but never reaches the R1CS, so it is not modelled.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from cuzk.circuits.filecoin.post_config import (
    NODE_SIZE,
    WINDOW_POST_CHALLENGE_COUNT,
    WINDOW_POST_CONFIGS,
    WINNING_POST_CHALLENGE_COUNT,
    WINNING_POST_CONFIGS,
    WINNING_POST_SECTOR_COUNT,
    FallbackPoStConfig,
    PoStSector,
)
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import limbs_to_int, limbs_to_ints
from cuzk.gadgets.num import AllocatedNum, equal
from cuzk.gadgets.por import POSEIDON, PathLevel, TreeShape, alloc_leaf_and_enforce_inclusion, node_hash_circuit
from cuzk.r1cs import ConstraintSystem
from cuzk.witness_gen.deferred import DeferredWitness

if TYPE_CHECKING:
    from cuzk.filecoin.post_arrays import PoStOpenings
    from cuzk.r1cs.blocks import BlockVersions

__all__ = [
    "NODE_SIZE",
    "WINDOW_POST_CHALLENGE_COUNT",
    "WINDOW_POST_CONFIGS",
    "WINNING_POST_CHALLENGE_COUNT",
    "WINNING_POST_CONFIGS",
    "WINNING_POST_SECTOR_COUNT",
    "FallbackPoStCircuit",
    "FallbackPoStConfig",
    "PoStSector",
    "post_public_inputs",
    "random_post_circuit",
]


@dataclass
class FallbackPoStCircuit:
    """One partition's PoSt circuit. All values None (see `blank`) gives the key-generation circuit.

    `sectors` must already be padded to `config.sector_count` (repeat the last real sector), as
    Rust's `FallbackPoStCompound::circuit` does. `openings`, given instead, holds the same values as
    arrays (decoded vanilla proofs, `cuzk.filecoin.post_arrays`), for the batched generator to read
    without a Python object per value; `sectors` is then built from them only when a constraint system
    needs it.
    """

    config: FallbackPoStConfig
    sectors: Sequence[PoStSector] = field(default_factory=list)
    openings: PoStOpenings | None = None
    #: `witness_arrays` can leave its openings' aux to a device (`generated_witness`'s `deferred`).
    DEFERS_WITNESS: ClassVar[bool] = True

    @classmethod
    def blank(cls, config: FallbackPoStConfig) -> FallbackPoStCircuit:
        return cls(config, [PoStSector.blank(config) for _ in range(config.sector_count)])

    def circuit_sectors(self) -> Sequence[PoStSector]:
        """`sectors`, or the `PoStSector`s of `openings`."""
        if self.openings is None:
            return self.sectors
        o = self.openings
        return [PoStSector(limbs_to_int(o.comm_r[i]), limbs_to_int(o.comm_c[i]), limbs_to_int(o.comm_r_last[i]),
                           limbs_to_ints(o.leaves[i]),
                           [_path_levels(self.config, o.siblings[i, n], o.positions[i, n])
                            for n in range(o.challenges)])
                for i in range(o.count)]

    def check_openings(self) -> PoStOpenings:
        """`openings`, refused (ValueError) unless laid out as this circuit's sectors."""
        config, o = self.config, self.openings
        assert o is not None
        if o.count != config.sector_count or o.challenges != config.challenge_count or \
                tuple(o.layout.arities) != tuple(config.tree_r.arities):
            raise ValueError(f"the circuit has {config.sector_count} sectors of {config.challenge_count} openings of "
                             f"arities {config.tree_r.arities}, got {o.count} of {o.challenges} of {o.layout.arities}")
        return o

    def synthesize(self, cs: ConstraintSystem) -> None:
        config = self.config
        if self.openings is not None:
            self.check_openings()
        sectors = self.circuit_sectors()
        if len(sectors) != config.sector_count:
            raise ValueError(f"the circuit has {config.sector_count} sectors, got {len(sectors)}")
        for sector in sectors:
            sector.check_layout(config)
        tree_r = config.tree_r
        for i, sector in enumerate(sectors):
            with cs.namespace(f"sector_{i}"):
                _synthesize_sector(cs, tree_r, sector)

    def witness_arrays(self, out: np.ndarray | None = None,
                       deferred: DeferredWitness | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(inputs, aux) as canonical limbs, equal to what `synthesize` allocates under WitnessCS,
        from the batched generators (`post_witness`; `out`: the aux array to fill; `deferred`:
        receives the challenge openings instead of their aux); SynthesisError naming a missing value."""
        from cuzk.circuits.filecoin.post_witness import post_witness

        return post_witness(self, out=out, deferred=deferred)

    def witness_shape(self) -> tuple[int, int]:
        """(num_inputs, num_aux) of `witness_arrays`, from the configuration alone."""
        from cuzk.circuits.filecoin.post_witness import post_witness_shape

        return post_witness_shape(self)

    def block_versions(self) -> BlockVersions:
        """The blank one- and two-sector circuits block compilation records (`cuzk.r1cs.blocks`): no
        header beyond ONE, a block one sector."""
        from cuzk.r1cs.blocks import BlockVersions

        config = self.config
        return BlockVersions(FallbackPoStCircuit.blank(replace(config, sector_count=1)),
                             FallbackPoStCircuit.blank(replace(config, sector_count=2)), config.sector_count,
                             "sector")


def _path_levels(config: FallbackPoStConfig, siblings: np.ndarray, positions: np.ndarray) -> list[PathLevel]:
    out, at = [], 0
    for arity, position in zip(config.tree_r.arities, positions, strict=True):
        out.append(PathLevel(limbs_to_ints(siblings[at:at + arity - 1]), int(position)))
        at += arity - 1
    return out


def _synthesize_sector(cs: ConstraintSystem, tree_r: TreeShape, sector: PoStSector) -> None:
    """Rust's `Sector::synthesize`: steps 1-3 of the module doc."""
    comm_r_last = AllocatedNum.alloc(cs, "comm_r_last", sector.comm_r_last)
    comm_c = AllocatedNum.alloc(cs, "comm_c", sector.comm_c)
    comm_r = AllocatedNum.alloc(cs, "comm_r", sector.comm_r)
    comm_r.inputize(cs, "comm_r_input")

    computed_comm_r = node_hash_circuit(cs, POSEIDON, [comm_c, comm_r_last])
    equal(cs, comm_r, computed_comm_r, "enforce_comm_c_comm_r_last_hash_comm_r")

    for i, (leaf, path) in enumerate(zip(sector.leaves, sector.paths, strict=True)):
        with cs.namespace(f"challenge_inclusion_{i}"):
            alloc_leaf_and_enforce_inclusion(cs, tree_r, path, leaf, comm_r_last)


def post_public_inputs(sectors: Sequence[tuple[int, Sequence[int]]], sector_count: int, k: int = 0) -> list[int]:
    """`FallbackPoStCompound::generate_public_inputs` for partition `k` (ONE excluded).

    `sectors` holds, for every public sector in order, (comm_r, its leaf challenge indices), the
    challenges already derived (docs/circuits.md §9: they depend on the API version and on the sector's position,
    which only the caller knows). Partition k proves chunk k of `sector_count` sectors; each gives
    [comm_r, c_0, ..., c_{n-1}] (a leaf index is what the packed path bits of its opening equal),
    and a short last chunk repeats its last sector's group until the chunk is full.
    """
    if sector_count < 1:
        raise ValueError("sector_count must be at least 1")
    chunk = list(sectors[k * sector_count:(k + 1) * sector_count]) if k >= 0 else []
    if not chunk:
        raise ValueError(f"partition {k} is empty: {len(sectors)} sectors, {sector_count} per partition")
    per_sector = 1 + len(chunk[0][1])
    inputs: list[int] = []
    for comm_r, challenges in chunk:
        if 1 + len(challenges) != per_sector:
            raise ValueError(f"sectors must all have {per_sector - 1} challenges, got {len(challenges)}")
        inputs.append(comm_r)
        inputs.extend(challenges)
    last = inputs[-per_sector:]
    while len(inputs) < per_sector * sector_count:
        inputs.extend(last)
    return inputs


def random_post_circuit(config: FallbackPoStConfig, seed: int = 0) -> FallbackPoStCircuit:
    """A circuit of `config`'s layout with random well-formed values, every sector its own
    commitments, leaves and paths (canonical field elements, valid positions). Not consistent
    (paths do not reach comm_r_last, comm_r is not their hash): what a witness needs, as `WitnessCS`
    needs no more; proving it would fail the row check. For equality tests and benchmarks at sizes
    whose trees are too large to build."""
    rng = random.Random(seed)

    def fr() -> int:
        return rng.randrange(R_MODULUS)

    sectors = [PoStSector(fr(), fr(), fr(), [fr() for _ in range(config.challenge_count)],
                          [[PathLevel([fr() for _ in range(arity - 1)], rng.randrange(arity))
                            for arity in config.tree_r.arities] for _ in range(config.challenge_count)])
               for _ in range(config.sector_count)]
    return FallbackPoStCircuit(config, sectors)
