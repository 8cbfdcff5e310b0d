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

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from cuzk.circuits.filecoin.porep_config import (
    BASE_DEGREE,
    EXP_DEGREE,
    PRODUCTION_CONFIGS,
    TOTAL_PARENTS,
    ChallengeProof,
    ColumnOpening,
    StackedConfig,
    label_message,
)
from cuzk.field.constants import R_MODULUS
from cuzk.gadgets.boolean import Boolean, reverse_bit_numbering, u64_into_boolean_vec_le
from cuzk.gadgets.multipack import pack_into_inputs
from cuzk.gadgets.num import AllocatedNum, add, equal
from cuzk.gadgets.por import POSEIDON, PathLevel, TreeShape, enforce_inclusion, node_hash_circuit
from cuzk.gadgets.sha256 import hash_circuit
from cuzk.r1cs import ConstraintSystem
from cuzk.witness_gen.deferred import DeferredWitness

if TYPE_CHECKING:
    from cuzk.r1cs.blocks import BlockVersions

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
    "random_stacked_circuit",
]


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

    def block_versions(self) -> BlockVersions:
        """The blank one- and two-challenge circuits block compilation records (`cuzk.r1cs.blocks`):
        the header is replica_id / comm_d / comm_r and comm_r's Poseidon, a block one challenge."""
        from cuzk.r1cs.blocks import BlockVersions

        config = self.config
        return BlockVersions(StackedCircuit.blank(replace(config, challenges=1)),
                             StackedCircuit.blank(replace(config, challenges=2)), config.challenges, "challenge")

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


def random_stacked_circuit(config: StackedConfig, seed: int = 0) -> StackedCircuit:
    """A circuit of `config`'s layout filled with random well-formed values: canonical field
    elements, valid path positions, challenges below the node count. Not a consistent sector (paths
    do not reach the commitments, labels do not match the columns): what a witness needs, as
    `WitnessCS` needs no more; proving it would fail the row check. For equality tests and
    benchmarks at sector sizes too large to build (32GiB)."""
    rng = random.Random(seed)

    def fr() -> int:
        return rng.randrange(R_MODULUS)

    def path(shape: TreeShape) -> list[PathLevel]:
        return [PathLevel([fr() for _ in range(arity - 1)], rng.randrange(arity)) for arity in shape.arities]

    def opening() -> ColumnOpening:
        return ColumnOpening([fr() for _ in range(config.layers)], path(config.tree_c))

    proofs = [ChallengeProof(rng.randrange(config.nodes), fr(), path(config.tree_d),
                             [opening() for _ in range(BASE_DEGREE)], [opening() for _ in range(EXP_DEGREE)],
                             path(config.tree_c), path(config.tree_c))
              for _ in range(config.challenges)]
    return StackedCircuit(config, fr(), fr(), fr(), fr(), fr(), proofs)
