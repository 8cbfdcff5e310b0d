"""Block compilation (cuzk.r1cs.blocks, cuzk.circuits.filecoin.blocks): an N-block circuit compiled from
its one- and two-block recordings is the circuit compiled from a full recording, array for array
(same fingerprint); circuits that are not identical blocks are refused."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from cuzk.circuits.filecoin.blocks import block_versions
from cuzk.circuits.filecoin.compound import blank_circuit
from cuzk.circuits.filecoin.porep import StackedCircuit
from cuzk.circuits.filecoin.post import FallbackPoStCircuit, FallbackPoStConfig
from cuzk.errors import CuzkError
from cuzk.groth16.synthesis import compile_circuit, compile_circuit_blocks, record_circuit
from cuzk.r1cs import ConstraintSystem, LinearCombination
from cuzk.r1cs.blocks import BlockStructureError, block_layout, compile_blocks
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


def test_porep_block_versions_and_snap_is_not_block_shaped() -> None:
    porep = block_versions(blank_circuit("porep-32g"))
    assert porep is not None and porep.blocks == 18 and porep.what == "challenge"
    assert isinstance(porep.one, StackedCircuit) and porep.one.config.challenges == 1
    assert porep.two.config.challenges == 2 and porep.two.config.layers == 11  # type: ignore[attr-defined]
    wpost = block_versions(blank_circuit("wpost-32g"))
    assert wpost is not None and wpost.blocks == 2349
    assert block_versions(blank_circuit("snap-2k")) is None
    with pytest.raises(CuzkError, match="not a circuit of identical blocks"):
        compile_circuit_blocks(ToyBlocks(3), "toy")


def test_block_count_of_circuit_ids() -> None:
    from cuzk.circuits.filecoin.blocks import block_count

    for circuit_id in ("porep-2k", "porep-32g", "winning-2k", "wpost-32g", "snap-2k"):
        versions = block_versions(blank_circuit(circuit_id))
        assert block_count(circuit_id) == (None if versions is None else versions.blocks), circuit_id
    assert block_count("mimc-10") is None and block_count("porep-3k") is None


def test_the_store_reserves_a_block_build_estimate(tmp_path: Path) -> None:
    from cuzk.engine.compiled_store import CompiledState, CompiledStore, build_memory_estimate
    from cuzk.engine.filecoin_providers import KNOWN_SHAPES

    asked: list[int] = []

    class FullBudget:  # never fits now: the build is not started, the request is recorded
        def try_reserve(self, nbytes: int, label: str, *, evict: bool = True) -> None:
            asked.append(nbytes)

    shape = KNOWN_SHAPES["porep-32g"]
    rows, variables = shape.num_constraints, shape.num_inputs + shape.num_aux
    store = CompiledStore(tmp_path, auto_build=True, budget=FullBudget())
    status = store.ensure("porep-32g", num_constraints=rows, num_variables=variables)
    assert status.state is CompiledState.ABSENT and "waiting for" in (status.error or "")
    assert asked == [build_memory_estimate(rows, variables, blocks=18)]
    # three recorded challenges and the assembled arrays, not 130M recorded rows
    assert asked[0] < build_memory_estimate(rows, variables) / 2
