"""A PoRep partition's whole witness from the batched generators, without a constraint system.

`StackedCircuit.synthesize` run under `WitnessCS` allocates ~7M aux values per challenge (a 32GiB
partition: ~130M), one Python `alloc` call each. Here the same values come from
`cuzk.witness_gen`'s generators, each called once per step for all challenges of the partition,
written into a preallocated aux vector whose per-challenge part is a (challenges, per_challenge, 4)
view: every challenge allocates the same number of aux in the same order (`PorepLayout`).

The aux vector, as `StackedCircuit.synthesize` allocates it:

* header: replica_id, its 255 LE bits, comm_d, comm_r, comm_r_last, comm_c, then the Poseidon
  (arity 2) of comm_r = H(comm_c, comm_r_last);
* per challenge, in order (`_synthesize_challenge`): the data leaf and its tree_d path; per parent
  (6 DRG, 8 expander) its L column values, their column hash (Poseidon of arity L) and its tree_c
  path; the challenge's 64 bits; per layer the parents' 255 LE bits (DRG columns at this layer,
  then expander columns at the previous one) and the label's SHA-256 aux plus its packed digest;
  label_L + data_leaf; the tree_r_last path of that; the labels' column hash and its tree_c path.

Inputs: ONE, replica_id, comm_d, comm_r, then per challenge the 18 packed indices (tree_d opening,
14 parent openings, the challenge, the tree_r_last and tree_c openings of the challenge).

Like `WitnessCS`, this takes the circuit's values as they are: nothing checks that paths reach
their roots or that the labels match the columns; a consistent sector is not needed (the compiled
circuit's row check is where an inconsistent witness shows up).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

from cuzk.circuits.filecoin.porep_config import (
    BASE_DEGREE,
    EXP_DEGREE,
    TOTAL_PARENTS,
    ChallengeProof,
    ColumnOpening,
    StackedConfig,
    label_message,
)
from cuzk.errors import SynthesisError
from cuzk.field.constants import FR_BITS, R_MODULUS
from cuzk.field.limbs import ints_to_limbs, limb_rows_out
from cuzk.gadgets.boolean import IS_KIND, AllocatedBit, Boolean, reverse_bit_numbering
from cuzk.hashes.poseidon_constants import merkle_tree_tag, poseidon_constants
from cuzk.r1cs.variable import Variable
from cuzk.witness_gen.bits import spread_bits
from cuzk.witness_gen.deferred import DeferredWitness
from cuzk.witness_gen.merkle import PathLayout, merkle_path_witness, path_arrays, path_aux_count
from cuzk.witness_gen.poseidon import poseidon_aux_count, poseidon_witness
from cuzk.witness_gen.sha256 import Sha256WitnessPlan
from cuzk.witness_gen.values import required_value, required_values

if TYPE_CHECKING:
    from cuzk.circuits.filecoin.porep import StackedCircuit

__all__ = ["GADGET_KINDS", "PorepLayout", "porep_witness"]

_PARENTS = BASE_DEGREE + EXP_DEGREE
#: Where the node (challenge) bits start in a label message: after replica_id (256) and the layer (32).
_NODE_BITS = 288
#: The step names `porep_witness` times (its `timings` argument), one per gadget kind.
GADGET_KINDS = ("inputs", "poseidon", "merkle_poseidon", "merkle_sha256", "bits", "sha256_label", "assemble")


# -- the layout -----------------------------------------------------------------------------------

@cache
def label_plan(layer: int) -> Sha256WitnessPlan:
    """The SHA-256 plan of layer `layer`'s label: its constants (the layer index, zero padding, each
    parent's fr32 pad bit) read off the message `label_message` builds around allocated bits."""
    def allocated(count: int) -> list[Boolean]:
        return [Boolean(IS_KIND, AllocatedBit(Variable.aux(0), None)) for _ in range(count)]

    def fr_stream() -> list[Boolean]:
        return reverse_bit_numbering(allocated(FR_BITS))

    message = label_message(fr_stream(), [fr_stream() for _ in range(TOTAL_PARENTS)], layer, allocated(64))
    plan = Sha256WitnessPlan.for_booleans(message)
    # `porep_witness` writes the allocated bits at these places: replica_id, the node, the parents.
    allocated_at = set(plan.allocated_positions.tolist())
    if not allocated_at <= set(range(256)) | set(range(_NODE_BITS, _NODE_BITS + 64)) | set(range(512, len(message))):
        raise RuntimeError(f"layer {layer}'s label message allocates bits outside replica_id, node and parents")
    return plan


def _layer_parents(layer: int) -> int:
    """Parent columns decomposed at `layer`: the DRG ones, and from layer 2 the expander ones."""
    return BASE_DEGREE if layer == 1 else _PARENTS


def _expanded(layer: int) -> list[int]:
    """Which decomposed parent fills each of the 37 label slots (`_synthesize_challenge`)."""
    parents = list(range(_layer_parents(layer)))
    return parents * 6 + parents[:1] if layer == 1 else parents * 2 + parents[:9]


@dataclass(frozen=True)
class PorepLayout:
    """Aux offsets of one partition's circuit (relative to a challenge's first aux where per challenge)."""

    config: StackedConfig
    header: int  #: aux before the first challenge
    tree_d_path: int  #: offset of the tree_d path (the data leaf is at 0)
    parents: int  #: offset of the first parent's column
    parent_stride: int  #: aux per parent: L values, the column hash, the tree_c path
    challenge_bits: int
    layers: tuple[int, ...]  #: offset of each layer's parent bits (the label's SHA-256 aux follow them)
    encoded: int  #: label_L + data_leaf
    r_last_path: int
    column_hash: int  #: the labels' column hash (its tree_c path follows)
    per_challenge: int

    @classmethod
    @cache
    def of(cls, config: StackedConfig) -> PorepLayout:
        layers = config.layers
        column_hash = poseidon_aux_count(poseidon_constants(layers))
        tree_c_path = path_aux_count(config.tree_c, PathLayout.INCLUSION)
        parent_stride = layers + column_hash + tree_c_path
        offset = 1 + path_aux_count(config.tree_d, PathLayout.INCLUSION)
        parents = offset
        offset += _PARENTS * parent_stride
        challenge_bits = offset
        offset += 64
        layer_offsets = []
        for layer in range(1, layers + 1):
            layer_offsets.append(offset)
            offset += _layer_parents(layer) * FR_BITS + label_plan(layer).num_aux + 1
        encoded = offset
        r_last_path = encoded + 1
        column = r_last_path + tree_c_path
        per_challenge = column + column_hash + tree_c_path
        header = 1 + FR_BITS + 4 + poseidon_aux_count(poseidon_constants(2))
        return cls(config, header, 1, parents, parent_stride, challenge_bits, tuple(layer_offsets), encoded,
                   r_last_path, column, per_challenge)

    @property
    def num_aux(self) -> int:
        return self.header + self.config.challenges * self.per_challenge

    @property
    def num_inputs(self) -> int:
        return 1 + self.config.num_public_inputs


# -- reading the circuit's values -----------------------------------------------------------------

def _columns(openings: Sequence[tuple[ColumnOpening, str]]) -> np.ndarray:
    return ints_to_limbs([v for opening, what in openings
                          for v in required_values(opening.values, lambda r, what=what: f"{what} row {r}")]
                         ).reshape(len(openings), -1, 4)


def _challenge(proof: ChallengeProof, what: str) -> int:
    if proof.challenge is None:
        raise SynthesisError(f"{what}: challenge has no value (a blank circuit has no witness)")
    if not isinstance(proof.challenge, int) or not 0 <= proof.challenge < 1 << 64:
        raise SynthesisError(f"{what}: challenge {proof.challenge!r} is not a 64-bit unsigned integer")
    return proof.challenge


# -- numba helpers: bits into limb rows ------------------------------------------------------------

def _le_bits(limbs: np.ndarray) -> np.ndarray:
    """(..., 4) canonical limbs -> (..., 255) uint8: `to_bits_le`'s bits, LSB first."""
    as_bytes = np.ascontiguousarray(limbs).astype("<u8", copy=False).view(np.uint8)
    return np.unpackbits(as_bytes, axis=-1, bitorder="little")[..., :FR_BITS]


def _stream_bits(limbs: np.ndarray) -> np.ndarray:
    """(..., 4) canonical limbs -> (..., 256) uint8: the 32-byte LE encoding in SHA-256 stream order
    (`reverse_bit_numbering(to_bits_le)`, the pad bit being 0 for a canonical value)."""
    as_bytes = np.ascontiguousarray(limbs).astype("<u8", copy=False).view(np.uint8)
    return np.unpackbits(as_bytes, axis=-1)


def _add_mod_r(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, 4) limbs: (a + b) mod r, through Python ints (N is a partition's challenge count)."""
    def ints(x: np.ndarray) -> list[int]:
        raw = np.ascontiguousarray(x).astype("<u8").tobytes()
        return [int.from_bytes(raw[k:k + 32], "little") for k in range(0, len(raw), 32)]

    return ints_to_limbs([(x + y) % R_MODULUS for x, y in zip(ints(a), ints(b), strict=True)])


# -- the witness ----------------------------------------------------------------------------------

def porep_witness(circuit: StackedCircuit, timings: dict[str, float] | None = None, *,
                  out: np.ndarray | None = None,
                  deferred: DeferredWitness | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, aux) of `circuit` as canonical (n, 4) uint64 limbs, element for element what
    `synthesize_witness(circuit)` allocates (ONE first among the inputs).

    `timings`, if given, accumulates seconds per step (`GADGET_KINDS`). `out`, if given, is a
    C-contiguous (`PorepLayout.of(config).num_aux`, 4) uint64 array to fill and return as aux: a
    buffer kept from partition to partition saves the page faults of a fresh 4 GB (32GiB) array.
    `deferred`, if given, receives the SHA-256 gadgets (labels, tree_d nodes: 98% of a 32GiB
    partition's aux) and the Merkle paths over Poseidon (tree_c, tree_r_last) instead of their aux,
    which stay unwritten for a device to fill (`cuzk.witness_gen.deferred`); every other aux is
    written.
    Raises SynthesisError naming the first missing or malformed value (a blank circuit has none),
    ValueError on a wrong layout or `out`.
    """
    clock: Callable[[], float] = time.perf_counter
    spent = timings if timings is not None else {}
    for kind in GADGET_KINDS:
        spent.setdefault(kind, 0.0)
    mark = clock()

    def lap(kind: str) -> None:
        nonlocal mark
        now = clock()
        spent[kind] += now - mark
        mark = now

    config = circuit.config
    if len(circuit.proofs) != config.challenges:
        raise ValueError(f"the circuit has {config.challenges} challenges, got {len(circuit.proofs)} proofs")
    for proof in circuit.proofs:
        proof.check_layout(config)
    layout = PorepLayout.of(config)
    count, layers, tree_c = config.challenges, config.layers, config.tree_c

    # -- the circuit's values as arrays ----------------------------------------------------------
    replica_id = required_value(circuit.replica_id, "replica_id")
    comm_d = required_value(circuit.comm_d, "comm_d")
    comm_r = required_value(circuit.comm_r, "comm_r")
    comm_r_last = required_value(circuit.comm_r_last, "comm_r_last")
    comm_c = required_value(circuit.comm_c, "comm_c")
    names = [f"challenge {i}" for i in range(count)]
    challenges = [_challenge(proof, what) for proof, what in zip(circuit.proofs, names, strict=True)]
    named = list(zip(circuit.proofs, names, strict=True))
    data_leaves = ints_to_limbs([required_value(p.data_leaf, f"{w}: data_leaf") for p, w in named])
    openings = [(opening, f"{w}: {kind} parent {j}") for p, w in named
                for kind, group in (("DRG", p.drg_parents), ("expander", p.exp_parents))
                for j, opening in enumerate(group)]
    columns = _columns(openings).reshape(count, _PARENTS, layers, 4)
    d_indices, d_siblings = path_arrays(config.tree_d, [p.comm_d_path for p in circuit.proofs],
                                        lambda n: f"{names[n]}: comm_d path")
    parent_indices, parent_siblings = path_arrays(tree_c, [o.path for o, _ in openings],
                                                  lambda n: f"{openings[n][1]} path")
    # tree_r_last is tree_c's shape: the challenges' comm_r_last paths, then their comm_c paths.
    tail_indices, tail_siblings = path_arrays(
        tree_c, [p.comm_r_last_path for p in circuit.proofs] + [p.comm_c_path for p in circuit.proofs],
        lambda n: f"{names[n % count]}: {'comm_r_last' if n < count else 'comm_c'} path")

    inputs = ints_to_limbs([1, replica_id, comm_d, comm_r]
                           + [v for i in range(count)
                              for v in (int(d_indices[i]), *parent_indices[i * _PARENTS:(i + 1) * _PARENTS].tolist(),
                                        challenges[i], int(tail_indices[i]), int(tail_indices[count + i]))])
    aux = limb_rows_out(out, layout.num_aux)
    per = aux[layout.header:].reshape(count, layout.per_challenge, 4)
    # Aux row of each challenge's first aux, for the SHA-256 gadgets left to a device.
    challenge_rows = layout.header + np.arange(count, dtype=np.int64) * layout.per_challenge
    lap("inputs")

    # -- header -----------------------------------------------------------------------------------
    head = ints_to_limbs([replica_id, comm_d, comm_r, comm_r_last, comm_c])
    aux[0] = head[0]
    aux[1:1 + FR_BITS] = 0
    aux[1:1 + FR_BITS, 0] = _le_bits(head[0])
    aux[1 + FR_BITS:5 + FR_BITS] = head[1:]
    lap("bits")
    comm_r_hash = poseidon_witness(head[[4, 3]].reshape(1, 2, 4), poseidon_constants(2), merkle_tree_tag(2))
    aux[5 + FR_BITS:layout.header] = comm_r_hash.aux[0]
    lap("poseidon")

    # -- a: data leaf and tree_d path -----------------------------------------------------------------
    per[:, 0] = data_leaves
    merkle_path_witness(config.tree_d, PathLayout.INCLUSION, data_leaves, d_indices, d_siblings,
                        out=per[:, layout.tree_d_path:layout.parents], deferred=deferred,
                        rows=challenge_rows + layout.tree_d_path)
    lap("merkle_sha256")

    # -- b: parent columns, their hashes and tree_c paths ---------------------------------------------
    stride = layout.parent_stride
    parent_view = per[:, layout.parents:layout.parents + _PARENTS * stride].reshape(count, _PARENTS, stride, 4)
    parent_view[:, :, :layers] = columns
    column_rows = poseidon_aux_count(poseidon_constants(layers))
    parent_hashes = poseidon_witness(columns.reshape(count * _PARENTS, layers, 4), poseidon_constants(layers),
                                     merkle_tree_tag(layers))
    parent_view[:, :, layers:layers + column_rows] = parent_hashes.aux.reshape(count, _PARENTS, column_rows, 4)
    lap("poseidon")
    if deferred is None:
        parent_paths = merkle_path_witness(tree_c, PathLayout.INCLUSION, parent_hashes.digests, parent_indices,
                                           parent_siblings)
        parent_view[:, :, layers + column_rows:] = parent_paths.aux.reshape(count, _PARENTS, -1, 4)
    else:  # path (challenge c, parent j) = c * 14 + j, after its column and column hash
        deferred.poseidon_paths(tree_c, PathLayout.INCLUSION, parent_hashes.digests, parent_indices, parent_siblings,
                                (challenge_rows[:, None] + layout.parents + layers + column_rows
                                 + np.arange(_PARENTS, dtype=np.int64)[None, :] * stride).reshape(-1))
    lap("merkle_poseidon")

    # -- c: the challenge's bits ------------------------------------------------------------------------
    challenge_array = np.array(challenges, dtype=np.uint64)
    challenge_le = ((challenge_array[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
    spread_bits(challenge_le, per, layout.challenge_bits)

    # -- d: labels, layer by layer --------------------------------------------------------------------
    column_le = _le_bits(columns)  # (count, 14, L, 255)
    column_stream = _stream_bits(columns)  # (count, 14, L, 256)
    replica_stream = _stream_bits(head[0])
    node_be = challenge_le[:, ::-1]
    labels = np.empty((count, layers, 4), dtype=np.uint64)
    lap("bits")
    for layer in range(1, layers + 1):
        decomposed = _layer_parents(layer)
        # The decomposed parents: DRG columns at this layer, then expander columns at the previous one.
        rows = [(j, layer - 1 if j < BASE_DEGREE else layer - 2) for j in range(decomposed)]
        le = np.stack([column_le[:, j, r] for j, r in rows], axis=1)  # (count, decomposed, 255)
        offset = layout.layers[layer - 1]
        spread_bits(np.ascontiguousarray(le.reshape(count, decomposed * FR_BITS)), per, offset)
        plan = label_plan(layer)
        message = np.zeros((count, plan.message_bits), dtype=np.uint8)
        message[:, plan.constant_positions] = plan.constant_values
        message[:, :256] = replica_stream
        message[:, _NODE_BITS:_NODE_BITS + 64] = node_be
        stream = np.stack([column_stream[:, j, r] for j, r in rows], axis=1)  # (count, decomposed, 256)
        message[:, 512:] = stream[:, _expanded(layer)].reshape(count, -1)
        lap("bits")
        offset += decomposed * FR_BITS
        if deferred is None:
            witness = plan.generate_hash_circuit(message)
            lap("sha256_label")
            spread_bits(witness.aux, per, offset)
            packed = witness.packed
        else:
            packed = deferred.hash_circuit(plan, message, challenge_rows + offset)
            lap("sha256_label")
        per[:, offset + plan.num_aux] = packed
        labels[:, layer - 1] = packed
        lap("assemble")

    # -- e, f: the replica node's tree_r_last path and the labels' column in tree_c --------------------
    per[:, layout.encoded] = encoded = _add_mod_r(labels[:, -1], data_leaves)
    label_hashes = poseidon_witness(labels, poseidon_constants(layers), merkle_tree_tag(layers))
    per[:, layout.column_hash:layout.column_hash + column_rows] = label_hashes.aux
    lap("poseidon")
    tail_leaves = np.concatenate([encoded, label_hashes.digests])
    if deferred is None:
        tail = merkle_path_witness(tree_c, PathLayout.INCLUSION, tail_leaves, tail_indices, tail_siblings)
        path_rows = tail.aux.shape[1]
        per[:, layout.r_last_path:layout.r_last_path + path_rows] = tail.aux[:count]
        per[:, layout.column_hash + column_rows:] = tail.aux[count:]
    else:  # the replica nodes' tree_r_last paths, then the label columns' tree_c paths
        deferred.poseidon_paths(tree_c, PathLayout.INCLUSION, tail_leaves, tail_indices, tail_siblings,
                                np.concatenate([challenge_rows + layout.r_last_path,
                                                challenge_rows + layout.column_hash + column_rows]))
    lap("merkle_poseidon")
    return inputs, aux
