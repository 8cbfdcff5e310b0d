"""The StackedDRG PoRep C2 circuit: stated row counts (docs/circuits.md §6), public-input order
(docs/circuits.md §6) and satisfiability on a consistent witness built here from native SHA-256 and Poseidon."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import pytest

from cuzk.circuits.filecoin.porep import (
    BASE_DEGREE,
    EXP_DEGREE,
    PRODUCTION_CONFIGS,
    ChallengeProof,
    ColumnOpening,
    StackedCircuit,
    StackedConfig,
    porep_public_inputs,
)
from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.gadgets.por import NativeTree
from cuzk.groth16.synthesis import circuit_shape, synthesize_for_proving
from cuzk.hashes.poseidon import hash_column, hash_merkle

FR32_MASK = (1 << 254) - 1

Challenge = tuple[int, list[int], list[int]]


# -- a consistent witness -----------------------------------------------------------------------

def native_label(replica_id: int, layer: int, node: int, parents: Sequence[int]) -> int:
    """docs/circuits.md §5: fr32(SHA256(replica_id ‖ layer u32 BE ‖ node u64 BE ‖ 20 zero bytes ‖ 37 parents))."""
    preimage = (replica_id.to_bytes(32, "little") + layer.to_bytes(4, "big") + node.to_bytes(8, "big") + bytes(20)
                + b"".join(p.to_bytes(32, "little") for p in parents))
    return int.from_bytes(hashlib.sha256(preimage).digest(), "little") & FR32_MASK


def build_witness(config: StackedConfig, challenges: Sequence[Challenge], seed: int) -> StackedCircuit:
    """Random data and labels, except that each challenged node's labels are the hashes of its
    (freely chosen) parents' labels; trees and commitments computed from those.

    Parents must not be challenged nodes: a challenged node's labels are rewritten here, which would
    invalidate labels already derived from it.
    """
    challenged = {c for c, _, _ in challenges}
    assert not challenged & {p for _, d, e in challenges for p in (*d, *e)}
    rng = random.Random(seed)
    n, layers = config.nodes, config.layers
    replica_id = rng.getrandbits(254)
    data = [rng.getrandbits(254) for _ in range(n)]
    labels = [[rng.getrandbits(254) for _ in range(n)] for _ in range(layers)]  # labels[layer - 1][node]
    for c, drg, exp in challenges:
        for layer in range(1, layers + 1):
            parents = [labels[layer - 1][p] for p in drg]
            if layer > 1:
                parents += [labels[layer - 2][p] for p in exp]
                expanded = parents * 2 + parents[:9]
            else:
                expanded = parents * 6 + parents[:1]
            labels[layer - 1][c] = native_label(replica_id, layer, c, expanded)

    def column(node: int) -> list[int]:
        return [labels[layer][node] for layer in range(layers)]

    tree_d = NativeTree(config.tree_d, data)
    tree_c = NativeTree(config.tree_c, [hash_column(column(v)) for v in range(n)])
    tree_r = NativeTree(config.tree_c, [(labels[-1][v] + data[v]) % R_MODULUS for v in range(n)])
    proofs = [
        ChallengeProof(
            challenge=c,
            data_leaf=data[c],
            comm_d_path=tree_d.path(c),
            drg_parents=[ColumnOpening(column(p), tree_c.path(p)) for p in drg],
            exp_parents=[ColumnOpening(column(p), tree_c.path(p)) for p in exp],
            comm_r_last_path=tree_r.path(c),
            comm_c_path=tree_c.path(c),
        )
        for c, drg, exp in challenges
    ]
    return StackedCircuit(config, replica_id, tree_d.root, hash_merkle(2, [tree_c.root, tree_r.root]),
                          tree_r.root, tree_c.root, proofs)


def _random_challenges(config: StackedConfig, challenged: Sequence[int], seed: int) -> list[Challenge]:
    rng = random.Random(seed)
    pool = [v for v in range(config.nodes) if v not in challenged]
    return [(c, [rng.choice(pool) for _ in range(BASE_DEGREE)], [rng.choice(pool) for _ in range(EXP_DEGREE)])
            for c in challenged]


# -- satisfiability and public inputs -------------------------------------------------------------

def _check_satisfied(config: StackedConfig, challenged: Sequence[int], seed: int, rows: int) -> None:
    challenges = _random_challenges(config, challenged, seed)
    circuit = build_witness(config, challenges, seed)
    cs = synthesize_for_proving(circuit, check=True)
    assert cs.input_assignment[0] == 1
    expected = porep_public_inputs(circuit.replica_id, circuit.comm_d, circuit.comm_r, challenges)  # type: ignore[arg-type]
    assert cs.input_assignment[1:] == expected
    assert len(expected) == config.num_public_inputs
    assert cs.num_constraints == rows + cs.num_inputs


def test_satisfied_two_challenges_base_8() -> None:
    """8 nodes, 2 layers, 2 challenges, tree_c/tree_r one arity-8 level: every row checked.

    Rows: the 571 top-level rows once, the per-challenge rows of the stated 1-challenge circuit twice."""
    _check_satisfied(StackedConfig(8, 2, 2, 8), [5, 2], seed=1, rows=571 + 2 * (1_199_620 - 571))


@pytest.mark.slow
def test_satisfied_top_tree_8_4_2() -> None:
    """64 nodes with sub (4) and top (2) levels: path bits cross base trees."""
    _check_satisfied(StackedConfig(64, 2, 1, 8, 4, 2), [45], seed=2, rows=1_346_982)


def test_wrong_witness_fails_early() -> None:
    config = StackedConfig(8, 2, 1, 8)
    circuit = build_witness(config, _random_challenges(config, [3], 3), 3)
    circuit.comm_r = (circuit.comm_r + 1) % R_MODULUS  # type: ignore[operator]
    with pytest.raises(SynthesisError, match="comm_r"):
        synthesize_for_proving(circuit, check=True)
    circuit = build_witness(config, _random_challenges(config, [3], 3), 3)
    circuit.proofs[0].data_leaf += 1  # type: ignore[operator]
    with pytest.raises(SynthesisError, match="root"):
        synthesize_for_proving(circuit, check=True)


# -- public inputs ---------------------------------------------------------------------------------

def test_public_inputs_of_the_2kib_regression_record() -> None:
    """docs/circuits.md §13's derived order for a real 2KiB record (challenges 57 and 58)."""
    challenges = [(57, [56, 56, 48, 50, 42, 55], [46, 41, 13, 46, 44, 31, 3, 15]),
                  (58, [57, 45, 11, 54, 56, 57], [51, 52, 38, 18, 33, 8, 54, 40])]
    inputs = porep_public_inputs(1, 2, 3, challenges)
    assert inputs[:3] == [1, 2, 3]
    assert inputs[3:] == [57, 56, 56, 48, 50, 42, 55, 46, 41, 13, 46, 44, 31, 3, 15, 57, 57, 57,
                          58, 57, 45, 11, 54, 56, 57, 51, 52, 38, 18, 33, 8, 54, 40, 58, 58, 58]
    assert len(inputs) == PRODUCTION_CONFIGS[2048].num_public_inputs == 39
    with pytest.raises(ValueError, match="DRG"):
        porep_public_inputs(1, 2, 3, [(5, [1] * 5, [1] * 8)])


def test_production_configs() -> None:
    assert [(c.nodes, c.layers, c.challenges, c.tree_c.arities[-2:]) for c in PRODUCTION_CONFIGS.values()] == [
        (64, 2, 2, (8, 8)), (1 << 18, 2, 2, (8, 8)), (1 << 24, 2, 2, (8, 8)), (1 << 30, 11, 18, (8, 8)),
        (1 << 31, 11, 18, (8, 2)),
    ]
    assert PRODUCTION_CONFIGS[32 << 30].num_public_inputs == 327
    with pytest.raises(ValueError, match="sector size"):
        StackedConfig.production(4096)


def test_layout_checks() -> None:
    with pytest.raises(ValueError, match="layers"):
        StackedConfig(8, 3, 1, 8)
    config = StackedConfig(8, 2, 1, 8)
    circuit = StackedCircuit.blank(config)
    circuit.proofs[0].drg_parents = circuit.proofs[0].drg_parents[:5]
    with pytest.raises(ValueError, match="DRG"):
        circuit_shape(circuit)
    circuit = StackedCircuit.blank(config)
    circuit.proofs[0].exp_parents[2].values = [None]
    with pytest.raises(ValueError, match="rows"):
        circuit_shape(circuit)
    circuit = StackedCircuit.blank(config)
    circuit.proofs = []
    with pytest.raises(ValueError, match="challenges"):
        circuit_shape(circuit)


def test_blank_circuit_cannot_be_proven() -> None:
    with pytest.raises(SynthesisError, match="assignment missing"):
        synthesize_for_proving(StackedCircuit.blank(StackedConfig(8, 2, 1, 8)))


# -- stated row counts (storage-proofs-porep/tests/stacked_circuit.rs; docs/circuits.md §6) ----------

STACKED_STATED = [
    (StackedConfig(8, 2, 1, 2), 1_206_212),
    (StackedConfig(8, 2, 1, 8), 1_199_620),
    (StackedConfig(32, 2, 1, 8, 4), 1_296_576),
    (StackedConfig(64, 2, 1, 8, 4, 2), 1_346_982),
]


@pytest.mark.slow
@pytest.mark.parametrize(("config", "rows"), STACKED_STATED, ids=["base-2", "base-8", "8-4", "8-4-2"])
def test_stacked_test_circuit_counts(config: StackedConfig, rows: int) -> None:
    shape = circuit_shape(StackedCircuit.blank(config))
    assert shape.num_inputs == 22
    assert shape.num_constraints - shape.num_inputs == rows


@pytest.mark.slow
def test_2kib_production_count() -> None:
    """2KiB: 2,687,921 rows before the generator's 40 input rows; 40 inputs including ONE."""
    shape = circuit_shape(StackedCircuit.blank(StackedConfig.production(2048)))
    assert shape.num_inputs == 40
    assert shape.num_constraints == 2_687_921 + 40
