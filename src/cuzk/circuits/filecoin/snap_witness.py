"""A SnapDeals partition's witness (`EmptySectorUpdateCircuit`) from the batched generators.

snap.py's module doc gives the synthesis order. Everything before the challenges is a handful of
values plus a few hashes; each challenge then allocates the same number of aux, so the challenges
are one (challenges, per_challenge, 4) block filled column group by column group, each group one
batched call over all challenges:

    k_and_h_select, its bits, partition = pack(partition bits)
    comm_r_old, comm_d_new, comm_r_new, phi = Poseidon_GR(comm_d_new, comm_r_old)
    comm_c, root_r_old, root_r_new, the apex leaves, the partition path's siblings
    Poseidon2_MerkleTree(comm_c, root_r_old), (comm_c, root_r_new)
    the apex tree: hash2 row by row (one SHA-256 batch per row), then its opening by the partition
        bits (`merkle_path_witness`, SIBLINGS_FIRST, the siblings already allocated above)
    per digest j: digest_index, Poseidon_GR(comm_r_new, digest_index), the digest's 255 bits
    per challenge c (bits: the digest's random bits, then the partition bits; LSB first):
        per allowed h: c_high = challenge >> (bits - h), c_high or 0 by the h-select bit;
        c_high_selected; rho = Poseidon_GR(phi, c_high_selected);
        leaf_r_old, leaf_d_new, product = leaf_d_new·rho, leaf_r_new = leaf_r_old + product;
        tree_r_old and tree_r_new openings (siblings first: `merkle_path_witness`, SIBLINGS_FIRST);
        the apex leaf `select` (apex_leaf_count - 1 picks, MSB first);
        the tree_d opening up to the apex leaf (SHA-256, siblings first)

Rows that only compare values (computed root == root, comm_r == calc) allocate nothing; as under
WitnessCS they are not checked here (the compiled row check does). The one value check the circuit
itself makes during synthesis, leaf_r_new against the encoding, is made here too.

With a `DeferredWitness` the challenges' openings are left to the device: the tree_r_old and
tree_r_new paths whole, the tree_d path's SHA-256 node hashes (its bits, siblings and insertions
are written here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from cuzk.circuits.filecoin.snap_config import GEN_RANDOMNESS_TAG, EmptySectorUpdateConfig
from cuzk.errors import SynthesisError
from cuzk.field.constants import FR_BITS, R_MODULUS
from cuzk.field.limbs import ints_to_limbs, limb_rows_out, limbs_to_ints
from cuzk.gadgets.por import TreeShape
from cuzk.hashes.poseidon_constants import merkle_tree_tag, poseidon_constants
from cuzk.witness_gen.deferred import DeferredWitness
from cuzk.witness_gen.merkle import PathLayout, merkle_path_witness, path_aux_count, sha256_node_plan
from cuzk.witness_gen.poseidon import poseidon_aux_count, poseidon_witness
from cuzk.witness_gen.values import field_limbs, required_value

if TYPE_CHECKING:
    from cuzk.circuits.filecoin.snap import EmptySectorUpdateCircuit

__all__ = ["snap_aux_per_challenge", "snap_witness"]


def _hash2_aux() -> int:
    """Aux of one `hash2_circuit`: both children's 255 bits, the SHA-256 aux, the packed digest."""
    return 2 * FR_BITS + sha256_node_plan(2).num_aux + 1


def _tree_d_part(levels: int) -> TreeShape | None:
    """The binary SHA-256 tree of `levels` levels (None for none: such an opening allocates nothing)."""
    return TreeShape.binary_sha256(1 << levels) if levels else None


def _opening_aux(shape: TreeShape | None) -> int:
    return path_aux_count(shape, PathLayout.SIBLINGS_FIRST) if shape is not None else 0


def snap_aux_per_challenge(config: EmptySectorUpdateConfig) -> int:
    """Aux values one challenge of this configuration allocates."""
    return (2 * len(config.hs) + 1 + poseidon_aux_count(poseidon_constants(2)) + 4
            + 2 * path_aux_count(config.tree_r, PathLayout.SIBLINGS_FIRST) + config.apex_leaf_count - 1
            + _opening_aux(_tree_d_part(config.tree_d_low_levels)))


def _hash2(pairs: np.ndarray) -> np.ndarray:
    """`hash2_circuit`'s aux for N pairs ((N, 2, 4) canonical limbs): (N, _hash2_aux(), 4), the last
    row the digest. Each child's 255 LE bits, then the SHA-256 aux of the children's 32-byte LE
    encodings in stream order (bytes in order, MSB first), then the fr32-packed digest."""
    count = pairs.shape[0]
    plan = sha256_node_plan(2)
    child_bytes = np.ascontiguousarray(pairs).astype("<u8", copy=False).view(np.uint8).reshape(count, 2, 32)
    aux = np.zeros((count, _hash2_aux(), 4), dtype=np.uint64)
    le_bits = np.unpackbits(child_bytes, axis=2, bitorder="little")[:, :, :FR_BITS]
    aux[:, :2 * FR_BITS, 0] = le_bits.reshape(count, 2 * FR_BITS)
    witness = plan.generate_hash_circuit(np.unpackbits(child_bytes, axis=2).reshape(count, 512))
    aux[:, 2 * FR_BITS:-1, 0] = witness.aux
    aux[:, -1] = witness.packed
    return aux


def _gen_randomness(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Poseidon_GR(a_i, b_i)'s aux for (N, 4) limb arrays a, b: (N, rows, 4), the last row the digest."""
    return poseidon_witness(np.ascontiguousarray(np.stack([a, b], axis=1)), poseidon_constants(2),
                            GEN_RANDOMNESS_TAG).aux


def _bits_of(values: np.ndarray, count: int) -> np.ndarray:
    """(N, count) 0/1 of integers' low bits, LSB first."""
    return ((values[:, None] >> np.arange(count, dtype=np.int64)) & 1).astype(np.uint64)


def _as_limbs(small: np.ndarray) -> np.ndarray:
    """Non-negative int64 values below 2^63 as (..., 4) canonical limbs."""
    out = np.zeros((*small.shape, 4), dtype=np.uint64)
    out[..., 0] = small.astype(np.uint64)
    return out


class _Cursor:
    """Appends consecutive aux segments to a preallocated vector (`out` when given), checking it fills
    exactly."""

    def __init__(self, total: int, out: np.ndarray | None = None) -> None:
        self.aux = limb_rows_out(out, total)
        self.row = 0

    def put(self, values: np.ndarray) -> None:
        flat = values.reshape(-1, 4)
        self.aux[self.row:self.row + flat.shape[0]] = flat
        self.row += flat.shape[0]

    def take(self, rows: int) -> np.ndarray:
        """The next `rows` rows, to be filled by the caller."""
        view = self.aux[self.row:self.row + rows]
        self.row += rows
        return view


def _head_aux(config: EmptySectorUpdateConfig) -> int:
    """Aux values before the first challenge's."""
    pb, hs, apex_count = config.partition_bit_len, config.hs, config.apex_leaf_count
    hash_rows = poseidon_aux_count(poseidon_constants(2))
    return (1 + pb + len(hs) + 1 + 3 + hash_rows + 3 + apex_count + pb + 2 * hash_rows
            + (apex_count - 1) * _hash2_aux() + _opening_aux(_tree_d_part(pb)) - pb
            + config.digests_per_partition * (1 + hash_rows + FR_BITS))


def snap_witness_shape(config: EmptySectorUpdateConfig) -> tuple[int, int]:
    """(num_inputs, num_aux) of `snap_witness`, from the configuration alone: ONE, k_and_h_select and
    the three commitments; the header and the challenges' aux."""
    return 5, _head_aux(config) + config.challenge_count * snap_aux_per_challenge(config)


def snap_witness(circuit: EmptySectorUpdateCircuit, *, out: np.ndarray | None = None,
                 deferred: DeferredWitness | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, aux) canonical limb arrays, equal to `synthesize_witness(circuit)`'s input and aux
    assignments. Refuses what `synthesize` refuses: a wrong layout (ValueError), a leaf_r_new that
    is not the encoding (SynthesisError) and, as WitnessCS does, a missing value (SynthesisError
    naming it). `out`, if given, is a C-contiguous (num_aux, 4) uint64 array (`snap_witness_shape`)
    to fill and return as aux (a shared-memory segment: no copy at the hand-off). `deferred`, if
    given, receives the challenges' openings (see the module doc), whose aux rows are left unwritten."""
    config = circuit.config
    partition_path_values = circuit._validated_partition_path()
    kh = required_value(circuit._k_and_h_select(), "k_and_h_select (k and h)")
    pb, hs, apex_count = config.partition_bit_len, config.hs, config.apex_leaf_count
    challenges, rb, bit_len = config.challenge_count, config.random_bits_per_challenge, config.challenge_bit_len
    per_digest, digests, low = config.challenges_per_digest, config.digests_per_partition, config.tree_d_low_levels
    k = kh & ((1 << pb) - 1)
    h_select = [kh >> (pb + i) & 1 for i in range(len(hs))]
    comm_r_old = required_value(circuit.comm_r_old, "comm_r_old")
    comm_d_new = required_value(circuit.comm_d_new, "comm_d_new")
    comm_r_new = required_value(circuit.comm_r_new, "comm_r_new")
    comm_c = required_value(circuit.comm_c, "comm_c")
    root_r_old = required_value(circuit.root_r_old, "root_r_old")
    root_r_new = required_value(circuit.root_r_new, "root_r_new")
    apex_leaves = field_limbs(circuit.apex_leaves, "apex_leaves")
    partition_path = field_limbs([level[0] for level in partition_path_values], "partition path siblings")
    proofs = circuit.challenge_proofs
    leaf_r_old = field_limbs([p.leaf_r_old for p in proofs], "leaf_r_old of challenge")
    leaf_d_new = field_limbs([p.leaf_d_new for p in proofs], "leaf_d_new of challenge")
    path_r_old = field_limbs([v for p in proofs for level in p.path_r_old for v in level], "path_r_old siblings")
    path_r_new = field_limbs([v for p in proofs for level in p.path_r_new for v in level], "path_r_new siblings")
    path_d_low = field_limbs([level[0] for p in proofs for level in p.path_d_new[:low]], "path_d_new siblings")

    hash_rows = poseidon_aux_count(poseidon_constants(2))
    apex_shape, low_shape = _tree_d_part(pb), _tree_d_part(low)
    per_challenge = snap_aux_per_challenge(config)
    cursor = _Cursor(snap_witness_shape(config)[1], out)

    # 1-4. k_and_h_select and its bits, partition; the public commitments; phi.
    cursor.put(_as_limbs(np.array([kh, *(kh >> i & 1 for i in range(pb + len(hs))), k], dtype=np.int64)))
    public = ints_to_limbs([comm_r_old, comm_d_new, comm_r_new])
    cursor.put(public)
    phi = _gen_randomness(public[1:2], public[0:1])
    cursor.put(phi)
    # 5-6. Private values; comm_r_old / comm_r_new from comm_c and the roots.
    private = ints_to_limbs([comm_c, root_r_old, root_r_new])
    cursor.put(private)
    cursor.put(apex_leaves)
    cursor.put(partition_path)
    cursor.put(poseidon_witness(np.ascontiguousarray(np.stack([private[[0, 0]], private[1:]], axis=1)),
                             poseidon_constants(2), merkle_tree_tag(2)).aux)
    # 7. The apex tree, row by row, and its opening by the partition bits.
    row = apex_leaves
    while row.shape[0] > 1:
        hashed = _hash2(row.reshape(-1, 2, 4))
        cursor.put(hashed)
        row = np.ascontiguousarray(hashed[:, -1])
    if apex_shape is not None:
        opening = merkle_path_witness(apex_shape, PathLayout.SIBLINGS_FIRST, row, np.array([k]),
                                      partition_path.reshape(1, pb, 4))
        cursor.put(opening.aux[:, pb:])
    # 8. The challenge digests and their bits.
    digest_index = _as_limbs(np.array([(k * digests + j) % R_MODULUS for j in range(digests)], dtype=np.int64))
    digest_hashes = _gen_randomness(np.broadcast_to(public[2], (digests, 4)), digest_index)
    digest_values = limbs_to_ints(np.ascontiguousarray(digest_hashes[:, -1]))
    digest_bits = np.array([[v >> i & 1 for i in range(FR_BITS)] for v in digest_values], dtype=np.uint64)
    digest_block = cursor.take(digests * (1 + hash_rows + FR_BITS)).reshape(digests, -1, 4)
    digest_block[:, 0] = digest_index
    digest_block[:, 1:1 + hash_rows] = digest_hashes
    digest_block[:, 1 + hash_rows:] = _as_limbs(digest_bits)
    randoms = [v >> (q * rb) & ((1 << rb) - 1) for v in digest_values for q in range(per_digest)][:challenges]
    challenge = np.array(randoms, dtype=np.int64) | (k << rb)

    # 9. The challenges, one column group at a time.
    block_rows = cursor.row + np.arange(challenges, dtype=np.int64) * per_challenge  # challenge c's first aux
    block = cursor.take(challenges * per_challenge).reshape(challenges, per_challenge, 4)
    col = 0
    selected = np.zeros(challenges, dtype=np.int64)  # at most len(hs) values below 2^challenge_bit_len
    for h, bit in zip(hs, h_select, strict=True):
        c_high = challenge >> (bit_len - h)
        block[:, col] = _as_limbs(c_high)
        block[:, col + 1] = _as_limbs(c_high * bit)
        selected += c_high * bit
        col += 2
    selected_limbs = _as_limbs(selected)
    block[:, col] = selected_limbs
    col += 1
    rho = _gen_randomness(np.broadcast_to(phi[0, -1], (challenges, 4)), selected_limbs)
    block[:, col:col + hash_rows] = rho
    col += hash_rows

    products = [d * r % R_MODULUS for d, r in zip(limbs_to_ints(leaf_d_new), limbs_to_ints(
        np.ascontiguousarray(rho[:, -1])), strict=True)]
    encoded = [(o + p) % R_MODULUS for o, p in zip(limbs_to_ints(leaf_r_old), products, strict=True)]
    for c, (proof, value) in enumerate(zip(proofs, encoded, strict=True)):
        if proof.leaf_r_new is not None and proof.leaf_r_new != value:
            raise SynthesisError(f"c_index={c}/leaf_r_new: the witness's new replica node does not equal "
                                 "old node + data node · rho")
    leaf_r_new = ints_to_limbs(encoded)
    block[:, col] = leaf_r_old
    block[:, col + 1] = leaf_d_new
    block[:, col + 2] = ints_to_limbs(products)
    block[:, col + 3] = leaf_r_new
    col += 4

    tree_r = config.tree_r
    siblings_r = sum(a - 1 for a in tree_r.arities)
    r_aux = _opening_aux(tree_r)
    for leaves, siblings in ((leaf_r_old, path_r_old), (leaf_r_new, path_r_new)):
        if deferred is None:
            opening = merkle_path_witness(tree_r, PathLayout.SIBLINGS_FIRST, leaves, challenge,
                                          siblings.reshape(challenges, siblings_r, 4))
            block[:, col:col + r_aux] = opening.aux
        else:
            deferred.poseidon_paths(tree_r, PathLayout.SIBLINGS_FIRST, leaves, challenge,
                                    siblings.reshape(challenges, siblings_r, 4), block_rows + col)
        col += r_aux

    # select: the apex leaf index's bits MSB first, each step halving the candidates.
    position = (challenge >> low) & (apex_count - 1)
    state = np.broadcast_to(apex_leaves, (challenges, apex_count, 4))
    half, bit = apex_count // 2, config.apex_leaf_bit_len - 1
    while half:
        take_upper = ((position >> bit) & 1).astype(bool)[:, None, None]
        state = np.where(take_upper, state[:, half:2 * half], state[:, :half])
        block[:, col:col + half] = state
        col += half
        half, bit = half // 2, bit - 1

    if low_shape is not None:
        d_aux = _opening_aux(low_shape)
        merkle_path_witness(low_shape, PathLayout.SIBLINGS_FIRST, leaf_d_new, challenge & ((1 << low) - 1),
                            path_d_low.reshape(challenges, low, 4), out=block[:, col:col + d_aux],
                            deferred=deferred, rows=None if deferred is None else block_rows + col)
        col += d_aux
    if col != per_challenge or cursor.row != cursor.aux.shape[0]:
        raise RuntimeError(f"SnapDeals witness layout: {col} of {per_challenge} aux per challenge, "
                           f"{cursor.row} of {cursor.aux.shape[0]} in all")

    inputs = np.concatenate([_as_limbs(np.array([1, kh], dtype=np.int64)), public])
    return inputs, cursor.aux
