"""Insecure parameters from a compiled circuit, streamed into the `.params` file: the same bytes as the
in-memory generator from a recording, and a key whose proofs an independent verifier accepts."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest

from cuzk.backends.cpu import CpuBackend
from cuzk.circuits.registry import lookup
from cuzk.errors import CuzkError
from cuzk.field.constants import R_MODULUS
from cuzk.field.fr_vec import from_montgomery
from cuzk.field.limbs import ints_to_limbs, limbs_to_ints
from cuzk.groth16 import reference_verifier
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.formats.params_file import OfficialNameError, ParamsFileWriter, read_params, vk_to_bytes, write_params
from cuzk.groth16.setup import (
    ToxicWaste,
    generate_parameters_for_matrices,
    qap_at_tau,
    qap_at_tau_compiled,
    write_insecure_parameters,
)
from cuzk.groth16.synthesis import compile_circuit, record_circuit, synthesize_witness
from cuzk.r1cs.compiled import compile_matrices

CIRCUIT = "bits-3"


@pytest.fixture(scope="module")
def recorded():
    r1cs = record_circuit(lookup(CIRCUIT).blank())
    return r1cs, compile_matrices(r1cs, CIRCUIT)


def test_qap_at_tau_matches_a_python_reference(recorded) -> None:
    """u_i(τ) = Σ_rows A[row, i]·L_row(τ) with L_row(τ) = ω^row (τ^m − 1) / (m (τ − ω^row)), in Python
    ints, against the compiled circuit's (and the recording's) vectorised evaluation."""
    r1cs, compiled = recorded
    tau = 0x1234567 * 0xABCDEF123 + 99
    got = qap_at_tau_compiled(compiled, tau)
    assert all(np.array_equal(getattr(got, n), getattr(qap_at_tau(r1cs, tau), n)) for n in ("at", "bt", "ct"))
    m, omega = got.domain.size, got.domain.omega
    tm = (pow(tau, m, R_MODULUS) - 1) % R_MODULUS
    lagrange = [pow(omega, i, R_MODULUS) * tm * pow(m * (tau - pow(omega, i, R_MODULUS)), -1, R_MODULUS) % R_MODULUS
                for i in range(r1cs.num_constraints)]
    for name, matrix in (("at", r1cs.a), ("bt", r1cs.b), ("ct", r1cs.c)):
        table = limbs_to_ints(matrix.coeff_table)
        expected = [0] * matrix.num_cols
        for row in range(matrix.num_rows):
            for k in range(matrix.row_ptr[row], matrix.row_ptr[row + 1]):
                col = int(matrix.cols[k])
                expected[col] = (expected[col] + table[matrix.coeff_idx[k]] * lagrange[row]) % R_MODULUS
        assert limbs_to_ints(from_montgomery(getattr(got, name))) == expected, name
    assert got.num_inputs == r1cs.num_inputs
    assert int(got.at.any(axis=1).sum()) == compiled.shape().a_query_len


def test_streamed_file_equals_in_memory_key(recorded, tmp_path: Path) -> None:
    r1cs, compiled = recorded
    waste = ToxicWaste.random(random.Random(5))
    expected = tmp_path / "memory.params"
    write_params(expected, generate_parameters_for_matrices(r1cs, waste))
    streamed = tmp_path / "streamed.params"
    # A backend is a multiplier: the CPU backend's default is the one cuzk params gen --backend cpu uses.
    messages: list[str] = []
    vk = write_insecure_parameters(streamed, qap_at_tau_compiled(compiled, waste.tau), waste,
                                   multiplier=CpuBackend(), progress=messages.append)
    assert streamed.read_bytes() == expected.read_bytes()
    assert vk_to_bytes(vk) == vk_to_bytes(read_params(streamed).vk)
    assert any(m.startswith("B_G2 query") for m in messages)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_streamed_key_proves_and_an_independent_verifier_accepts(recorded, tmp_path: Path) -> None:
    _, compiled = recorded
    waste = ToxicWaste.random(random.Random(6))
    path = tmp_path / "k.params"
    write_insecure_parameters(path, qap_at_tau_compiled(compiled, waste.tau), waste)
    pk = read_params(path)
    witness = synthesize_witness(lookup(CIRCUIT).example(random.Random(3)))
    inputs, aux = ints_to_limbs(witness.input_assignment), ints_to_limbs(witness.aux_assignment)
    proof = CpuBackend().prove_compiled(pk, compile_circuit(lookup(CIRCUIT).blank(), CIRCUIT), inputs, aux)
    publics = Assignment.from_compiled(compiled, (inputs, aux)).public_inputs()
    assert reference_verifier.verify(vk_to_bytes(pk.vk), proof.to_bytes(), publics)
    assert not reference_verifier.verify(vk_to_bytes(pk.vk), proof.to_bytes(), [publics[0] + 1, *publics[1:]])


def test_writer_leaves_nothing_behind_without_commit(recorded, tmp_path: Path) -> None:
    r1cs, _ = recorded
    pk = generate_parameters_for_matrices(r1cs, ToxicWaste.random(random.Random(7)))
    counts = {name: len(getattr(pk, name)) for name in ("h", "l", "a", "b_g1", "b_g2")}
    target = tmp_path / "x.params"
    with pytest.raises(RuntimeError, match="boom"), ParamsFileWriter(target, pk.vk, counts) as writer:
        writer.vector("h")[:] = pk.h.raw
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    with ParamsFileWriter(target, pk.vk, counts) as writer:
        for name in counts:
            writer.vector(name)[:] = getattr(pk, name).raw
        writer.commit()
        with pytest.raises(CuzkError, match="closed"):
            writer.vector("h")
    other = tmp_path / "y.params"
    write_params(other, pk)
    assert target.read_bytes() == other.read_bytes()


def test_writer_removes_temporaries_of_dead_writers_only(recorded, tmp_path: Path) -> None:
    import subprocess
    import sys

    r1cs, _ = recorded
    pk = generate_parameters_for_matrices(r1cs, ToxicWaste.random(random.Random(9)))
    counts = {name: len(getattr(pk, name)) for name in ("h", "l", "a", "b_g1", "b_g2")}
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    stale = tmp_path / f".x.params.tmp-{dead}"
    stale.write_bytes(b"left by a killed writer")
    live = tmp_path / f".x.params.tmp-{os.getppid()}"  # a running process (this test's parent)
    live.write_bytes(b"another writer at work")
    with ParamsFileWriter(tmp_path / "x.params", pk.vk, counts):
        assert not stale.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name]


def test_writer_refuses_official_names_and_bad_counts(recorded, tmp_path: Path) -> None:
    r1cs, _ = recorded
    pk = generate_parameters_for_matrices(r1cs, ToxicWaste.random(random.Random(8)))
    counts = {name: len(getattr(pk, name)) for name in ("h", "l", "a", "b_g1", "b_g2")}
    with pytest.raises(OfficialNameError):
        ParamsFileWriter(tmp_path / "v28-x.params", pk.vk, counts)
    with pytest.raises(ValueError, match="missing: b_g2"):
        ParamsFileWriter(tmp_path / "x.params", pk.vk, {k: v for k, v in counts.items() if k != "b_g2"})
    with pytest.raises(CuzkError, match="u32 length"):
        ParamsFileWriter(tmp_path / "x.params", pk.vk, {**counts, "h": 1 << 32})
    assert list(tmp_path.iterdir()) == []
