"""The Filecoin circuits at 2KiB through compiled files: recorded once from the blank (key-generation)
circuit, written, memory-mapped back, and evaluated on a real partition's witness, they give a, b,
c, inputs, aux and densities bit-identical to the constraint-system path.

32GiB partitions are not compiled here (block compilation of porep-32g takes ~3 minutes and 9 GB):
benchmarks/cpu/bench_compile_blocks.py checks every row of one with a generated witness, and
tests/circuits/test_porep_witness.py compares a 1-challenge 32GiB-shaped partition's witness with
WitnessCS."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cuzk.circuits.filecoin.compound import blank_circuit, sample_compound
from cuzk.circuits.filecoin.shapes import KNOWN_SHAPES
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.synthesis import compile_circuit, synthesis_code_digest, synthesize_for_proving, synthesize_witness
from cuzk.r1cs.compiled_file import load_compiled, write_compiled

FIELDS = ("a", "b", "c", "inputs", "aux", "a_aux_density", "b_input_density", "b_aux_density")


@pytest.mark.parametrize("circuit_id", [
    "winning-2k",
    "wpost-2k",
    pytest.param("snap-2k", marks=pytest.mark.slow),  # 1.7M rows: about a minute on 2 loaded cores
    pytest.param("porep-2k", marks=pytest.mark.slow),  # 2.7M rows: a few minutes
])
def test_compiled_file_gives_the_constraint_system_assignment(circuit_id: str, tmp_path: Path) -> None:
    compiled = compile_circuit(blank_circuit(circuit_id), circuit_id)
    assert compiled.shape() == KNOWN_SHAPES[circuit_id]
    path = write_compiled(compiled, tmp_path / f"{circuit_id}.cuzk-r1cs")
    del compiled
    loaded = load_compiled(path, expect_circuit_id=circuit_id, expect_code_digest=synthesis_code_digest())
    # ±1 dominate; the table stays tiny next to the entries, and a uint16 index suffices
    assert loaded.coeff_table.shape[0] < 2000 and loaded.a.coeff_idx.dtype == np.uint16
    instance = sample_compound(circuit_id, 3).instance(0)
    got = Assignment.from_compiled(loaded, synthesize_witness(instance), check=True)
    ref = Assignment.from_proving_assignment(synthesize_for_proving(instance))
    for name in FIELDS:
        x, y = getattr(ref, name), getattr(got, name)
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert np.array_equal(x, y), name
    assert got.public_inputs() == instance.public_inputs()
