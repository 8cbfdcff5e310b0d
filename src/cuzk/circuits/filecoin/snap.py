"""The SnapDeals circuit (`EmptySectorUpdateCircuit`), row for row as storage-proofs-update's
circuit.rs and gadgets.rs (docs/circuits.md §10).

A sector update replaces an empty sector's data: new replica node = old replica node +
new data node · rho(high bits of the node index), rho = Poseidon_GR(phi, high) and
phi = Poseidon_GR(comm_d_new, comm_r_old) ("GR" = arity-2 Poseidon with tag Custom(1) = 2^40).
A partition k proves, for challenges inside its k-th slice of the sector, that the new replica
node is this encoding of the old replica node and the new data node, with the old and new nodes
opened in tree_r_old / tree_r_new (Poseidon, tree_r shape) and the data node in tree_d_new
(binary SHA-256).

The challenges are derived *inside* the circuit from comm_r_new, so the only public inputs are
k_and_h_select = k + (h_select << pb), comm_r_old, comm_d_new and comm_r_new. Each challenge's
bits are (rb random bits from a digest) ‖ (the pb partition bits), LSB first. Because the tree_d
openings of a partition all end in the same top part, that part is checked once: the partition's
apex leaves (a row of tree_d) are hashed up to the apex root, which is opened against comm_d_new
with the partition bits; each challenge then only opens tree_d up to its apex leaf, picked from
the apex leaves by the challenge's next bits.

Synthesis order (docs/circuits.md §10), everything below is emitted exactly in this order:

1. k_and_h_select (aux, made public), its pb + len(hs) bits allocated, one packing row;
2. partition = pack_bits(partition bits);
3. comm_r_old, comm_d_new, comm_r_new (each aux, made public); 4. phi;
5. comm_c, root_r_old, root_r_new, the apex leaves, the partition path siblings (aux);
6. comm_r_old = Poseidon2(comm_c, root_r_old), comm_r_new likewise (rows calc·ONE = comm_r);
7. the apex tree and its opening (`apex_por`); 8. the challenge digests (`gen_challenge_bits`);
9. per challenge: `get_challenge_high_bits`, rho, `label_r_new`, the tree_r_old and tree_r_new
   openings, the apex leaf selection and the tree_d opening up to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from cuzk.circuits.filecoin.snap_config import (
    GEN_RANDOMNESS_TAG,
    PUBLISHED_SECTOR_SIZES,
    SNAP_CONFIGS,
    EmptySectorUpdateConfig,
    Siblings,
    UpdateChallengeProof,
    _is_pow2,
)
from cuzk.errors import CuzkError, SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.gadgets.boolean import IS_KIND, AllocatedBit, Boolean, field_into_allocated_bits_le
from cuzk.gadgets.insertion import select
from cuzk.gadgets.multipack import CAPACITY, pack_bits
from cuzk.gadgets.num import AllocatedNum, add, equal
from cuzk.gadgets.por import POSEIDON, SHA256, node_hash_circuit, por_no_challenge_input
from cuzk.gadgets.poseidon import poseidon_hash_circuit
from cuzk.gadgets.sha256 import hash2_circuit
from cuzk.hashes.poseidon_constants import poseidon_constants
from cuzk.r1cs import ONE, ConstraintSystem, LinearCombination, R1csMatrices
from cuzk.witness_gen.deferred import DeferredWitness

if TYPE_CHECKING:
    from cuzk.r1cs.blocks import BlockVersions

__all__ = [
    "GEN_RANDOMNESS_TAG",
    "PUBLISHED_SECTOR_SIZES",
    "SNAP_CONFIGS",
    "EmptySectorUpdateCircuit",
    "EmptySectorUpdateConfig",
    "SnapChallengeSubset",
    "UpdateChallengeProof",
    "apex_por",
    "gen_challenge_bits",
    "gen_randomness_circuit",
    "get_challenge_high_bits",
    "label_r_new",
    "snap_public_inputs",
]


def snap_public_inputs(k: int, h: int, comm_r_old: int, comm_d_new: int, comm_r_new: int, partition_count: int,
                       hs: Sequence[int] | None = None) -> list[int]:
    """`PublicInputs::new(..).to_vec()` for partition k (ONE excluded):
    [k + (h_select << log2 partition_count), comm_r_old, comm_d_new, comm_r_new].

    `hs` defaults to the allowed h values of the sector sizes with that partition count (1 or 2
    partitions ⇔ at most 2^10 nodes ⇔ hs = [1]*6; else [7..12]); pass it for custom layouts.
    """
    if not _is_pow2(partition_count):
        raise ValueError(f"partition count must be a power of two, got {partition_count}")
    allowed = tuple(hs) if hs is not None else (1,) * 6 if partition_count <= 2 else (7, 8, 9, 10, 11, 12)
    if not 0 <= k < partition_count:
        raise ValueError(f"partition {k} is out of range 0..{partition_count - 1}")
    if h not in allowed:
        raise ValueError(f"h = {h} is not allowed (allowed: {allowed})")
    h_select = 1 << allowed.index(h)
    return [k | h_select << (partition_count.bit_length() - 1), comm_r_old, comm_d_new, comm_r_new]


@dataclass
class EmptySectorUpdateCircuit:
    """One partition's SnapDeals circuit. All values None (see `blank`) gives the key-generation
    circuit. `k` is the partition index and `h` the number of high bits selecting rho (one of
    `config.hs`); both are None in a blank circuit."""

    config: EmptySectorUpdateConfig
    k: int | None
    h: int | None
    comm_r_old: int | None
    comm_d_new: int | None
    comm_r_new: int | None
    comm_c: int | None
    root_r_old: int | None
    root_r_new: int | None
    apex_leaves: Sequence[int | None] = field(default_factory=list)
    challenge_proofs: Sequence[UpdateChallengeProof] = field(default_factory=list)
    #: `witness_arrays` can leave its openings' aux to a device (`generated_witness`'s `deferred`).
    DEFERS_WITNESS: ClassVar[bool] = True

    @classmethod
    def blank(cls, config: EmptySectorUpdateConfig) -> EmptySectorUpdateCircuit:
        proofs = [UpdateChallengeProof.blank(config) for _ in range(config.challenge_count)]
        return cls(config, None, None, None, None, None, None, None, None, [None] * config.apex_leaf_count, proofs)

    def public_inputs(self) -> list[int]:
        """The inputs this instance exposes (ONE excluded); needs every public value."""
        k, h, comm_r_old, comm_d_new, comm_r_new = self.k, self.h, self.comm_r_old, self.comm_d_new, self.comm_r_new
        if k is None or h is None or comm_r_old is None or comm_d_new is None or comm_r_new is None:
            raise ValueError("a blank circuit has no public inputs")
        return self.config.public_inputs(k, h, comm_r_old, comm_d_new, comm_r_new)

    def _validated_partition_path(self) -> list[list[int | None]]:
        """The top pb tree_d siblings of the first challenge, after checking all challenges agree
        (Rust asserts the same)."""
        config = self.config
        if len(self.apex_leaves) != config.apex_leaf_count:
            raise ValueError(f"the circuit has {config.apex_leaf_count} apex leaves, got {len(self.apex_leaves)}")
        if len(self.challenge_proofs) != config.challenge_count:
            raise ValueError(f"the circuit has {config.challenge_count} challenges, got {len(self.challenge_proofs)}")
        for proof in self.challenge_proofs:
            proof.check_layout(config)
        start = config.challenge_bit_len - config.partition_bit_len
        path = [list(level) for level in self.challenge_proofs[0].path_d_new[start:]]
        for i, proof in enumerate(self.challenge_proofs[1:], 1):
            if [list(level) for level in proof.path_d_new[start:]] != path:
                raise ValueError(f"challenge {i}'s tree_d path leaves the partition by another path than challenge 0")
        return path

    def _k_and_h_select(self) -> int | None:
        if self.k is None or self.h is None:
            if (self.k, self.h) != (None, None):
                raise ValueError("k and h must both be given or both be None")
            return None
        return self.config.k_and_h_select(self.k, self.h)

    def witness_arrays(self, out: np.ndarray | None = None,
                       deferred: DeferredWitness | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(inputs, aux) as canonical limbs, equal to what `synthesize` allocates under WitnessCS,
        from the batched generators (`snap_witness`; `out`: the aux array to fill; `deferred`:
        receives the challenges' openings instead of their aux); SynthesisError naming a missing value."""
        from cuzk.circuits.filecoin.snap_witness import snap_witness

        return snap_witness(self, out=out, deferred=deferred)

    def witness_shape(self) -> tuple[int, int]:
        """(num_inputs, num_aux) of `witness_arrays`, from the configuration alone."""
        from cuzk.circuits.filecoin.snap_witness import snap_witness_shape

        return snap_witness_shape(self.config)

    def block_versions(self) -> BlockVersions | None:
        """What block compilation records (`cuzk.r1cs.blocks`), a block being one challenge: the
        two-challenge version only (a `SnapChallengeSubset`, the real header with challenges 0 and
        1), the one-challenge recording being cut out of it; None under two challenges (recorded
        whole). See `cuzk.circuits.filecoin.blocks` for why."""
        from cuzk.r1cs.blocks import BlockVersions

        if self.config.challenge_count < 2:
            return None
        two = SnapChallengeSubset(self.config, (0, 1))
        return BlockVersions(None, two, self.config.challenge_count, "challenge",
                             per_block_header_aux=lambda: _random_bit_aux(two),
                             first_block=lambda recorded: _snap_first_challenge(two, recorded))

    def synthesize(self, cs: ConstraintSystem) -> None:
        self._synthesize(cs, range(self.config.challenge_count))

    def _synthesize(self, cs: ConstraintSystem, challenges: Sequence[int],
                    ends: list[tuple[int, int, int]] | None = None) -> list[list[Boolean]]:
        """The header (steps 1-8, with every digest of `config.challenge_count` challenges), then step 9
        for the challenges at the indices `challenges` (all of them in the real circuit; block
        compilation's small versions take two). Returns every challenge's random bits; `ends` gets
        cs's (constraints, inputs, aux) after the header and after each challenge."""
        config = self.config
        partition_path_values = self._validated_partition_path()
        pb = config.partition_bit_len

        # 1-2. k_and_h_select, split into the partition bits and the h-select bits.
        k_and_h_select = AllocatedNum.alloc(cs, "k_and_h_select", self._k_and_h_select())
        k_and_h_select.inputize(cs, "k_and_h_select (public input)")
        known = cs.needs_values and k_and_h_select.value is not None
        kh_bits = [AllocatedBit.alloc(cs, bool(k_and_h_select.value >> i & 1) if known else None)  # type: ignore[operator]
                   for i in range(pb + len(config.hs))]
        _enforce_bit_decomposition(cs, kh_bits, k_and_h_select, "k_and_h_select binary decomp")
        partition_bits = [Boolean(IS_KIND, bit) for bit in kh_bits[:pb]]
        h_select_bits = kh_bits[pb:]
        partition = pack_bits(cs, partition_bits)

        # 3-4. The other public inputs, then phi.
        comm_r_old = AllocatedNum.alloc(cs, "comm_r_old", self.comm_r_old)
        comm_r_old.inputize(cs, "comm_r_old_input")
        comm_d_new = AllocatedNum.alloc(cs, "comm_d_new", self.comm_d_new)
        comm_d_new.inputize(cs, "comm_d_new_input")
        comm_r_new = AllocatedNum.alloc(cs, "comm_r_new", self.comm_r_new)
        comm_r_new.inputize(cs, "comm_r_new_input")
        phi = gen_randomness_circuit(cs, comm_d_new, comm_r_old)

        # 5. Private inputs other than the per-challenge openings.
        comm_c = AllocatedNum.alloc(cs, "comm_c", self.comm_c)
        root_r_old = AllocatedNum.alloc(cs, "root_r_old", self.root_r_old)
        root_r_new = AllocatedNum.alloc(cs, "root_r_new", self.root_r_new)
        apex_leaves = [AllocatedNum.alloc(cs, "apex_leaf", value) for value in self.apex_leaves]
        partition_path = [[AllocatedNum.alloc(cs, "partition_path_sibling", level[0])]
                          for level in partition_path_values]

        # 6. comm_r = H(comm_c || root_r), old and new.
        for root, comm_r, name in ((root_r_old, comm_r_old, "old"), (root_r_new, comm_r_new, "new")):
            calc = node_hash_circuit(cs, POSEIDON, [comm_c, root])
            equal(cs, calc, comm_r, f"enforce comm_r_{name}_calc == comm_r_{name}")

        # 7-8. The partition's apex tree against comm_d_new, then the challenges' random bits.
        with cs.namespace("apex_gadget"):
            apex_por(cs, apex_leaves, partition_bits, partition_path, comm_d_new)
        with cs.namespace("gen_challenge_bits"):
            generated = gen_challenge_bits(cs, comm_r_new, partition, config.challenge_count,
                                           config.random_bits_per_challenge)

        # 9. Per challenge.
        if ends is not None:
            ends.append((cs.num_constraints, cs.num_inputs, cs.num_aux))
        for c_index in challenges:
            with cs.namespace(f"c_index={c_index}"):
                _synthesize_challenge(cs, config, self.challenge_proofs[c_index], generated[c_index] + partition_bits,
                                      h_select_bits, phi, root_r_old, root_r_new, apex_leaves)
            if ends is not None:
                ends.append((cs.num_constraints, cs.num_inputs, cs.num_aux))
        return generated


@dataclass
class SnapChallengeSubset:
    """A blank SnapDeals partition with its real header but only the challenges at `challenges`:
    the two-challenge version that block compilation records (`EmptySectorUpdateCircuit.block_versions`).

    The header derives every challenge's random bits from ceil(challenge_count / per digest)
    digests, with that count as a coefficient, so a circuit of fewer challenges has another header;
    this one keeps the header of `config` whole and leaves out the other challenges' rows. Each
    challenge's rows use its own random bits, which live in the header, so `synthesize` also notes
    where they are: `random_bit_aux` is, for every challenge of `config`, synthesised or not, the
    aux indices of its random bits (LSB first) in the constraint system it ran on; and `ends` is
    that system's (constraints, inputs, aux) after the header and after each synthesised challenge.
    """

    config: EmptySectorUpdateConfig
    challenges: tuple[int, ...]
    random_bit_aux: np.ndarray | None = field(default=None, compare=False, repr=False)
    ends: list[tuple[int, int, int]] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        count = self.config.challenge_count
        if not self.challenges or any(not 0 <= c < count for c in self.challenges):
            raise ValueError(f"challenge indices must be in 0..{count - 1}, got {self.challenges}")

    def synthesize(self, cs: ConstraintSystem) -> None:
        self.ends = []
        generated = EmptySectorUpdateCircuit.blank(self.config)._synthesize(cs, self.challenges, self.ends)
        variables = [bit.bit.variable for bits in generated for bit in bits]  # type: ignore[union-attr]
        if any(v.is_input for v in variables):
            raise SynthesisError("a challenge's random bit is a public input")  # gen_challenge_bits allocates aux
        self.random_bit_aux = np.array([v.index for v in variables], dtype=np.int64).reshape(len(generated), -1)


def _recorded(two: SnapChallengeSubset) -> SnapChallengeSubset:
    if two.random_bit_aux is None or len(two.ends) != 3:
        raise CuzkError("the SnapDeals two-challenge version must be recorded first")
    return two


def _random_bit_aux(two: SnapChallengeSubset) -> np.ndarray:
    """Where each challenge's random bits are, as the recording of the SnapDeals header saw them."""
    return _recorded(two).random_bit_aux  # type: ignore[return-value]


def _snap_first_challenge(two: SnapChallengeSubset, recorded: R1csMatrices) -> R1csMatrices:
    """The header + challenge 0 recording, cut from the two-challenge one where challenge 0 ended."""
    from cuzk.r1cs.blocks import BlockStructureError, first_block_of

    header, first, second = _recorded(two).ends
    sizes = [tuple(b - a for a, b in zip(start, end, strict=True)) for start, end in ((header, first), (first, second))]
    if sizes[0] != sizes[1]:
        raise BlockStructureError(f"SnapDeals challenges 0 and 1 differ in (rows, inputs, aux): {sizes[0]} and "
                                  f"{sizes[1]}")
    return first_block_of(recorded, *first)


def _synthesize_challenge(cs: ConstraintSystem, config: EmptySectorUpdateConfig, proof: UpdateChallengeProof,
                          c_bits: list[Boolean], h_select_bits: Sequence[AllocatedBit], phi: AllocatedNum,
                          root_r_old: AllocatedNum, root_r_new: AllocatedNum,
                          apex_leaves: Sequence[AllocatedNum]) -> None:
    """Step 9 of the module doc for one challenge; `c_bits` are its bits, LSB first."""
    c_high = get_challenge_high_bits(cs, c_bits, h_select_bits, config.hs)
    rho = gen_randomness_circuit(cs, phi, c_high)

    leaf_r_old = AllocatedNum.alloc(cs, "leaf_r_old", proof.leaf_r_old)
    leaf_d_new = AllocatedNum.alloc(cs, "leaf_d_new", proof.leaf_d_new)
    leaf_r_new = label_r_new(cs, leaf_r_old, leaf_d_new, rho)
    if leaf_r_new.value is not None and proof.leaf_r_new is not None and leaf_r_new.value != proof.leaf_r_new:
        raise SynthesisError(f"{cs.path_of('leaf_r_new')}: the witness's new replica node does not equal "
                             "old node + data node · rho")

    path_r_old = _alloc_siblings(cs, proof.path_r_old, "path_r_old sibling")
    por_no_challenge_input(cs, POSEIDON, c_bits, leaf_r_old, path_r_old, root_r_old)
    path_r_new = _alloc_siblings(cs, proof.path_r_new, "path_r_new sibling")
    por_no_challenge_input(cs, POSEIDON, c_bits, leaf_r_new, path_r_new, root_r_new)

    low = config.tree_d_low_levels
    apex_leaf = select(cs, apex_leaves, c_bits[low:low + config.apex_leaf_bit_len])
    path_to_apex_leaf = [[AllocatedNum.alloc(cs, "path_to_apex_leaf sibling", level[0])]
                         for level in proof.path_d_new[:low]]
    por_no_challenge_input(cs, SHA256, c_bits[:low], leaf_d_new, path_to_apex_leaf, apex_leaf)


def _alloc_siblings(cs: ConstraintSystem, path: Siblings, annotation: str) -> list[list[AllocatedNum]]:
    return [[AllocatedNum.alloc(cs, annotation, value) for value in level] for level in path]


def _enforce_bit_decomposition(cs: ConstraintSystem, bits: Sequence[AllocatedBit], num: AllocatedNum,
                               annotation: str) -> None:
    """Row (Σ 2^i·bit_i)·ONE = num: SnapDeals' own decomposition row (unlike `to_bits_le`'s
    0·0 = Σ − num)."""
    cs.enforce(annotation, LinearCombination([(bit.variable, 1 << i) for i, bit in enumerate(bits)]),
               LinearCombination([(ONE, 1)]), LinearCombination([(num.variable, 1)]))


# -- gadgets (storage-proofs-update gadgets.rs) -------------------------------------------------------

def gen_randomness_circuit(cs: ConstraintSystem, a: AllocatedNum, b: AllocatedNum) -> AllocatedNum:
    """Poseidon_GR(a, b): arity-2 Poseidon with tag Custom(1) (phi, rho, challenge digests); 311 rows."""
    values = [a.value, b.value] if cs.needs_values else None
    out = poseidon_hash_circuit(cs, [a.variable, b.variable], poseidon_constants(2), GEN_RANDOMNESS_TAG,
                                values)  # type: ignore[arg-type]
    return AllocatedNum(out.variable, out.value)


def apex_por(cs: ConstraintSystem, apex_leaves: Sequence[AllocatedNum], partition_bits: Sequence[Boolean],
             partition_path: Sequence[Sequence[AllocatedNum]], comm_d: AllocatedNum) -> None:
    """Hash the apex leaves pairwise, row by row (SHA-256 `hash2`, 45,379 rows each), then open the
    apex root against comm_d with the partition bits as index bits (one insert_2 + hash per level)
    and the row computed·ONE = comm_d."""
    if not _is_pow2(len(apex_leaves)):
        raise ValueError(f"apex leaf count must be a power of two, got {len(apex_leaves)}")
    row = list(apex_leaves)
    while len(row) > 1:
        row = [hash2_circuit(cs, row[i], row[i + 1]) for i in range(0, len(row), 2)]
    por_no_challenge_input(cs, SHA256, partition_bits, row[0], partition_path, comm_d)


def gen_challenge_bits(cs: ConstraintSystem, comm_r_new: AllocatedNum, partition: AllocatedNum, challenges: int,
                       bits_per_challenge: int) -> list[list[Boolean]]:
    """Each challenge's random bits (LSB first, as `Is` booleans of allocated bits).

    Per digest j: aux digest_index, row (dpp·partition + j·ONE)·ONE = digest_index (dpp = digests
    per partition); digest = Poseidon_GR(comm_r_new, digest_index); its 255 allocated bits and the
    row (Σ 2^i·bit_i)·ONE = digest. Challenge q of a digest takes bits [q·b, (q+1)·b); the last
    digest supplies only the remaining challenges. 568 rows per digest.
    """
    per_digest = CAPACITY // bits_per_challenge
    digests = -(-challenges // per_digest)
    generated: list[list[Boolean]] = []
    for j in range(digests):
        def index_value(j: int = j) -> int | None:
            return None if partition.value is None else (partition.value * digests + j) % R_MODULUS

        digest_index = AllocatedNum.alloc(cs, f"digest_index_{j}", index_value)
        a_terms = [(partition.variable, digests), (ONE, j)] if j else [(partition.variable, digests)]
        cs.enforce(f"digest_index_{j} == k * digests_per_partition + {j}", LinearCombination(a_terms),
                   LinearCombination([(ONE, 1)]), LinearCombination([(digest_index.variable, 1)]))
        digest = gen_randomness_circuit(cs, comm_r_new, digest_index)
        bits = field_into_allocated_bits_le(cs, digest.value)
        _enforce_bit_decomposition(cs, bits, digest, f"digest_{j}_bits binary decomp")
        for q in range(min(per_digest, challenges - len(generated))):
            chunk = bits[q * bits_per_challenge:(q + 1) * bits_per_challenge]
            generated.append([Boolean(IS_KIND, bit) for bit in chunk])
    return generated


def get_challenge_high_bits(cs: ConstraintSystem, c_bits: Sequence[Boolean], h_select_bits: Sequence[AllocatedBit],
                            hs: Sequence[int]) -> AllocatedNum:
    """The top h bits of the challenge, h = hs[i] for the one set h-select bit i.

    For each allowed h in order: c_high = pack_bits(top h bits) (aux + row); aux c_high_or_zero;
    row c_high·h_select_bit = c_high_or_zero. Then aux c_high_selected; row
    (Σ c_high_or_zero)·ONE = c_high_selected.
    """
    if len(h_select_bits) != len(hs):
        raise ValueError(f"{len(hs)} allowed h values need as many select bits, got {len(h_select_bits)}")
    bit_len = len(c_bits)
    or_zeros: list[AllocatedNum] = []
    for h, select_bit in zip(hs, h_select_bits, strict=True):
        c_high = pack_bits(cs, c_bits[bit_len - h:])

        def value(c_high: AllocatedNum = c_high, select_bit: AllocatedBit = select_bit) -> int | None:
            if select_bit.value is None:
                return None
            return c_high.value if select_bit.value else 0

        or_zero = AllocatedNum.alloc(cs, "c_high_or_zero", value)
        cs.enforce("c_high_or_zero == c_high * h_select_bit", LinearCombination([(c_high.variable, 1)]),
                   LinearCombination([(select_bit.variable, 1)]), LinearCombination([(or_zero.variable, 1)]))
        or_zeros.append(or_zero)

    def total() -> int | None:
        values = [x.value for x in or_zeros]
        return None if None in values else sum(values) % R_MODULUS  # type: ignore[arg-type]

    selected = AllocatedNum.alloc(cs, "c_high_selected", total)
    cs.enforce("c_high_selected == dot(c_highs, h_select_bits)",
               LinearCombination([(x.variable, 1) for x in or_zeros]), LinearCombination([(ONE, 1)]),
               LinearCombination([(selected.variable, 1)]))
    return selected


def label_r_new(cs: ConstraintSystem, label_r_old: AllocatedNum, label_d_new: AllocatedNum,
                rho: AllocatedNum) -> AllocatedNum:
    """The encoding of one node: product = label_d_new·rho (aux, row A = label_d_new, B = rho),
    then aux label_r_new and row (label_r_old + product)·ONE = label_r_new."""
    return add(cs, label_r_old, label_d_new.mul(cs, rho))
