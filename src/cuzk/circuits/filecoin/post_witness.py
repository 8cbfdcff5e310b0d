"""A Fallback PoSt partition's witness (WinningPoSt and WindowPoSt) from the batched generators.

`synthesize_witness(FallbackPoStCircuit)` walks every sector and challenge through the gadgets one
`alloc` at a time. The layout is regular (post.py's module doc), so the same values come from three
batched calls over the whole partition, written at fixed offsets:

    inputs: ONE, then per sector: comm_r, the leaf index of each challenge (its packed path bits)
    aux, per sector (sector_count rows of equal length):
        comm_r_last, comm_c, comm_r                         the three commitments
        Poseidon2_MerkleTree(comm_c, comm_r_last)           one `poseidon_witness` over all sectors
        per challenge: leaf, bits, siblings, insertion, hashes per level
                                                            one `merkle_path_witness` (LEAF_FIRST)
                                                            over all sectors x challenges

The rows `comm_r == computed` and `computed root == comm_r_last` allocate nothing, so they add no
aux; like WitnessCS, the generator does not check them (the compiled row check does).

With a `DeferredWitness` the openings (99% of the aux) are recorded there instead of generated: the
host writes the commitments and comm_r hashes only, and the prover's device writes the paths.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from cuzk.field.limbs import ints_to_limbs, limb_rows_out
from cuzk.hashes.poseidon_constants import merkle_tree_tag, poseidon_constants
from cuzk.witness_gen.deferred import DeferredWitness
from cuzk.witness_gen.merkle import PathLayout, merkle_path_witness, path_arrays, path_aux_count
from cuzk.witness_gen.poseidon import poseidon_aux_count, poseidon_witness
from cuzk.witness_gen.values import field_limbs, required_value

if TYPE_CHECKING:
    from cuzk.circuits.filecoin.post import FallbackPoStCircuit

__all__ = ["post_aux_per_sector", "post_witness", "post_witness_shape"]


def post_aux_per_sector(circuit: FallbackPoStCircuit) -> int:
    """Aux values one sector of this circuit allocates."""
    config = circuit.config
    return (3 + poseidon_aux_count(poseidon_constants(2))
            + config.challenge_count * path_aux_count(config.tree_r, PathLayout.LEAF_FIRST))


def post_witness_shape(circuit: FallbackPoStCircuit) -> tuple[int, int]:
    """(num_inputs, num_aux) of `post_witness`, from the configuration alone."""
    config = circuit.config
    return 1 + config.sector_count * config.inputs_per_sector, config.sector_count * post_aux_per_sector(circuit)


def post_witness(circuit: FallbackPoStCircuit, *, out: np.ndarray | None = None,
                 deferred: DeferredWitness | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, aux) canonical limb arrays, equal to `synthesize_witness(circuit)`'s input and aux
    assignments. Refuses what `synthesize` refuses (ValueError for a wrong layout) and, as
    WitnessCS does, a missing value (SynthesisError naming it). `out`, if given, is a C-contiguous
    (num_aux, 4) uint64 array (`post_witness_shape`) to fill and return as aux. `deferred`, if given,
    receives the challenge openings, whose aux rows are left unwritten (`cuzk.witness_gen.deferred`)."""
    config = circuit.config
    sectors, challenges, tree_r = config.sector_count, config.challenge_count, config.tree_r
    if circuit.openings is not None:  # decoded arrays: canonical and laid out already (post_arrays)
        o = circuit.check_openings()
        commitments = np.stack([o.comm_r_last, o.comm_c, o.comm_r], axis=1).astype(np.uint64)
        leaves = np.ascontiguousarray(o.leaves.reshape(-1, 4), dtype=np.uint64)
        indices = o.leaf_indices().reshape(-1)
        siblings = np.ascontiguousarray(o.siblings.reshape(sectors * challenges, -1, 4), dtype=np.uint64)
    else:
        if len(circuit.sectors) != config.sector_count:
            raise ValueError(f"the circuit has {config.sector_count} sectors, got {len(circuit.sectors)}")
        for sector in circuit.sectors:
            sector.check_layout(config)
        commitments = ints_to_limbs([value for i, s in enumerate(circuit.sectors)
                                     for value in (required_value(s.comm_r_last, f"sector {i} comm_r_last"),
                                                   required_value(s.comm_c, f"sector {i} comm_c"),
                                                   required_value(s.comm_r, f"sector {i} comm_r"))]
                                    ).reshape(sectors, 3, 4)
        leaves = field_limbs([leaf for s in circuit.sectors for leaf in s.leaves], "challenged leaves")
        indices, siblings = path_arrays(tree_r, [p for s in circuit.sectors for p in s.paths],
                                        "challenge path {}".format)

    hash_rows = poseidon_aux_count(poseidon_constants(2))
    flat = limb_rows_out(out, post_witness_shape(circuit)[1])
    aux = flat.reshape(sectors, post_aux_per_sector(circuit), 4)
    aux[:, :3] = commitments
    comm_r_hash = poseidon_witness(np.ascontiguousarray(commitments[:, [1, 0]]), poseidon_constants(2),
                                   merkle_tree_tag(2))
    aux[:, 3:3 + hash_rows] = comm_r_hash.aux
    if deferred is None:
        openings = merkle_path_witness(tree_r, PathLayout.LEAF_FIRST, leaves, indices, siblings)
        aux[:, 3 + hash_rows:] = openings.aux.reshape(sectors, -1, 4)
    else:  # path n = sector * challenges + challenge starts after its sector's header and earlier paths
        path_aux = path_aux_count(tree_r, PathLayout.LEAF_FIRST)
        sector_rows = np.arange(sectors, dtype=np.int64)[:, None] * aux.shape[1] + 3 + hash_rows
        rows = (sector_rows + np.arange(challenges, dtype=np.int64)[None, :] * path_aux).reshape(-1)
        deferred.poseidon_paths(tree_r, PathLayout.LEAF_FIRST, leaves, indices, siblings, rows)

    inputs = np.zeros((1 + sectors * config.inputs_per_sector, 4), dtype=np.uint64)
    inputs[0, 0] = 1
    per_sector = inputs[1:].reshape(sectors, config.inputs_per_sector, 4)
    per_sector[:, 0] = commitments[:, 2]
    per_sector[:, 1:, 0] = indices.reshape(sectors, challenges).astype(np.uint64)
    return inputs, flat
