"""The PoRep circuit's configuration and witness types (`StackedConfig`, `ChallengeProof`,
`ColumnOpening`) and the label preimage layout (`label_message`), shared by the circuit
(`porep.py`) and its batched witness generator (`porep_witness.py`), which both build on this
module. `porep.py` re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cuzk.filecoin.sizes import ALL_SIZES
from cuzk.gadgets.boolean import FALSE, Boolean
from cuzk.gadgets.por import POSEIDON, PathLevel, TreeShape
from cuzk.gadgets.uint32 import UInt32

__all__ = [
    "BASE_DEGREE",
    "EXP_DEGREE",
    "PRODUCTION_CONFIGS",
    "TOTAL_PARENTS",
    "ChallengeProof",
    "ColumnOpening",
    "StackedConfig",
    "label_message",
]

BASE_DEGREE = 6  #: DRG parents per node
EXP_DEGREE = 8  #: expander parents per node
TOTAL_PARENTS = 37  #: parent labels hashed into each label
#: Column hash arities rust-fil-proofs implements (`hash_single_column`): the layer counts in use.
_COLUMN_ARITIES = (2, 11)
#: Bits of a label preimage: replica_id, layer ‖ node ‖ zeros, then 37 parents, 256 bits each.
_LABEL_MESSAGE_BITS = (2 + TOTAL_PARENTS) * 256


@dataclass(frozen=True)
class StackedConfig:
    """What decides the circuit's layout: sector nodes, SDR layers, challenges per partition and the
    tree_c / tree_r_last shape (Poseidon base arity, sub and top arities; 0 = no such level).

    tree_d is always a binary SHA-256 tree over the same nodes.
    """

    nodes: int
    layers: int
    challenges: int
    base_arity: int = 8
    sub_arity: int = 0
    top_arity: int = 0

    def __post_init__(self) -> None:
        if self.layers not in _COLUMN_ARITIES:
            raise ValueError(f"rust-fil-proofs hashes columns of {_COLUMN_ARITIES} layers only, got {self.layers}")
        if self.challenges < 1:
            raise ValueError("a PoRep circuit needs at least one challenge")
        # Constructing the shapes validates nodes against the arities.
        _ = self.tree_d, self.tree_c

    @property
    def tree_d(self) -> TreeShape:
        return TreeShape.binary_sha256(self.nodes)

    @property
    def tree_c(self) -> TreeShape:
        """Shape of tree_c and of tree_r_last (they are the same)."""
        return TreeShape(self.nodes, self.base_arity, self.sub_arity, self.top_arity, POSEIDON)

    @property
    def num_public_inputs(self) -> int:
        """Public inputs after ONE: replica_id, comm_d, comm_r, then 18 per challenge."""
        return 3 + (4 + BASE_DEGREE + EXP_DEGREE) * self.challenges

    @classmethod
    def production(cls, sector_size: int) -> StackedConfig:
        """The published configuration of a sector size in bytes (one partition's circuit)."""
        try:
            return PRODUCTION_CONFIGS[sector_size]
        except KeyError:
            sizes = ", ".join(str(s) for s in PRODUCTION_CONFIGS)
            raise ValueError(f"no published PoRep circuit for sector size {sector_size} (known: {sizes})") from None


#: Sector size in bytes → circuit configuration, from the published size table (docs/circuits.md §2).
PRODUCTION_CONFIGS: dict[int, StackedConfig] = {
    p.sector_bytes: StackedConfig(p.nodes, p.layers, p.porep_challenges, p.tree_shape.base, p.tree_shape.sub,
                                  p.tree_shape.top)
    for p in ALL_SIZES
}


@dataclass
class ColumnOpening:
    """A parent's column (its L labels, layer 1 first) and the tree_c path of its column hash."""

    values: Sequence[int | None]
    path: Sequence[PathLevel]

    @classmethod
    def blank(cls, config: StackedConfig) -> ColumnOpening:
        return cls([None] * config.layers, config.tree_c.blank_path())


@dataclass
class ChallengeProof:
    """The witness of one challenge (the vanilla `Proof` as the circuit sees it, docs/circuits.md §6)."""

    challenge: int | None
    data_leaf: int | None
    comm_d_path: Sequence[PathLevel]
    drg_parents: Sequence[ColumnOpening]
    exp_parents: Sequence[ColumnOpening]
    comm_r_last_path: Sequence[PathLevel]
    comm_c_path: Sequence[PathLevel]

    @classmethod
    def blank(cls, config: StackedConfig) -> ChallengeProof:
        return cls(
            challenge=None,
            data_leaf=None,
            comm_d_path=config.tree_d.blank_path(),
            drg_parents=[ColumnOpening.blank(config) for _ in range(BASE_DEGREE)],
            exp_parents=[ColumnOpening.blank(config) for _ in range(EXP_DEGREE)],
            comm_r_last_path=config.tree_c.blank_path(),
            comm_c_path=config.tree_c.blank_path(),
        )

    def check_layout(self, config: StackedConfig) -> None:
        """Refuse witnesses whose sizes would change the rows (wrong parent, layer or level counts)."""
        if len(self.drg_parents) != BASE_DEGREE or len(self.exp_parents) != EXP_DEGREE:
            raise ValueError(f"a challenge needs {BASE_DEGREE} DRG and {EXP_DEGREE} expander parent columns, "
                             f"got {len(self.drg_parents)} and {len(self.exp_parents)}")
        config.tree_d.check_path(self.comm_d_path, "comm_d path")
        config.tree_c.check_path(self.comm_r_last_path, "comm_r_last path")
        config.tree_c.check_path(self.comm_c_path, "comm_c path")
        for i, opening in enumerate([*self.drg_parents, *self.exp_parents]):
            if len(opening.values) != config.layers:
                raise ValueError(f"parent column {i} has {len(opening.values)} rows, expected {config.layers}")
            config.tree_c.check_path(opening.path, f"parent {i} path")


def label_message(replica_id_bits: Sequence[Boolean], parents: Sequence[Sequence[Boolean]], layer: int,
                  node_bits_be: Sequence[Boolean]) -> list[Boolean]:
    """The label's SHA-256 preimage as `porep._create_label` hashes it (shared with the witness generator,
    which derives its constant-bit pattern from this very message)."""
    if len(parents) != TOTAL_PARENTS:
        raise ValueError(f"a label hashes {TOTAL_PARENTS} parents, got {len(parents)}")
    message = list(replica_id_bits)
    message += UInt32.constant(layer).into_bits_be()
    message += node_bits_be
    message += [FALSE] * (512 - len(message))
    for parent in parents:
        message += parent
    if len(message) != _LABEL_MESSAGE_BITS:
        raise ValueError(f"label preimage has {len(message)} bits, expected {_LABEL_MESSAGE_BITS}")
    return message
