"""The Fallback PoSt circuit: stated row counts (docs/circuits.md §9, storage-proofs-post's
tests/fallback_circuit.rs), satisfiability on witnesses built here from native Poseidon trees, and
public inputs equal to what the circuit exposes, with leaf challenges derived as in docs/circuits.md §9."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import pytest

from cuzk.circuits.filecoin.post import (
    WINDOW_POST_CONFIGS,
    WINNING_POST_CONFIGS,
    FallbackPoStCircuit,
    FallbackPoStConfig,
    PoStSector,
    post_public_inputs,
)
from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.gadgets.por import NativeTree
from cuzk.groth16.synthesis import circuit_shape, synthesize_for_proving
from cuzk.hashes.poseidon import hash_merkle

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


# -- native helpers (docs/circuits.md §9) -------------------------------------------------------------

def leaf_challenge(randomness: int, sector_id: int, challenge_index: int, nodes: int) -> int:
    """u64 LE of SHA256(randomness ‖ sector_id u64 LE ‖ challenge_index u64 LE)[:8] mod nodes."""
    digest = hashlib.sha256(randomness.to_bytes(32, "little") + sector_id.to_bytes(8, "little")
                            + challenge_index.to_bytes(8, "little")).digest()
    return int.from_bytes(digest[:8], "little") % nodes


def sector_challenges(config: FallbackPoStConfig, randomness: int, sector_id: int, sector_index: int,
                      v1_2: bool) -> list[int]:
    """V1_0_0/V1_1_0 index challenges by sector_index·count + n, V1_2_0 by n."""
    count = config.challenge_count
    base = 0 if v1_2 else sector_index * count
    return [leaf_challenge(randomness, sector_id, base + n, config.nodes) for n in range(count)]


class NativeSector:
    """A random replica tree, a random comm_c and the resulting comm_r."""

    def __init__(self, config: FallbackPoStConfig, rng: random.Random) -> None:
        self.tree = NativeTree(config.tree_r, [rng.randrange(R_MODULUS) for _ in range(config.nodes)])
        self.comm_c = rng.randrange(R_MODULUS)
        self.comm_r = hash_merkle(2, [self.comm_c, self.tree.root])

    def witness(self, challenges: Sequence[int]) -> PoStSector:
        return PoStSector(self.comm_r, self.comm_c, self.tree.root, [self.tree.levels[0][c] for c in challenges],
                          [self.tree.path(c) for c in challenges])


def _rows(config: FallbackPoStConfig) -> tuple[int, int]:
    """(rows before the generator's per-input rows, inputs including ONE) of the blank circuit."""
    shape = circuit_shape(FallbackPoStCircuit.blank(config))
    return shape.num_constraints - shape.num_inputs, shape.num_inputs


# -- stated counts ------------------------------------------------------------------------------------

#: fallback_circuit.rs: 64 leaves per base tree, 5 challenges per sector (the "smaller" variants
#: prove fewer real sectors with the same circuit, hence the same counts).
TEST_CIRCUITS = [
    (FallbackPoStConfig(64 * 32, 3, 5), 19, 16_869),
    (FallbackPoStConfig(256 * 32, 3, 5, 8, 4), 19, 22_674),
    (FallbackPoStConfig(512 * 32, 3, 5, 8, 4, 2), 19, 27_384),
    (FallbackPoStConfig(64 * 32, 2, 5), 13, 11_246),
]


@pytest.mark.parametrize(("config", "inputs", "rows"), TEST_CIRCUITS, ids=["base-8", "8-4", "8-4-2", "two-partitions"])
def test_fallback_circuit_test_counts(config: FallbackPoStConfig, inputs: int, rows: int) -> None:
    assert _rows(config) == (rows, inputs)
    assert config.num_public_inputs + 1 == inputs


def _per_sector(size: int, base: int, sub: int, top: int) -> tuple[int, int]:
    """Rows of one sector with 1 challenge, and the extra rows of each further challenge."""
    one = _rows(FallbackPoStConfig(size, 1, 1, base, sub, top))[0]
    two = _rows(FallbackPoStConfig(size, 1, 2, base, sub, top))[0]
    return one, two - one


def test_bench_cs_count_32gib_base_8() -> None:
    """fallback_circuit.rs's ignored BenchCS test: 32GiB, tree 8-0-0 (10 arity-8 levels), 5 sectors
    × 10 challenges = 266,665. Counted on one sector (sectors are identical sub-circuits, which the
    multi-sector test counts above confirm) to keep 500 Poseidon hashes out of the test run."""
    one, inc = _per_sector(32 * GIB, 8, 0, 0)
    assert (one, inc) == (313 + 5_302, 5_302)
    assert 5 * (one + 9 * inc) == 266_665


@pytest.mark.slow
def test_winning_2kib_production_count() -> None:
    """docs/circuits.md §9: 66 sectors × 1 challenge, 90,750 rows and 133 inputs including ONE."""
    assert WINNING_POST_CONFIGS[2 * KIB] == FallbackPoStConfig.winning(2 * KIB)
    assert _rows(FallbackPoStConfig.winning(2 * KIB)) == (90_750, 133)


def test_window_2kib_production_count() -> None:
    """docs/circuits.md §9: 2 sectors × 10 challenges, 21,866 rows and 23 inputs including ONE."""
    assert _rows(FallbackPoStConfig.window(2 * KIB)) == (21_866, 23)


#: docs/circuits.md §9 table: size → (Winning rows, Window rows, Window inputs incl ONE); 32/64GiB Window stated.
PRODUCTION = {
    8 * MIB: (230_670, 64_266, 23),
    512 * MIB: (300_630, 85_466, 23),
    32 * GIB: (370_590, 125_279_217, 25_840),
    64 * GIB: (391_314, 129_887_900, 25_301),
}


@pytest.mark.slow
@pytest.mark.parametrize("size", list(PRODUCTION), ids=["8MiB", "512MiB", "32GiB", "64GiB"])
def test_production_counts_from_one_sector(size: int) -> None:
    """Other sizes, from real counts of a one-sector circuit of the production tree shape:
    Winning = 66 × (1 sector, 1 challenge); Window = sectors × (1 sector, 10 challenges)."""
    winning, window = FallbackPoStConfig.winning(size), FallbackPoStConfig.window(size)
    one, inc = _per_sector(size, window.base_arity, window.sub_arity, window.top_arity)
    winning_rows, window_rows, window_inputs = PRODUCTION[size]
    assert winning.sector_count * one == winning_rows
    assert window.sector_count * (one + (window.challenge_count - 1) * inc) == window_rows
    assert winning.num_public_inputs + 1 == 133
    assert window.num_public_inputs + 1 == window_inputs


def test_production_configs() -> None:
    assert [(c.sector_count, c.challenge_count) for c in WINNING_POST_CONFIGS.values()] == [(66, 1)] * 5
    assert [(c.sector_count, c.challenge_count) for c in WINDOW_POST_CONFIGS.values()] == [
        (2, 10), (2, 10), (2, 10), (2349, 10), (2300, 10)]
    assert [c.tree_r.arities for c in WINDOW_POST_CONFIGS.values()] == [
        (8, 8), (8,) * 6, (8,) * 8, (8,) * 10, (8,) * 9 + (8, 2)]
    with pytest.raises(ValueError, match="sector size"):
        FallbackPoStConfig.window(4 * KIB)
    with pytest.raises(ValueError, match="leaves"):
        FallbackPoStConfig(100 * 32, 1, 1)


# -- satisfiability and public inputs -----------------------------------------------------------------

def _prove(circuit: FallbackPoStCircuit, expected_inputs: list[int], rows: int) -> None:
    cs = synthesize_for_proving(circuit, check=True)
    assert cs.input_assignment[0] == 1
    assert cs.input_assignment[1:] == expected_inputs
    assert cs.num_constraints == rows + cs.num_inputs


def test_window_2kib_one_real_sector_repeated() -> None:
    """Production 2KiB WindowPoSt partition with one real sector (V1_2_0 challenge indexing): the
    witness and the public inputs repeat it to fill the 2 slots."""
    config = FallbackPoStConfig.window(2 * KIB)
    rng = random.Random(7)
    sector = NativeSector(config, rng)
    randomness = rng.getrandbits(254)
    challenges = sector_challenges(config, randomness, 1234, 0, v1_2=True)
    witness = sector.witness(challenges)
    expected = post_public_inputs([(sector.comm_r, challenges)], config.sector_count)
    assert expected == [sector.comm_r, *challenges] * 2
    _prove(FallbackPoStCircuit(config, [witness, witness]), expected, 21_866)


def test_second_partition_top_tree_8_4_2() -> None:
    """Five public sectors, 3 per partition, V1_1_0 indexing (by position): partition 1 proves
    sectors 3 and 4 and repeats sector 4; paths cross sub and top levels."""
    config = FallbackPoStConfig(512 * 32, 3, 2, 8, 4, 2)
    rng = random.Random(8)
    randomness = rng.getrandbits(254)
    ids = [100 + i for i in range(5)]
    natives = {i: NativeSector(config, rng) for i in (3, 4)}
    public = []
    for i, sector_id in enumerate(ids):
        comm_r = natives[i].comm_r if i in natives else rng.randrange(R_MODULUS)
        public.append((comm_r, sector_challenges(config, randomness, sector_id, i, v1_2=False)))
    witnesses = [natives[i].witness(public[i][1]) for i in (3, 4)]
    expected = post_public_inputs(public, config.sector_count, k=1)
    assert expected == [x for i in (3, 4, 4) for x in (public[i][0], *public[i][1])]
    _prove(FallbackPoStCircuit(config, [*witnesses, witnesses[-1]]), expected, 3 * (313 + 2 * 1_763))


def test_wrong_witness_fails() -> None:
    config = FallbackPoStConfig(64 * 32, 1, 2)
    rng = random.Random(9)
    sector = NativeSector(config, rng)
    witness = sector.witness([5, 60])
    witness.comm_r = (witness.comm_r + 1) % R_MODULUS  # type: ignore[operator]
    with pytest.raises(SynthesisError, match="comm_r"):
        synthesize_for_proving(FallbackPoStCircuit(config, [witness]), check=True)
    witness = sector.witness([5, 60])
    witness.leaves = [witness.leaves[0], (witness.leaves[1] + 1) % R_MODULUS]  # type: ignore[operator]
    with pytest.raises(SynthesisError, match="root"):
        synthesize_for_proving(FallbackPoStCircuit(config, [witness]), check=True)


def test_winning_public_inputs() -> None:
    """WinningPoSt lists its one sector 66 times; V1_0_0 indexes challenge i of "sector" i as i."""
    config = FallbackPoStConfig.winning(2 * KIB)
    randomness, sector_id, comm_r = 5, 77, 99
    public = [(comm_r, sector_challenges(config, randomness, sector_id, i, v1_2=False)) for i in range(66)]
    inputs = post_public_inputs(public, config.sector_count)
    assert len(inputs) == config.num_public_inputs == 132
    assert inputs[1::2] == [leaf_challenge(randomness, sector_id, i, 64) for i in range(66)]
    assert inputs[0::2] == [comm_r] * 66


def test_public_inputs_errors_and_layout_checks() -> None:
    with pytest.raises(ValueError, match="partition 2"):
        post_public_inputs([(1, [2])] * 4, 2, k=2)
    with pytest.raises(ValueError, match="challenges"):
        post_public_inputs([(1, [2]), (3, [4, 5])], 2)
    config = FallbackPoStConfig(64 * 32, 2, 1)
    circuit = FallbackPoStCircuit.blank(config)
    circuit.sectors = circuit.sectors[:1]
    with pytest.raises(ValueError, match="sectors"):
        circuit_shape(circuit)
    circuit = FallbackPoStCircuit.blank(config)
    circuit.sectors[1].paths = [config.tree_r.blank_path()[:1]]
    with pytest.raises(ValueError, match="levels"):
        circuit_shape(circuit)
    with pytest.raises(SynthesisError, match="assignment missing"):
        synthesize_for_proving(FallbackPoStCircuit.blank(config))
