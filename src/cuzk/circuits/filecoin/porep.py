"""The StackedDRG PoRep "C2" circuit, row for row as storage-proofs-porep's `StackedCircuit`
(docs/circuits.md §6).

Top level: replica_id, comm_d, comm_r are public (each an aux variable made public); replica_id's
bits are computed once and reused by every label; comm_r_last and comm_c stay private and are tied
to comm_r by comm_r = Poseidon2(comm_c, comm_r_last). Then, per challenge:

a. the data leaf, opened in tree_d (binary SHA-256) against comm_d;
b. the columns of the 6 DRG and 8 expander parents, each hashed (Poseidon of arity L) and opened in
   tree_c against comm_c;
c. the challenge as 64 allocated bits, packed into a public input;
d. per layer, the label recomputed from the parents' labels: SHA-256 over replica_id, the layer,
   the challenge, 160 zero bits and 37 parent labels (DRG parents of this layer, expander parents
   of the previous one), fr32-truncated;
e. the replica node label_L + data_leaf, opened in tree_r_last against comm_r_last;
f. the challenged node's own column (its computed labels), hashed and opened in tree_c.

Every opening contributes one public input (the opened index), hence 3 + 18·C inputs after ONE.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from cuzk.filecoin.sizes import ALL_SIZES
from cuzk.gadgets.boolean import FALSE, Boolean, reverse_bit_numbering, u64_into_boolean_vec_le
from cuzk.gadgets.multipack import pack_into_inputs
from cuzk.gadgets.num import AllocatedNum, add, equal
from cuzk.gadgets.por import POSEIDON, PathLevel, TreeShape, enforce_inclusion, node_hash_circuit
from cuzk.gadgets.sha256 import hash_circuit
from cuzk.gadgets.uint32 import UInt32
from cuzk.r1cs import ConstraintSystem
from cuzk.witness_gen.deferred import DeferredWitness

__all__ = [
    "BASE_DEGREE",
    "EXP_DEGREE",
    "PRODUCTION_CONFIGS",
    "TOTAL_PARENTS",
    "ChallengeProof",
    "ColumnOpening",
    "StackedCircuit",
    "StackedConfig",
    "porep_public_inputs",
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


@dataclass
class StackedCircuit:
    """One partition's PoRep circuit. All values None (see `blank`) gives the key-generation circuit."""

    config: StackedConfig
    replica_id: int | None
    comm_d: int | None
    comm_r: int | None
    comm_r_last: int | None
    comm_c: int | None
    proofs: Sequence[ChallengeProof] = field(default_factory=list)
    #: `witness_arrays` can leave its SHA-256 gadgets' aux to a device (`generated_witness`'s `deferred`).
    DEFERS_WITNESS: ClassVar[bool] = True

    @classmethod
    def blank(cls, config: StackedConfig) -> StackedCircuit:
        proofs = [ChallengeProof.blank(config) for _ in range(config.challenges)]
        return cls(config, None, None, None, None, None, proofs)

    def witness_arrays(self, out: np.ndarray | None = None,
                       deferred: DeferredWitness | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(inputs, aux) as canonical (n, 4) uint64 limbs, equal to what `synthesize` allocates under
        `WitnessCS` (ONE first), from the batched witness generators: no constraint system. `out`: a
        (num_aux, 4) uint64 array (`witness_shape`) filled and returned as aux. `deferred`: receives
        the SHA-256 gadgets instead of their aux bits (`cuzk.witness_gen.deferred`). A blank circuit
        raises SynthesisError naming the first missing value."""
        from cuzk.circuits.filecoin.porep_witness import porep_witness

        return porep_witness(self, out=out, deferred=deferred)

    def witness_shape(self) -> tuple[int, int]:
        """(num_inputs, num_aux) of `witness_arrays`, from the configuration alone."""
        from cuzk.circuits.filecoin.porep_witness import PorepLayout

        layout = PorepLayout.of(self.config)
        return layout.num_inputs, layout.num_aux

    def synthesize(self, cs: ConstraintSystem) -> None:
        config = self.config
        if len(self.proofs) != config.challenges:
            raise ValueError(f"the circuit has {config.challenges} challenges, got {len(self.proofs)} proofs")
        for proof in self.proofs:
            proof.check_layout(config)

        replica_id = AllocatedNum.alloc(cs, "replica_id", self.replica_id)
        replica_id.inputize(cs, "replica_id_input")
        replica_id_bits = reverse_bit_numbering(replica_id.to_bits_le(cs))
        comm_d = AllocatedNum.alloc(cs, "comm_d", self.comm_d)
        comm_d.inputize(cs, "comm_d_input")
        comm_r = AllocatedNum.alloc(cs, "comm_r", self.comm_r)
        comm_r.inputize(cs, "comm_r_input")
        comm_r_last = AllocatedNum.alloc(cs, "comm_r_last", self.comm_r_last)
        comm_c = AllocatedNum.alloc(cs, "comm_c", self.comm_c)

        computed_comm_r = node_hash_circuit(cs, POSEIDON, [comm_c, comm_r_last])
        equal(cs, comm_r, computed_comm_r, "enforce comm_r = H(comm_c || comm_r_last)")

        for i, proof in enumerate(self.proofs):
            with cs.namespace(f"challenge_{i}"):
                _synthesize_challenge(cs, config, proof, comm_d, comm_c, comm_r_last, replica_id_bits)


def _column_hash(cs: ConstraintSystem, column: Sequence[AllocatedNum]) -> AllocatedNum:
    """`hash_single_column`: Poseidon of arity L, MerkleTree tag (the tree_c leaf)."""
    return node_hash_circuit(cs, POSEIDON, column)


def _synthesize_challenge(cs: ConstraintSystem, config: StackedConfig, proof: ChallengeProof,
                          comm_d: AllocatedNum, comm_c: AllocatedNum, comm_r_last: AllocatedNum,
                          replica_id_bits: Sequence[Boolean]) -> None:
    """`Proof::synthesize` of storage-proofs-porep's circuit/params.rs, steps a-f of the module doc."""
    tree_c = config.tree_c
    data_leaf = AllocatedNum.alloc(cs, "data_leaf", proof.data_leaf)
    enforce_inclusion(cs, config.tree_d, proof.comm_d_path, data_leaf, comm_d)

    columns: list[list[AllocatedNum]] = []
    for opening in [*proof.drg_parents, *proof.exp_parents]:
        column = [AllocatedNum.alloc(cs, "column_num_row", value) for value in opening.values]
        enforce_inclusion(cs, tree_c, opening.path, _column_hash(cs, column), comm_c)
        columns.append(column)
    drg_columns, exp_columns = columns[:BASE_DEGREE], columns[BASE_DEGREE:]

    challenge_bits = u64_into_boolean_vec_le(cs, proof.challenge)
    pack_into_inputs(cs, challenge_bits)
    challenge_bits_be = challenge_bits[::-1]

    labels: list[AllocatedNum] = []
    for layer in range(1, config.layers + 1):
        # DRG parents of this layer, then (from layer 2 on) expander parents of the previous one.
        parents = [reverse_bit_numbering(column[layer - 1].to_bits_le(cs)) for column in drg_columns]
        if layer > 1:
            parents += [reverse_bit_numbering(column[layer - 2].to_bits_le(cs)) for column in exp_columns]
            expanded = parents * 2 + parents[:9]
        else:
            expanded = parents * 6 + parents[:1]
        labels.append(_create_label(cs, replica_id_bits, expanded, layer, challenge_bits_be))

    encoded = add(cs, labels[-1], data_leaf)
    enforce_inclusion(cs, tree_c, proof.comm_r_last_path, encoded, comm_r_last)
    enforce_inclusion(cs, tree_c, proof.comm_c_path, _column_hash(cs, labels), comm_c)


def _create_label(cs: ConstraintSystem, replica_id_bits: Sequence[Boolean], parents: Sequence[Sequence[Boolean]],
                  layer: int, node_bits_be: Sequence[Boolean]) -> AllocatedNum:
    """`create_label_circuit`: SHA-256 of replica_id ‖ layer (u32 BE, constant) ‖ node (u64 BE) ‖
    160 zero bits ‖ 37 parents, in stream order, fr32-truncated and packed."""
    return hash_circuit(cs, label_message(replica_id_bits, parents, layer, node_bits_be))


def label_message(replica_id_bits: Sequence[Boolean], parents: Sequence[Sequence[Boolean]], layer: int,
                  node_bits_be: Sequence[Boolean]) -> list[Boolean]:
    """The label's SHA-256 preimage as `_create_label` hashes it (shared with the witness generator,
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


def porep_public_inputs(replica_id: int, comm_d: int, comm_r: int,
                        challenges: Sequence[tuple[int, Sequence[int], Sequence[int]]]) -> list[int]:
    """`StackedCompound::generate_public_inputs` for one partition (ONE excluded).

    `challenges` holds (challenge, its 6 DRG parents, its 8 expander parents) in order; each gives
    [c, d0..d5, e0..e7, c, c, c]: the tree_d opening of c, the tree_c openings of the parents, the
    challenge itself, the tree_r_last and the tree_c openings of c. Valid for every production
    shape because the concatenated path bits of an opening are the leaf index.
    """
    inputs = [replica_id, comm_d, comm_r]
    for challenge, drg, exp in challenges:
        if len(drg) != BASE_DEGREE or len(exp) != EXP_DEGREE:
            raise ValueError(f"challenge {challenge}: expected {BASE_DEGREE} DRG and {EXP_DEGREE} expander "
                             f"parents, got {len(drg)} and {len(exp)}")
        inputs += [challenge, *drg, *exp, challenge, challenge, challenge]
    return inputs
