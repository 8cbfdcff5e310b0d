"""Block compilation (cuzk.r1cs.blocks, cuzk.circuits.filecoin.blocks): an N-block circuit compiled from
its one- and two-block recordings is the circuit compiled from a full recording, array for array
(same fingerprint); circuits that are not identical blocks are refused. SnapDeals blocks also use
their own header variables (each challenge's random bits), moved block by block from a table."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from cuzk.circuits.filecoin.blocks import block_header_rows
from cuzk.circuits.filecoin.compound import blank_circuit
from cuzk.circuits.filecoin.porep import StackedCircuit
from cuzk.circuits.filecoin.post import FallbackPoStCircuit, FallbackPoStConfig
from cuzk.circuits.filecoin.shapes import KNOWN_SHAPES
from cuzk.circuits.filecoin.snap import EmptySectorUpdateCircuit, EmptySectorUpdateConfig, SnapChallengeSubset
from cuzk.errors import CuzkError
from cuzk.groth16.synthesis import compile_circuit, compile_circuit_blocks, record_circuit
from cuzk.r1cs import ConstraintSystem, LinearCombination
from cuzk.r1cs.blocks import BlockStructureError, block_layout, block_versions, compile_blocks, first_block_of
from cuzk.r1cs.compiled import CompiledCircuit, compile_matrices


@dataclass
class ToyBlocks:
    """A header (one input, two aux) and `blocks` blocks, each with its own input and aux, rows that
    mix header and own variables, B entries and coefficients other than ±1. `chained` makes each
    block use the previous block's aux (not shift-identical); `vary` gives block k a coefficient k."""

    blocks: int
    chained: bool = False
    vary: bool = False

    def synthesize(self, cs: ConstraintSystem) -> None:
        h_in = cs.alloc_input("h_in")
        h0, h1 = cs.alloc("h0"), cs.alloc("h1")
        cs.enforce("header", LinearCombination.of(h0, 3), LinearCombination.of(h1), LinearCombination.of(h_in))
        prev = h1
        for k in range(self.blocks):
            x = cs.alloc("x")
            y = cs.alloc_input("y")
            z = cs.alloc("z")
            cs.enforce("x*h0=z", LinearCombination.of(x), LinearCombination.of(h0, 5),
                       LinearCombination.of(z) + y)
            coeff = 7 + k if self.vary else 7
            cs.enforce("z*1=y", LinearCombination.of(z, coeff).add_term(prev), LinearCombination.of(cs.one),
                       LinearCombination.of(y))
            cs.enforce("empty b", LinearCombination.of(x).add_term(h_in, 2), LinearCombination(),
                       LinearCombination.of(z))
            if self.chained:
                prev = z


@dataclass
class ToyPicks:
    """A header of `picks` aux that blocks take turns on (as SnapDeals challenges take their random
    bits from the header's digests), then `blocks` blocks, block k using header aux order[k]."""

    picks: int
    order: tuple[int, ...]
    blocks: int

    def synthesize(self, cs: ConstraintSystem) -> None:
        h_in = cs.alloc_input("h_in")
        pool = [cs.alloc("pick") for _ in range(self.picks)]
        cs.enforce("header", LinearCombination.of(pool[0]), LinearCombination.of(cs.one), LinearCombination.of(h_in))
        for k in range(self.blocks):
            x = cs.alloc("x")
            cs.enforce("x*pick=h_in", LinearCombination.of(x), LinearCombination.of(pool[self.order[k]], 3),
                       LinearCombination.of(h_in))
            cs.enforce("pick+x", LinearCombination.of(pool[self.order[k]]).add_term(x, 2), LinearCombination(),
                       LinearCombination.of(x))


def _toy_pick_table(toy: ToyPicks) -> np.ndarray:
    return np.array(toy.order, dtype=np.int64)[:, None]  # the picks are aux 0.. of the header


def _compile_toy(circuit: ToyBlocks, blocks: int) -> CompiledCircuit:
    one = record_circuit(replace(circuit, blocks=1))
    two = record_circuit(replace(circuit, blocks=2))
    return compile_blocks(one, two, blocks, "toy")


@pytest.mark.parametrize("blocks", [1, 2, 3, 5])
def test_toy_blocks_equal_the_full_recording(blocks: int) -> None:
    full = compile_matrices(record_circuit(ToyBlocks(blocks)), "toy")
    got = _compile_toy(ToyBlocks(0), blocks)
    assert got.fingerprint == full.fingerprint
    for name, arr in full.arrays().items():
        assert np.array_equal(got.arrays()[name], arr) and got.arrays()[name].dtype == arr.dtype, name
    assert got.counts() == full.counts()


def test_layout_of_the_toy() -> None:
    layout = block_layout(record_circuit(ToyBlocks(1)), record_circuit(ToyBlocks(2)))
    assert (layout.header_rows, layout.header_inputs, layout.header_aux) == (1, 2, 2)
    assert (layout.block_rows, layout.block_inputs, layout.block_aux) == (3, 1, 2)
    assert layout.num_constraints(4) == 1 + 4 * 3 + 6


def test_chained_blocks_are_refused() -> None:
    with pytest.raises(BlockStructureError, match="not the first block with its own variables shifted"):
        _compile_toy(ToyBlocks(0, chained=True), 4)


def test_blocks_with_other_coefficients_are_refused() -> None:
    with pytest.raises(BlockStructureError, match="different coefficients"):
        _compile_toy(ToyBlocks(0, vary=True), 4)


def test_recordings_that_are_not_one_block_apart_are_refused() -> None:
    with pytest.raises(BlockStructureError, match="do not differ by one block"):
        compile_blocks(record_circuit(ToyBlocks(2)), record_circuit(ToyBlocks(1)), 4, "toy")
    with pytest.raises(CuzkError, match="at least one block"):
        compile_blocks(record_circuit(ToyBlocks(1)), record_circuit(ToyBlocks(2)), 0, "toy")


@pytest.mark.parametrize("blocks", [2, 3, 6])
def test_blocks_with_their_own_header_variables(blocks: int) -> None:
    toy = ToyPicks(picks=7, order=(2, 5, 0, 6, 1, 3), blocks=blocks)
    full = compile_matrices(record_circuit(toy), "picks")
    one, two = record_circuit(replace(toy, blocks=1)), record_circuit(replace(toy, blocks=2))
    got = compile_blocks(one, two, blocks, "picks", per_block_header_aux=_toy_pick_table(toy))
    assert got.fingerprint == full.fingerprint
    assert np.array_equal(got.a_aux_density_bits, full.a_aux_density_bits)  # pick 4 is never used
    with pytest.raises(BlockStructureError, match="not the first block with its own variables shifted"):
        compile_blocks(one, two, blocks, "picks")  # a fixed shift does not describe it


def test_per_block_header_tables_are_checked() -> None:
    toy = ToyPicks(picks=7, order=(2, 5, 0, 6), blocks=4)
    one, two = record_circuit(replace(toy, blocks=1)), record_circuit(replace(toy, blocks=2))
    table = _toy_pick_table(toy)
    with pytest.raises(BlockStructureError, match="not the first block"):
        compile_blocks(one, two, 4, "picks", per_block_header_aux=table[[0, 2, 1, 3]])  # block 1 is not pick 0
    with pytest.raises(CuzkError, match="at least 4 rows"):
        compile_blocks(one, two, 4, "picks", per_block_header_aux=table[:3])
    with pytest.raises(CuzkError, match="integer table"):
        compile_blocks(one, two, 4, "picks", per_block_header_aux=table.astype(float))
    with pytest.raises(BlockStructureError, match="must be header aux variables"):
        compile_blocks(one, two, 4, "picks", per_block_header_aux=table + 7)
    with pytest.raises(BlockStructureError, match="repeat"):
        compile_blocks(one, two, 4, "picks", per_block_header_aux=np.repeat(table, 2, axis=1))


#: A SnapDeals layout whose challenges take their bits from two digests (3 random bits each, 84 per
#: digest) and open no tree_d level of their own, so that 90 challenges are 0.68M rows.
_TWO_DIGESTS = EmptySectorUpdateConfig(nodes=64, partition_count=8, challenge_count=90, hs=(1,) * 6,
                                       apex_leaf_count=8)


def test_snap_challenges_across_digests() -> None:
    assert (_TWO_DIGESTS.challenges_per_digest, _TWO_DIGESTS.digests_per_partition) == (84, 2)
    circuit = EmptySectorUpdateCircuit.blank(_TWO_DIGESTS)
    full = compile_circuit(circuit, "snap-two-digests", blocks=False)
    got = compile_circuit(circuit, "snap-two-digests")  # automatic: >= 3 challenges
    assert got.fingerprint == full.fingerprint
    for name, arr in full.arrays().items():
        assert np.array_equal(got.arrays()[name], arr) and got.arrays()[name].dtype == arr.dtype, name


def test_snap_2k_block_versions() -> None:
    versions = block_versions(blank_circuit("snap-2k"))
    assert versions is not None and versions.blocks == 10 and versions.what == "challenge"
    assert versions.one is None  # cut from the two-challenge recording
    assert isinstance(versions.two, SnapChallengeSubset) and versions.two.challenges == (0, 1)
    assert versions.per_block_header_aux is not None and versions.first_block is not None
    with pytest.raises(CuzkError, match="must be recorded first"):
        versions.per_block_header_aux()
    two = record_circuit(versions.two)
    one = versions.first_block(two)
    # the cut is what recording the header with challenge 0 alone gives
    alone = record_circuit(SnapChallengeSubset(versions.two.config, (0,)))
    assert (one.num_inputs, one.num_aux) == (alone.num_inputs, alone.num_aux)
    for got, want in ((one.a, alone.a), (one.b, alone.b), (one.c, alone.c)):
        assert np.array_equal(got.row_ptr, want.row_ptr) and np.array_equal(got.cols, want.cols)
        assert np.array_equal(got.coeff_idx, want.coeff_idx) and got.num_cols == want.num_cols
    table = versions.per_block_header_aux()
    config = versions.two.config
    # 10 challenges of 6 random bits, consecutive slices of the one digest's bits
    assert table.shape == (10, config.random_bits_per_challenge) == (10, 6)
    assert np.array_equal(table, table[0, 0] + np.arange(60).reshape(10, 6))
    layout = block_layout(one, two)
    assert (layout.header_inputs, layout.block_inputs) == (5, 0)
    assert layout.num_constraints(10) == KNOWN_SHAPES["snap-2k"].num_constraints
    # the build memory estimate's header bound holds, and is tight
    assert layout.header_rows <= block_header_rows("snap-2k") < layout.header_rows * 1.01


@pytest.mark.slow  # 1.7M rows recorded whole: about 20 s on 2 cores
def test_snap_2k_equals_the_whole_recording() -> None:
    circuit = blank_circuit("snap-2k")
    full = compile_circuit(circuit, "snap-2k", blocks=False)
    assert compile_circuit_blocks(circuit, "snap-2k").fingerprint == full.fingerprint


def test_first_block_cuts_are_checked() -> None:
    toy = ToyBlocks(2)
    two = record_circuit(toy)
    cut = first_block_of(two, 4, 3, 4)  # header row + block 0's 3 rows; ONE, h_in, y; h0, h1, x, z
    assert cut.num_constraints == 4 + 3
    assert compile_blocks(cut, two, 5, "toy").fingerprint == _compile_toy(ToyBlocks(0), 5).fingerprint
    with pytest.raises(BlockStructureError, match="does not fit"):
        first_block_of(two, 10, 3, 4)
    with pytest.raises(BlockStructureError, match="uses a variable allocated after the first block"):
        first_block_of(two, 4, 3, 3)  # block 0 uses z


def test_snap_small_versions_are_checked() -> None:
    config = blank_circuit("snap-2k").config  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"challenge indices must be in 0\.\.9"):
        SnapChallengeSubset(config, (0, 10))
    with pytest.raises(ValueError, match="challenge indices"):
        SnapChallengeSubset(config, ())
    single = EmptySectorUpdateCircuit.blank(replace(config, challenge_count=1))
    assert block_versions(single) is None  # no two-challenge version with this header: recorded whole


@pytest.mark.parametrize("sectors", [3, 4, 5])
def test_post_partitions_of_several_sectors(sectors: int) -> None:
    circuit = FallbackPoStCircuit.blank(FallbackPoStConfig(2048, sectors, 3))
    full = compile_circuit(circuit, "post-toy", blocks=False)
    assert compile_circuit(circuit, "post-toy").fingerprint == full.fingerprint  # automatic: >= 3 blocks


@pytest.mark.parametrize("circuit_id", ["winning-2k", "wpost-2k"])
def test_published_post_circuits(circuit_id: str) -> None:
    circuit = blank_circuit(circuit_id)
    full = compile_circuit(circuit, circuit_id, blocks=False)
    assert compile_circuit_blocks(circuit, circuit_id).fingerprint == full.fingerprint


@pytest.mark.slow  # 2.7M / 4M rows recorded whole, then 4M rows in block versions: a minute each on 2 loaded cores
@pytest.mark.parametrize("challenges", [2, 3])  # 2: porep-2k itself; 3: more blocks than recorded
def test_porep_2k_layout(challenges: int) -> None:
    circuit = StackedCircuit.blank(replace(blank_circuit("porep-2k").config, challenges=challenges))  # type: ignore[attr-defined]
    full = compile_circuit(circuit, "porep-2k", blocks=False)
    assert compile_circuit_blocks(circuit, "porep-2k").fingerprint == full.fingerprint


def test_porep_and_post_block_versions() -> None:
    porep = block_versions(blank_circuit("porep-32g"))
    assert porep is not None and porep.blocks == 18 and porep.what == "challenge"
    assert isinstance(porep.one, StackedCircuit) and porep.one.config.challenges == 1
    assert porep.two.config.challenges == 2 and porep.two.config.layers == 11  # type: ignore[attr-defined]
    wpost = block_versions(blank_circuit("wpost-32g"))
    assert wpost is not None and wpost.blocks == 2349 and wpost.per_block_header_aux is None
    snap = block_versions(blank_circuit("snap-32g"))
    assert snap is not None and snap.blocks == 86
    with pytest.raises(CuzkError, match="not a circuit of identical blocks"):
        compile_circuit_blocks(ToyBlocks(3), "toy")


def test_block_count_of_circuit_ids() -> None:
    from cuzk.circuits.filecoin.blocks import block_count

    for circuit_id in ("porep-2k", "porep-32g", "winning-2k", "wpost-32g", "snap-2k", "snap-32g"):
        versions = block_versions(blank_circuit(circuit_id))
        assert block_count(circuit_id) == (None if versions is None else versions.blocks), circuit_id
    assert block_count("mimc-10") is None and block_count("porep-3k") is None


def test_the_store_reserves_a_block_build_estimate(tmp_path: Path) -> None:
    from cuzk.circuits.filecoin.shapes import KNOWN_SHAPES
    from cuzk.engine.compiled_store import CompiledState, CompiledStore, build_memory_estimate
    from cuzk.providers.filecoin.provider import build_size

    asked: list[int] = []

    class FullBudget:  # never fits now: the build is not started, the request is recorded
        def try_reserve(self, nbytes: int, label: str, *, evict: bool = True) -> None:
            asked.append(nbytes)

    shape = KNOWN_SHAPES["porep-32g"]
    rows, variables = shape.num_constraints, shape.num_inputs + shape.num_aux
    store = CompiledStore(tmp_path, auto_build=True, budget=FullBudget())
    status = store.ensure("porep-32g", build_size("porep-32g"))
    assert status.state is CompiledState.ABSENT and "waiting for" in (status.error or "")
    assert asked == [build_memory_estimate(rows, variables, blocks=18)]
    # three recorded challenges and the assembled arrays, not 130M recorded rows
    assert asked[0] < build_memory_estimate(rows, variables) / 2

    snap = KNOWN_SHAPES["snap-32g"]
    rows, variables = snap.num_constraints, snap.num_inputs + snap.num_aux
    store.ensure("snap-32g", build_size("snap-32g"))
    header = block_header_rows("snap-32g")
    assert 5_800_000 < header < 6_000_000 and block_header_rows("porep-32g") == block_header_rows("mimc-10") == 0
    assert asked[1] == build_memory_estimate(rows, variables, blocks=86, header_rows=header)
    # the header recorded once and three challenges, not 81M recorded rows
    assert build_memory_estimate(rows, variables, blocks=86) < asked[1] < build_memory_estimate(rows, variables) / 2


def test_parallel_recording_of_the_small_versions_gives_the_same_circuit() -> None:
    """`parallel`: the one-block version recorded in a spawned process while the two-block one is
    recorded here; the compiled circuit is the same (fingerprint) as recording one after the other."""
    circuit = StackedCircuit.blank(replace(blank_circuit("porep-2k").config, challenges=3))  # type: ignore[attr-defined]
    sequential = compile_circuit_blocks(circuit, "porep-2k")
    assert compile_circuit(circuit, "porep-2k", parallel=True).fingerprint == sequential.fingerprint


def test_the_store_records_in_parallel_only_for_large_known_circuits(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuzk.circuits.filecoin.shapes import known_constraints
    from cuzk.engine import compiled_store

    monkeypatch.setattr(compiled_store.os, "cpu_count", lambda: 16)
    parallel = [compiled_store.record_in_parallel(known_constraints(cid))
                for cid in ("porep-32g", "wpost-32g", "porep-2k", "mimc-10")]
    assert parallel == [True, True, False, False]
    monkeypatch.setattr(compiled_store.os, "cpu_count", lambda: 2)
    assert not compiled_store.record_in_parallel(known_constraints("porep-32g"))
