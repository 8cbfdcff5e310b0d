"""Compiled circuits: the sparse-product path gives exactly the ProvingAssignment result, the
coefficient table and kernels are right, and compiled files round-trip and refuse corruption."""

from __future__ import annotations

import json
import os
import random
import struct
from pathlib import Path

import numpy as np
import pytest

from cuzk.circuits.examples import BitsCircuit, MimcCircuit
from cuzk.errors import SynthesisError
from cuzk.field.constants import FR_MONT_R, R_MODULUS
from cuzk.field.fr_vec import from_montgomery, to_montgomery
from cuzk.field.limbs import ints_to_limbs, limbs_to_ints
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.synthesis import (
    compile_circuit,
    record_circuit,
    synthesis_code_digest,
    synthesize_compiled,
    synthesize_for_proving,
    synthesize_witness,
)
from cuzk.r1cs import ONE, ConstraintSystem, LinearCombination, lc
from cuzk.r1cs.compiled import CompiledMismatchError, compile_matrices
from cuzk.r1cs.compiled_file import (
    FORMAT_VERSION,
    MAGIC,
    CompiledFileError,
    load_compiled,
    read_header,
    write_compiled,
)
from cuzk.r1cs.spmv import COEFF_MINUS_ONE, COEFF_ONE, check_rows, spmv3_table, spmv_table, spmv_table_transpose

FIELDS = ("a", "b", "c", "inputs", "aux", "a_aux_density", "b_input_density", "b_aux_density")


def assert_identical(ref: Assignment, got: Assignment) -> None:
    for name in FIELDS:
        x, y = getattr(ref, name), getattr(got, name)
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert np.array_equal(x, y), f"{name} differs at {np.flatnonzero(np.any(np.atleast_2d(x != y), axis=-1))[:5]}"


class Awkward:
    """Every corner ProvingAssignment handles: inputs allocated between constraints, repeated and
    cancelling terms (dense although the sum is 0), zero coefficients (not dense), inputs in B,
    constant-only and empty combinations, large random coefficients. Unsatisfiable on purpose:
    the compiled path must reproduce rows as evaluated, not as hoped."""

    def __init__(self, seed: int | None) -> None:
        self.seed = seed

    def value(self, name: str) -> int | None:
        return None if self.seed is None else random.Random(f"{self.seed}/{name}").randrange(R_MODULUS)

    def synthesize(self, cs: ConstraintSystem) -> None:
        coeff = random.Random(99)  # coefficients are part of the shape: fixed, whatever the witness
        x = cs.alloc("x", self.value("x"))
        y = cs.alloc("y", lambda: self.value("y"))
        unused = cs.alloc("unused", self.value("unused"))
        p = cs.alloc_input("p", self.value("p"))
        cs.enforce("repeats", lc(x, x, (y, 5)), lc(ONE, p), lc(x) - x)
        z = cs.alloc("z", self.value("z"))
        q = cs.alloc_input("q", self.value("q"))
        cs.enforce("zero coeffs", LinearCombination([(z, 0), (x, 1)]), LinearCombination([(y, 0), (z, 0)]),
                   LinearCombination.constant(7))
        cs.enforce("empty", LinearCombination(), LinearCombination(), LinearCombination())
        big = [coeff.randrange(R_MODULUS) for _ in range(6)]
        cs.enforce("big", lc((x, big[0]), (q, big[1]), (z, big[2])), lc((y, big[3]), (p, big[4])),
                   lc((unused, 0), (z, big[5]), (ONE, R_MODULUS - 1)))
        cs.enforce("minus", lc(ONE) - y - y, lc(q), lc((z, 2), (z, R_MODULUS - 2)))


def reference(circuit: object) -> Assignment:
    return Assignment.from_proving_assignment(synthesize_for_proving(circuit))


@pytest.mark.parametrize("circuit_id, blank, instance", [
    ("mimc-10", MimcCircuit.with_total_constraints(1 << 10), MimcCircuit.with_total_constraints(1 << 10, 12345)),
    ("bits-3", BitsCircuit.blank(3), BitsCircuit.random(3, random.Random(4))),
    ("awkward", Awkward(None), Awkward(1)),
])
def test_compiled_path_is_bit_identical_to_the_constraint_system(circuit_id: str, blank: object,
                                                                  instance: object) -> None:
    compiled = compile_circuit(blank, circuit_id)
    got = Assignment.from_compiled(compiled, synthesize_witness(instance), check=False)
    assert_identical(reference(instance), got)
    assert compiled.code_digest == synthesis_code_digest()


def test_awkward_densities_follow_proving_assignment_rules() -> None:
    compiled = compile_circuit(Awkward(None), "awkward")
    # aux: x, y, unused, z. A: x and y (repeats), z (big; its zero-coefficient term does not count);
    # unused only ever has a zero coefficient.
    assert compiled.a_aux_density.tolist() == [True, True, False, True]
    # B: y (big, not its zero term), z only with coefficient 0; inputs ONE, p (repeats), q (minus).
    assert compiled.b_aux_density.tolist() == [False, True, False, False]
    assert compiled.b_input_density.tolist() == [True, True, True]
    shape = compiled.shape()
    assert (shape.num_inputs, shape.num_aux, shape.num_constraints) == (3, 4, 5 + 3)
    assert shape.a_input_density == 3  # every input, through the input rows


def test_synthesize_compiled_checks_rows() -> None:
    circuit = MimcCircuit.with_total_constraints(64, 5)
    compiled = compile_circuit(MimcCircuit.with_total_constraints(64), "mimc-6")
    assert_identical(reference(circuit), synthesize_compiled(circuit, compiled))
    with pytest.raises(SynthesisError, match=r"constraints are not satisfied by the witness \(rows 0"):
        synthesize_compiled(Awkward(2), compile_circuit(Awkward(None), "awkward"))


def test_products_in_parts_are_the_whole_products_each_part_after_its_ready() -> None:
    circuit = MimcCircuit.with_total_constraints(64, 5)
    compiled = compile_circuit(MimcCircuit.with_total_constraints(64), "mimc-6")
    witness = synthesize_witness(circuit)
    inputs, aux = ints_to_limbs(witness.input_assignment), ints_to_limbs(witness.aux_assignment)
    rows = compiled.num_constraints
    outs = tuple(np.zeros((rows, 4), dtype=np.uint64) for _ in range(3))
    calls: list[tuple[int, int]] = []

    def ready(end: int) -> None:  # nothing at or past the last part's end is written yet
        written = next((r for r in range(rows - 1, -1, -1) if outs[2][r].any() or outs[0][r].any()), -1)
        calls.append((end, written))

    got = compiled.evaluate(inputs, aux, outs, check=True, ready=ready, part_rows=10)
    want = compiled.evaluate(inputs, aux, check=True)
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    assert [end for end, _ in calls] == [min(rows, k + 10) for k in range(0, rows, 10)]
    starts = [0] + [end for end, _ in calls[:-1]]
    assert all(written < start for start, (_, written) in zip(starts, calls, strict=True))
    # An unsatisfied row is named by its row in the circuit, not in its part.
    bad_aux = aux.copy()
    bad_aux[-1, 0] ^= 1
    bad_rows = check_rows(*compiled.evaluate(inputs, bad_aux))
    assert bad_rows.size and bad_rows[0] >= 10
    with pytest.raises(SynthesisError, match=rf"\(rows {bad_rows[0]}"):
        compiled.evaluate(inputs, bad_aux, check=True, ready=lambda end: None, part_rows=10)


def test_witness_arrays_are_accepted_when_canonical() -> None:
    circuit = BitsCircuit.random(2, random.Random(9))
    compiled = compile_circuit(BitsCircuit.blank(2), "bits-2")
    witness = synthesize_witness(circuit)
    inputs, aux = ints_to_limbs(witness.input_assignment), ints_to_limbs(witness.aux_assignment)
    assert_identical(reference(circuit), Assignment.from_compiled(compiled, (inputs, aux)))
    aux[4] = ints_to_limbs([R_MODULUS - 1])[0] + np.array([2, 0, 0, 0], dtype=np.uint64)  # r + 1
    with pytest.raises(ValueError, match=r"witness aux\[4\] is not a canonical field element"):
        Assignment.from_compiled(compiled, (inputs, aux))


def test_a_witness_of_another_circuit_is_refused() -> None:
    compiled = compile_circuit(MimcCircuit.with_total_constraints(64), "mimc-6")
    with pytest.raises(CompiledMismatchError,
                       match="has 2 inputs, 62 aux variables and 64 constraints; the witness has 2, 126 and 128"):
        synthesize_compiled(MimcCircuit.with_total_constraints(128, 5), compiled)


def test_coefficient_table_is_compact_with_one_and_minus_one_first() -> None:
    matrices = record_circuit(BitsCircuit.blank(2))
    compiled = compile_matrices(matrices, "bits-2")
    table = limbs_to_ints(compiled.coeff_table)
    canonical = [v * pow(FR_MONT_R, -1, R_MODULUS) % R_MODULUS for v in table]
    assert canonical[COEFF_ONE] == 1 and canonical[COEFF_MINUS_ONE] == R_MODULUS - 1
    assert len(set(canonical)) == len(canonical)
    recorded = set(limbs_to_ints(np.concatenate([matrices.a.coeffs, matrices.b.coeffs, matrices.c.coeffs])))
    assert set(canonical[2:]) == recorded - {1, R_MODULUS - 1}
    # bit packing uses powers of two: a few hundred distinct values for thousands of entries
    assert compiled.coeff_table.shape[0] < 300 < compiled.nnz
    assert compiled.a.coeff_idx.dtype == np.uint16 and compiled.a.cols.dtype == np.uint32
    assert compiled.a.row_ptr.dtype == np.uint32
    for mat, rec in ((compiled.a, matrices.a), (compiled.b, matrices.b), (compiled.c, matrices.c)):
        assert limbs_to_ints(rec.coeffs) == [canonical[i] for i in mat.coeff_idx]
        assert np.array_equal(mat.cols, rec.cols) and np.array_equal(mat.row_ptr, rec.row_ptr)


class ManyCoefficients:
    """One row with more distinct coefficients than a uint16 index can name."""

    def __init__(self, n: int, seed: int | None) -> None:
        self.n = n
        self.seed = seed

    def synthesize(self, cs: ConstraintSystem) -> None:
        rng = random.Random(self.seed)
        xs = [cs.alloc(f"x{i}", None if self.seed is None else rng.randrange(R_MODULUS)) for i in range(8)]
        coeff = random.Random(0)
        row = LinearCombination([(xs[i % 8], coeff.randrange(2, R_MODULUS - 1)) for i in range(self.n)])
        cs.enforce("wide", row, lc(ONE), row)


def test_more_than_65536_coefficients_use_uint32_indices() -> None:
    compiled = compile_circuit(ManyCoefficients(70_000, None), "wide")
    assert compiled.coeff_table.shape[0] == 70_002 and compiled.a.coeff_idx.dtype == np.uint32
    instance = ManyCoefficients(70_000, 3)
    assert_identical(reference(instance), synthesize_compiled(instance, compiled))


def _python_spmv(row_ptr: np.ndarray, cols: np.ndarray, idx: np.ndarray, table: list[int], w: list[int]) -> list[int]:
    return [sum(table[idx[k]] * w[cols[k]] for k in range(row_ptr[r], row_ptr[r + 1])) % R_MODULUS
            for r in range(len(row_ptr) - 1)]


def test_spmv_table_matches_a_python_reference() -> None:
    rng = np.random.default_rng(5)
    rows, n_in, n_aux = 300, 5, 200
    lengths = rng.integers(0, 12, size=rows)
    row_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint32)
    nnz = int(row_ptr[-1])
    cols = rng.integers(0, n_in + n_aux, size=nnz).astype(np.uint32)
    pyrng = random.Random(5)
    table = [1, R_MODULUS - 1] + [pyrng.randrange(R_MODULUS) for _ in range(30)] + [R_MODULUS - 2, 2]
    idx = rng.integers(0, len(table), size=nnz).astype(np.uint16)
    w = [pyrng.choice([0, 1, R_MODULUS - 1, pyrng.randrange(R_MODULUS)]) for _ in range(n_in + n_aux)]
    limbs = ints_to_limbs(w)
    out = spmv_table(row_ptr, cols, idx, to_montgomery(ints_to_limbs(table)), limbs[:n_in], limbs[n_in:])
    assert limbs_to_ints(out) == _python_spmv(row_ptr, cols, idx, table, w)


def test_three_products_in_one_pass_match_the_reference_and_find_the_unsatisfied_rows() -> None:
    """`spmv3_table`: each matrix's product as the Python reference computes it, into given arrays
    or new ones, and with `check` exactly the rows where a·b != c (here c = a·b but for two rows)."""
    rng = np.random.default_rng(7)
    rows, n_in, n_aux = 200, 4, 150
    pyrng = random.Random(7)
    table = [1, R_MODULUS - 1] + [pyrng.randrange(R_MODULUS) for _ in range(20)]
    w = [pyrng.choice([0, 1, R_MODULUS - 1, pyrng.randrange(R_MODULUS)]) for _ in range(n_in + n_aux)]
    limbs = ints_to_limbs(w)
    mats, want = [], []
    for _ in range(3):
        row_ptr = np.concatenate([[0], np.cumsum(rng.integers(0, 8, size=rows))]).astype(np.uint32)
        cols = rng.integers(0, n_in + n_aux, size=int(row_ptr[-1])).astype(np.uint32)
        idx = rng.integers(0, len(table), size=int(row_ptr[-1])).astype(np.uint16)
        mats.append((row_ptr, cols, idx))
        want.append(_python_spmv(row_ptr, cols, idx, table, w))
    mont = to_montgomery(ints_to_limbs(table))
    a, b, c, bad = spmv3_table(tuple(mats), mont, limbs[:n_in], limbs[n_in:])
    assert [limbs_to_ints(x) for x in (a, b, c)] == want and bad.size == 0  # no check asked for
    outs = tuple(np.empty((rows, 4), dtype=np.uint64) for _ in range(3))
    got = spmv3_table(tuple(mats), mont, limbs[:n_in], limbs[n_in:], outs, check=True)
    assert all(g is o for g, o in zip(got[:3], outs, strict=True))
    expected_bad = [r for r in range(rows) if want[0][r] * want[1][r] % R_MODULUS != want[2][r]]
    assert got[3].tolist() == expected_bad == check_rows(*got[:3]).tolist()
    # C made to equal a·b but for rows 3 and 41: each row one entry, coefficient 1, on a column
    # holding that row's product.
    products = [want[0][r] * want[1][r] % R_MODULUS for r in range(rows)]
    products[3], products[41] = (products[3] + 1) % R_MODULUS, (products[41] + 2) % R_MODULUS
    w2 = w + products
    c_ptr = np.arange(rows + 1, dtype=np.uint32)
    c_cols = np.arange(n_in + n_aux, n_in + n_aux + rows, dtype=np.uint32)
    aux2 = ints_to_limbs(w2)[n_in:]
    c_idx = np.zeros(rows, dtype=np.uint16)
    *_, bad = spmv3_table((mats[0], mats[1], (c_ptr, c_cols, c_idx)), mont, limbs[:n_in], aux2, check=True)
    assert bad.tolist() == [3, 41]
    with pytest.raises(ValueError, match="matrix B has 199 rows, A has 200"):
        spmv3_table((mats[0], (mats[1][0][:-1], mats[1][1], mats[1][2]), mats[2]), mont, limbs[:n_in], limbs[n_in:])


@pytest.mark.parametrize("threads_cols", [(0, 3), (1, 1), (13, 7), (300, 205)])
def test_spmv_table_transpose_matches_a_python_reference(threads_cols: tuple[int, int]) -> None:
    """y[col] = sum over entries of coeff * x[row] (key generation's QAP at tau), repeated columns in a
    row included, with x longer than the matrix (a padded domain)."""
    rows, n_cols = threads_cols
    rng = np.random.default_rng(rows + n_cols)
    lengths = rng.integers(0, 9, size=rows)
    row_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.uint32)
    nnz = int(row_ptr[-1])
    cols = rng.integers(0, n_cols, size=nnz).astype(np.uint32)
    pyrng = random.Random(rows)
    table = [1, R_MODULUS - 1] + [pyrng.randrange(R_MODULUS) for _ in range(20)]
    idx = rng.integers(0, len(table), size=nnz).astype(np.uint16)
    x = [pyrng.randrange(R_MODULUS) for _ in range(rows + 3)]
    expected = [0] * n_cols
    for r in range(rows):
        for k in range(row_ptr[r], row_ptr[r + 1]):
            expected[cols[k]] = (expected[cols[k]] + table[idx[k]] * x[r]) % R_MODULUS
    got = spmv_table_transpose(row_ptr, cols, idx, to_montgomery(ints_to_limbs(table)),
                               to_montgomery(ints_to_limbs(x)), n_cols)
    assert limbs_to_ints(from_montgomery(got)) == expected


def test_spmv_table_transpose_refuses_bad_shapes() -> None:
    row_ptr = np.array([0, 2, 3], dtype=np.uint32)
    cols = np.array([0, 0, 1], dtype=np.uint32)
    table = to_montgomery(ints_to_limbs([1, R_MODULUS - 1, 5]))
    x = to_montgomery(ints_to_limbs([10, 100]))
    assert limbs_to_ints(from_montgomery(spmv_table_transpose(row_ptr, cols, np.array([2, 1, 0], np.uint16),
                                                              table, x, 2))) == [(50 - 10) % R_MODULUS, 100]
    with pytest.raises(ValueError, match="must be equal 1-D shapes"):
        spmv_table_transpose(row_ptr, cols, np.array([0, 1], np.uint16), table, x, 2)
    with pytest.raises(ValueError, match="x_mont has 1 entries, the matrix has 2 rows"):
        spmv_table_transpose(row_ptr, cols, np.array([0, 1, 2], np.uint16), table, x[:1], 2)
    with pytest.raises(ValueError, match="at least 1 and -1"):
        spmv_table_transpose(row_ptr, cols, np.array([0, 0, 0], np.uint16), table[:1], x, 2)


def test_check_rows_finds_exactly_the_unsatisfied_rows() -> None:
    rng = random.Random(8)
    a = [rng.randrange(R_MODULUS) for _ in range(50)]
    b = [rng.randrange(R_MODULUS) for _ in range(50)]
    c = [x * y % R_MODULUS for x, y in zip(a, b, strict=True)]
    c[3] = (c[3] + 1) % R_MODULUS
    c[41] = 0
    bad = check_rows(ints_to_limbs(a), ints_to_limbs(b), ints_to_limbs(c))
    assert bad.tolist() == [3, 41]


def test_check_rows_with_factors_0_and_1_needs_no_product_and_is_still_exact() -> None:
    """Rows whose a or b is 0 or 1 (most of the bit-heavy Filecoin circuits') are checked by
    comparing limbs: satisfied rows pass and every kind of wrong c is found."""
    rng = random.Random(9)
    x, y = rng.randrange(2, R_MODULUS), rng.randrange(2, R_MODULUS)
    rows = [(0, x, 0, True), (x, 0, 0, True), (0, 1, 0, True), (1, x, x, True), (x, 1, x, True), (1, 1, 1, True),
            (0, x, 1, False), (x, 0, x, False), (1, x, y, False), (x, 1, 1, False), (1, 1, 0, False),
            (1, 0, 1, False), (x, y, x * y % R_MODULUS, True), (x, y, x, False)]
    a, b, c = ([row[k] for row in rows] for k in range(3))
    bad = check_rows(ints_to_limbs(a), ints_to_limbs(b), ints_to_limbs(c))
    assert bad.tolist() == [k for k, row in enumerate(rows) if not row[3]]


# -- files --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compiled_bits() -> object:
    return compile_circuit(BitsCircuit.blank(3), "bits-3")


@pytest.fixture
def bits_file(tmp_path: Path, compiled_bits: object) -> Path:
    return write_compiled(compiled_bits, tmp_path / "bits-3.cuzk-r1cs")


def test_file_round_trip_is_exact_and_memory_mapped(bits_file: Path, compiled_bits: object) -> None:
    assert [p.name for p in bits_file.parent.iterdir()] == [bits_file.name]  # no temporary left behind
    loaded = load_compiled(bits_file, expect_circuit_id="bits-3", expect_code_digest=synthesis_code_digest())
    assert loaded.fingerprint == compiled_bits.fingerprint and loaded.counts() == compiled_bits.counts()
    for name, arr in compiled_bits.arrays().items():
        got = loaded.arrays()[name]
        assert got.dtype == arr.dtype and np.array_equal(got, arr), name
        assert isinstance(got.base, np.memmap) or isinstance(got, np.memmap), name
        assert not got.flags.writeable
    instance = BitsCircuit.random(3, random.Random(6))
    assert_identical(reference(instance), synthesize_compiled(instance, loaded))
    header = read_header(bits_file)
    assert header.version == FORMAT_VERSION and header.summary()["counts"]["num_constraints"] == \
        compiled_bits.num_constraints
    assert header.file_size == bits_file.stat().st_size and header.data_start % 64 == 0


def _patch(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_wrong_magic_version_and_metadata_are_refused(bits_file: Path) -> None:
    raw = bits_file.read_bytes()
    _patch(bits_file, 0, b"NOTR1CS!")
    with pytest.raises(CompiledFileError, match="not a compiled circuit"):
        load_compiled(bits_file)
    bits_file.write_bytes(raw)
    _patch(bits_file, 8, struct.pack("<I", FORMAT_VERSION + 1))
    with pytest.raises(CompiledFileError, match=f"unsupported compiled-circuit format version {FORMAT_VERSION + 1}"):
        load_compiled(bits_file)
    bits_file.write_bytes(raw)
    _patch(bits_file, 60, b"X")  # inside the JSON metadata
    with pytest.raises(CompiledFileError, match="metadata checksum mismatch"):
        read_header(bits_file)


def test_truncated_and_extended_files_are_refused(bits_file: Path) -> None:
    raw = bits_file.read_bytes()
    for cut, message in ((len(raw) - 1, "truncated"), (100, "truncated"), (20, "truncated")):
        bits_file.write_bytes(raw[:cut])
        with pytest.raises(CompiledFileError, match=message):
            load_compiled(bits_file)
    bits_file.write_bytes(raw + b"\0")
    with pytest.raises(CompiledFileError, match="longer than"):
        load_compiled(bits_file)
    with pytest.raises(CompiledFileError, match="cannot read"):
        load_compiled(bits_file.with_name("missing.cuzk-r1cs"))


def test_corrupted_arrays_are_found_by_their_digest(bits_file: Path) -> None:
    header = read_header(bits_file)
    entry = header.meta["arrays"]["b_cols"]
    _patch(bits_file, entry["offset"], b"\x01")
    with pytest.raises(CompiledFileError, match="array b_cols is corrupted"):
        load_compiled(bits_file)
    load_compiled(bits_file, verify=False)  # the structure is still consistent: only the digest notices


def test_structurally_bad_arrays_are_refused_even_unverified(bits_file: Path) -> None:
    header = read_header(bits_file)
    entry = header.meta["arrays"]["a_cols"]
    _patch(bits_file, entry["offset"], struct.pack("<I", 0xFFFFFFF0))
    with pytest.raises(CompiledFileError, match="matrix A: column 4294967280 out of range"):
        load_compiled(bits_file, verify=False)


def test_other_circuit_or_code_is_refused(bits_file: Path) -> None:
    with pytest.raises(CompiledFileError, match="holds circuit 'bits-3', not 'bits-4'"):
        load_compiled(bits_file, expect_circuit_id="bits-4")
    with pytest.raises(CompiledFileError, match="compiled from other synthesis code"):
        load_compiled(bits_file, expect_code_digest="0" * 64)


def test_a_fingerprint_that_does_not_describe_the_arrays_is_refused(bits_file: Path) -> None:
    """A consistent header (valid checksum) whose fingerprint was forged."""
    raw = bits_file.read_bytes()
    prefix = struct.Struct("<8sII32s")
    magic, version, meta_len, _ = prefix.unpack_from(raw)
    meta = json.loads(raw[prefix.size:prefix.size + meta_len])
    meta["fingerprint"] = "f" * 64
    new = json.dumps(meta, sort_keys=True).encode()
    assert len(new) == meta_len
    import hashlib

    head = prefix.pack(magic, version, meta_len, hashlib.blake2b(new, digest_size=32).digest())
    bits_file.write_bytes(head + new + raw[prefix.size + meta_len:])
    with pytest.raises(CompiledFileError, match="fingerprint mismatch"):
        load_compiled(bits_file)


def test_a_failed_write_leaves_the_old_file(bits_file: Path, compiled_bits: object,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    before = bits_file.read_bytes()
    other = compile_circuit(BitsCircuit.blank(2), "bits-3")

    def refuse(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        write_compiled(other, bits_file)
    assert bits_file.read_bytes() == before
    assert [p.name for p in bits_file.parent.iterdir()] == [bits_file.name]


def test_magic_is_at_the_start(bits_file: Path) -> None:
    assert bits_file.read_bytes()[:8] == MAGIC
