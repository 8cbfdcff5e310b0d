"""The SnapDeals (EmptySectorUpdate) circuit: stated row counts (docs/circuits.md §10, §13;
storage-proofs-update tests/circuit.rs and gadgets.rs), satisfiability on sector updates built here
from native hashes, in-circuit challenges equal to the native derivation (docs/circuits.md §10), and public inputs
(docs/circuits.md §10) equal to what the circuit exposes.

SHA-256 dominates the rows (45,379 per tree_d node hash) and the run time, so besides real counts
of the 1KiB/2KiB circuits and of one apex gadget, every size is also counted with the hash gadgets
replaced by one-row stand-ins whose missing rows are added back: exact for the glue (bits,
selects, insertions, packing, order of allocation does not matter for counts) and fast even for
32GiB. The real counts of the 1KiB..32KiB test circuits run too (slow-marked, ~100 s of CPU together).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

import cuzk.circuits.filecoin.snap as snap
import cuzk.gadgets.por as por
from cuzk.circuits.filecoin.snap import (
    PUBLISHED_SECTOR_SIZES,
    SNAP_CONFIGS,
    EmptySectorUpdateCircuit,
    EmptySectorUpdateConfig,
    UpdateChallengeProof,
    apex_por,
    gen_challenge_bits,
    snap_public_inputs,
)
from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.gadgets.boolean import IS_KIND, AllocatedBit, Boolean
from cuzk.gadgets.num import AllocatedNum
from cuzk.gadgets.por import SHA256, NativeTree, PathLevel
from cuzk.gadgets.poseidon import PoseidonOutput
from cuzk.gadgets.sha256 import hash2_circuit
from cuzk.groth16.synthesis import circuit_shape, synthesize_for_proving
from cuzk.hashes.poseidon import hash_custom_gr, hash_merkle
from cuzk.r1cs import ConstraintSystem, LinearCombination, ProvingAssignment, ShapeCS

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
SHA_NODE_ROWS = 45_379  #: filecoin-hashers hash2_circuit: 2 × (255 + 1) + 44,866 + 1
POSEIDON_ROWS = {2: 311, 4: 377, 8: 505}


def size_id(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if size >= 1 << shift:
            return f"{size >> shift}{unit}"
    return f"{size >> 10}KiB"


# -- native side (docs/circuits.md §10) ----------------------------------------------------------------

def native_challenges(config: EmptySectorUpdateConfig, comm_r_new: int, k: int) -> list[int]:
    """challenges.rs: digest j = Poseidon_GR(comm_r_new, k·dpp + j); rb-bit chunks, LSB first,
    with k above them."""
    rb = config.random_bits_per_challenge
    out: list[int] = []
    j = 0
    while len(out) < config.challenge_count:
        digest = hash_custom_gr(comm_r_new, k * config.digests_per_partition + j)
        for q in range(min(config.challenges_per_digest, config.challenge_count - len(out))):
            out.append(digest >> (q * rb) & ((1 << rb) - 1) | k << rb)
        j += 1
    return out


def _siblings(path: list[PathLevel]) -> list[list[int | None]]:
    return [list(level.siblings) for level in path]


@dataclass
class NativeUpdate:
    """A random old replica, random new data, the encoded new replica and their trees."""

    config: EmptySectorUpdateConfig
    h: int
    tree_r_old: NativeTree
    tree_d_new: NativeTree
    tree_r_new: NativeTree
    comm_c: int

    @classmethod
    def random(cls, config: EmptySectorUpdateConfig, h: int, seed: int) -> NativeUpdate:
        rng = random.Random(seed)
        old = [rng.randrange(R_MODULUS) for _ in range(config.nodes)]
        data = [rng.getrandbits(254) for _ in range(config.nodes)]
        tree_r_old = NativeTree(config.tree_r, old)
        tree_d_new = NativeTree(config.tree_d, data)
        comm_c = rng.randrange(R_MODULUS)
        phi = hash_custom_gr(tree_d_new.root, hash_merkle(2, [comm_c, tree_r_old.root]))
        shift = config.challenge_bit_len - h
        rhos = [hash_custom_gr(phi, high) for high in range(1 << h)]
        new = [(o + d * rhos[v >> shift]) % R_MODULUS for v, (o, d) in enumerate(zip(old, data, strict=True))]
        return cls(config, h, tree_r_old, tree_d_new, NativeTree(config.tree_r, new), comm_c)

    @property
    def comm_r_old(self) -> int:
        return hash_merkle(2, [self.comm_c, self.tree_r_old.root])

    @property
    def comm_r_new(self) -> int:
        return hash_merkle(2, [self.comm_c, self.tree_r_new.root])

    def circuit(self, k: int) -> EmptySectorUpdateCircuit:
        config = self.config
        proofs = [
            UpdateChallengeProof(self.tree_r_old.levels[0][c], _siblings(self.tree_r_old.path(c)),
                                 self.tree_d_new.levels[0][c], _siblings(self.tree_d_new.path(c)),
                                 self.tree_r_new.levels[0][c], _siblings(self.tree_r_new.path(c)))
            for c in native_challenges(config, self.comm_r_new, k)
        ]
        apex_row = self.tree_d_new.levels[config.tree_d_low_levels]
        apex = apex_row[k * config.apex_leaf_count:(k + 1) * config.apex_leaf_count]
        return EmptySectorUpdateCircuit(config, k, self.h, self.comm_r_old, self.tree_d_new.root, self.comm_r_new,
                                        self.comm_c, self.tree_r_old.root, self.tree_r_new.root, apex, proofs)


def _prove(update: NativeUpdate, k: int) -> ProvingAssignment:
    circuit = update.circuit(k)
    cs = synthesize_for_proving(circuit, check=True)
    expected = snap_public_inputs(k, update.h, update.comm_r_old, update.tree_d_new.root, update.comm_r_new,
                                  update.config.partition_count, update.config.hs)
    assert cs.input_assignment == [1, *expected]
    assert expected == circuit.public_inputs()
    return cs


# -- satisfiability --------------------------------------------------------------------------------------

#: 8 nodes, 2 partitions of 2 apex leaves, 2 challenges, distinct allowed h values: every part of
#: the circuit (partition bits and path, h selection, apex select) with 5 SHA-256 hashes only.
TINY = EmptySectorUpdateConfig(8, 2, 2, (1, 2, 3, 1, 2, 3), 2)


@pytest.mark.parametrize(("k", "h"), [(0, 1), (1, 2), (1, 3)])
def test_tiny_partitions_satisfied(k: int, h: int) -> None:
    update = NativeUpdate.random(TINY, h, seed=10 + k + h)
    cs = _prove(update, k)
    k_and_h_select = k | (1 << TINY.hs.index(h)) << 1
    assert cs.input_assignment[1] == k_and_h_select
    # Row 0 makes k_and_h_select public, rows 1..7 are the booleanity rows of its 1 + 6 bits, row 8
    # is SnapDeals' own packing row (Σ 2^i·b_i)·ONE = k_and_h_select (not to_bits_le's 0·0 = Σ − x).
    assert (cs.a[8], cs.b[8], cs.c[8]) == (k_and_h_select, 1, k_and_h_select)


@pytest.mark.slow
def test_2kib_partition_satisfied() -> None:
    """The production 2KiB circuit (h = 1) on a consistent update: every one of its rows holds."""
    config = EmptySectorUpdateConfig.for_sector_size(2 * KIB)
    cs = _prove(NativeUpdate.random(config, 1, seed=3), 0)
    assert cs.num_constraints == 1_705_039 + 5


def test_inconsistent_witness_fails() -> None:
    update = NativeUpdate.random(TINY, 2, seed=4)
    circuit = update.circuit(1)
    circuit.comm_c = (circuit.comm_c + 1) % R_MODULUS  # type: ignore[operator]
    with pytest.raises(SynthesisError, match="comm_r_old"):
        synthesize_for_proving(circuit, check=True)
    circuit = update.circuit(1)
    circuit.challenge_proofs[1].leaf_r_new = 0
    with pytest.raises(SynthesisError, match="new replica node"):
        synthesize_for_proving(circuit, check=True)
    circuit = update.circuit(1)
    circuit.h = 1  # public input says h = 1, the replica was encoded with h = 2: rho differs
    with pytest.raises(SynthesisError, match="new replica node"):
        synthesize_for_proving(circuit, check=True)


def test_gen_challenge_bits_match_native() -> None:
    """gadgets.rs test: in-circuit challenge bits ‖ partition bits = the native challenges, 568 rows
    per digest; for every allowed size at its first and last partition."""
    rng = random.Random(5)
    for size, config in SNAP_CONFIGS.items():
        comm_r_new = rng.randrange(R_MODULUS)
        for k in sorted({0, config.partition_count - 1}):
            cs = ProvingAssignment(check=True)
            cs.alloc_input("ONE", 1)
            r = AllocatedNum.alloc(cs, "comm_r_new", comm_r_new)
            partition = AllocatedNum.alloc(cs, "k", k)
            before = cs.num_constraints
            generated = gen_challenge_bits(cs, r, partition, config.challenge_count, config.random_bits_per_challenge)
            assert cs.num_constraints - before == 568 * config.digests_per_partition, size
            got = [sum(1 << i for i, bit in enumerate(bits) if bit.get_value()) | k << config.random_bits_per_challenge
                   for bits in generated]
            assert got == native_challenges(config, comm_r_new, k), (size, k)


# -- real counts -----------------------------------------------------------------------------------------

def _rows(config: EmptySectorUpdateConfig) -> tuple[int, int]:
    shape = circuit_shape(EmptySectorUpdateCircuit.blank(config))
    return shape.num_constraints - shape.num_inputs, shape.num_inputs


@pytest.mark.slow
def test_2kib_production_count() -> None:
    assert _rows(EmptySectorUpdateConfig.for_sector_size(2 * KIB)) == (1_705_039, 5)


@pytest.mark.slow
def test_1kib_test_count() -> None:
    assert _rows(EmptySectorUpdateConfig.for_sector_size(1 * KIB)) == (1_248_389, 5)


@pytest.mark.slow
@pytest.mark.parametrize(("size", "rows"), [(4 * KIB, 2_165_109), (8 * KIB, 2_620_359), (16 * KIB, 6_300_021),
                                            (32 * KIB, 6_760_091)], ids=["4KiB", "8KiB", "16KiB", "32KiB"])
def test_larger_test_counts(size: int, rows: int) -> None:
    """storage-proofs-update tests/circuit.rs, real SHA-256 and Poseidon rows on the shape back end.
    Measured on a loaded 2-core machine: 4KiB 18 s, 8KiB 22 s, 16KiB 41 s, 32KiB 58 s wall
    (97 s of CPU for the four)."""
    assert _rows(EmptySectorUpdateConfig.for_sector_size(size)) == (rows, 5)


def _shape_cs() -> ShapeCS:
    cs = ShapeCS()
    cs.alloc_input("ONE")
    return cs


def test_apex_por_count_8_leaves() -> None:
    """gadgets.rs: 8 apex leaves, one partition: 7 hashes + the root row = 317,654."""
    cs = _shape_cs()
    leaves = [AllocatedNum.alloc(cs, "leaf", None) for _ in range(8)]
    comm_d = AllocatedNum.alloc(cs, "comm_d", None)
    apex_por(cs, leaves, [], [], comm_d)
    assert cs.num_constraints == 317_654


def test_sha_node_hash_rows() -> None:
    """The stand-in below assumes this."""
    cs = _shape_cs()
    a, b = AllocatedNum.alloc(cs, "a", None), AllocatedNum.alloc(cs, "b", None)
    hash2_circuit(cs, a, b)
    assert cs.num_constraints == SHA_NODE_ROWS


# -- counts with stand-in hashes ---------------------------------------------------------------------------

class _Missing:
    rows = 0


@pytest.fixture
def light_hashes(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Missing]:
    """Replace the SHA-256 node hash and Poseidon by one aux + one row each, on structure-only
    systems; `rows` accumulates the rows they leave out."""
    missing = _Missing()
    real_node_hash = por.node_hash_circuit

    def one_row(cs: ConstraintSystem, rows: int) -> AllocatedNum:
        missing.rows += rows - 1
        out = AllocatedNum.alloc(cs, "stand-in", None)
        cs.enforce("stand-in", LinearCombination(), LinearCombination(), LinearCombination([(out.variable, 1)]))
        return out

    def node_hash(cs: ConstraintSystem, hasher: str, children: list[AllocatedNum]) -> AllocatedNum:
        if cs.needs_values:
            return real_node_hash(cs, hasher, children)  # type: ignore[arg-type]
        return one_row(cs, SHA_NODE_ROWS if hasher == SHA256 else POSEIDON_ROWS[len(children)])

    def sha2(cs: ConstraintSystem, left: AllocatedNum, right: AllocatedNum) -> AllocatedNum:
        return one_row(cs, SHA_NODE_ROWS)

    def poseidon(cs: ConstraintSystem, inputs: list[object], *args: object, **kwargs: object) -> PoseidonOutput:
        return PoseidonOutput(one_row(cs, POSEIDON_ROWS[len(inputs)]).variable, None)

    monkeypatch.setattr(por, "node_hash_circuit", node_hash)
    monkeypatch.setattr(snap, "node_hash_circuit", node_hash)
    monkeypatch.setattr(snap, "hash2_circuit", sha2)
    monkeypatch.setattr(snap, "poseidon_hash_circuit", poseidon)
    yield missing


#: Rows before the generator's 5 input rows: stated in storage-proofs-update tests (1KiB..32KiB,
#: 32GiB) or derived in docs/circuits.md §10 (8MiB, 512MiB, 64GiB).
ALL_COUNTS = {
    1 * KIB: 1_248_389, 2 * KIB: 1_705_039, 4 * KIB: 2_165_109, 8 * KIB: 2_620_359, 16 * KIB: 6_300_021,
    32 * KIB: 6_760_091, 8 * MIB: 10_007_503, 512 * MIB: 57_450_479, 32 * GIB: 81_049_499, 64 * GIB: 85_006_101,
}


@pytest.mark.parametrize("size", list(ALL_COUNTS), ids=size_id)
def test_counts_with_light_hashes(size: int, light_hashes: _Missing) -> None:
    rows, inputs = _rows(EmptySectorUpdateConfig.for_sector_size(size))
    assert (rows + light_hashes.rows, inputs) == (ALL_COUNTS[size], 5)


def test_apex_por_counts_with_light_hashes(light_hashes: _Missing) -> None:
    """gadgets.rs: 128 leaves × 2 partitions 5,808,515; on 16KiB, 16 × 4 partitions 771,448 and
    8 × 8 partitions 453,797."""
    for leaves, pb, rows in ((128, 1, 5_808_515), (16, 2, 771_448), (8, 3, 453_797)):
        light_hashes.rows = 0
        cs = _shape_cs()
        apex = [AllocatedNum.alloc(cs, "leaf", None) for _ in range(leaves)]
        bits = [Boolean(IS_KIND, AllocatedBit.alloc(cs, None)) for _ in range(pb)]
        path = [[AllocatedNum.alloc(cs, "sibling", None)] for _ in range(pb)]
        comm_d = AllocatedNum.alloc(cs, "comm_d", None)
        before = cs.num_constraints
        snap.apex_por(cs, apex, bits, path, comm_d)
        assert cs.num_constraints - before + light_hashes.rows == rows


# -- configuration and public inputs ------------------------------------------------------------------

def test_configs_follow_constants_rs() -> None:
    rows = {size: (c.partition_count, c.challenge_count, c.hs[3], c.apex_leaf_count, c.tree_r.arities[-2:])
            for size, c in SNAP_CONFIGS.items()}
    assert rows[2 * KIB] == (1, 10, 1, 8, (8, 8))
    assert rows[16 * KIB] == (2, 10, 1, 128, (8, 8))
    assert rows[8 * MIB] == (4, 10, 10, 128, (8, 8))
    assert rows[16 * MIB] == (4, 10, 10, 128, (8, 2))
    assert rows[512 * MIB] == (16, 86, 10, 128, (8, 8))
    assert rows[64 * GIB] == (16, 86, 10, 128, (8, 2))
    assert set(PUBLISHED_SECTOR_SIZES) <= set(SNAP_CONFIGS)
    c32 = SNAP_CONFIGS[32 * GIB]
    assert (c32.random_bits_per_challenge, c32.challenges_per_digest, c32.digests_per_partition) == (26, 9, 10)
    assert c32.tree_d_low_levels == 30 - 4 - 7
    with pytest.raises(ValueError, match="sector size"):
        EmptySectorUpdateConfig.for_sector_size(64 * KIB)
    with pytest.raises(ValueError, match="do not fit"):
        EmptySectorUpdateConfig(8, 4, 1, (1,), 4)


def test_public_inputs() -> None:
    """docs/circuits.md §10: k_and_h_select = k + (h_select << pb); 32GiB partition k → k + 128 (h = 10),
    8MiB → k + 32, 2KiB → 1."""
    assert snap_public_inputs(3, 10, 7, 8, 9, 16) == [3 + 128, 7, 8, 9]
    assert snap_public_inputs(2, 10, 7, 8, 9, 4) == [2 + 32, 7, 8, 9]
    assert snap_public_inputs(0, 1, 7, 8, 9, 1) == [1, 7, 8, 9]
    assert snap_public_inputs(1, 12, 0, 0, 0, 16) == [1 + (32 << 4), 0, 0, 0]
    assert SNAP_CONFIGS[32 * GIB].public_inputs(5, 7, 1, 2, 3) == [5 + 16, 1, 2, 3]
    with pytest.raises(ValueError, match="h = 10"):
        snap_public_inputs(0, 10, 0, 0, 0, 1)
    with pytest.raises(ValueError, match="partition 4"):
        snap_public_inputs(4, 10, 0, 0, 0, 4)


def test_layout_checks() -> None:
    circuit = EmptySectorUpdateCircuit.blank(TINY)
    circuit.apex_leaves = [None]
    with pytest.raises(ValueError, match="apex leaves"):
        circuit_shape(circuit)
    circuit = EmptySectorUpdateCircuit.blank(TINY)
    circuit.challenge_proofs[0].path_r_old = [[None] * 3]
    with pytest.raises(ValueError, match="path_r_old"):
        circuit_shape(circuit)
    update = NativeUpdate.random(TINY, 1, seed=6)
    circuit = update.circuit(0)
    circuit.challenge_proofs[1].path_d_new = [*circuit.challenge_proofs[1].path_d_new[:2], [12345]]
    with pytest.raises(ValueError, match="partition"):
        synthesize_for_proving(circuit)
    circuit = update.circuit(0)
    circuit.h = None
    with pytest.raises(ValueError, match="both"):
        synthesize_for_proving(circuit)
    with pytest.raises(SynthesisError, match="assignment missing"):
        synthesize_for_proving(EmptySectorUpdateCircuit.blank(TINY))
    with pytest.raises(ValueError, match="blank"):
        EmptySectorUpdateCircuit.blank(TINY).public_inputs()
