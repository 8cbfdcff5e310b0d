"""Sparse products of compiled circuits on the device (kernels/spmv.cu): bit-identical to the CPU's
`CompiledCircuit.evaluate`, on the Filecoin 2KiB circuits and on synthetic matrices with the edge cases
of the kernels (empty rows, rows longer than a warp and than a block, all-zero witness, coefficients
and values near the modulus, every index width); whole proofs through `prove_compiled` equal the CPU's.

With `CUZK_TEST_KERNEL_MODULE=tests/gpu/kernel_emulator.py` the kernel-level tests run against the
host emulation of the "synthesis" kernel unit (tests/gpu/conftest.py).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import cuzk.backends.cuda.residency as residency
from cuzk.backends.cpu import CpuBackend
from cuzk.backends.cuda.spmv import LONG_ROW, DeviceSpmv, matrix_bytes
from cuzk.circuits.registry import lookup
from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.fr_vec import to_montgomery
from cuzk.field.limbs import ints_to_limbs
from cuzk.groth16.assignment import Assignment
from cuzk.groth16.synthesis import compile_circuit, synthesize_witness
from cuzk.groth16.verifier import verify_proof
from cuzk.r1cs.compiled import CompiledCircuit, CompiledMatrix

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def kernels(unit_kernels):  # type: ignore[no-untyped-def]
    return unit_kernels("synthesis")


@pytest.fixture(scope="module")
def spmv(kernels) -> DeviceSpmv:
    return DeviceSpmv(kernels)


def _words(kernels, limbs: np.ndarray):
    return kernels.to_device(np.ascontiguousarray(limbs).view(np.uint32).reshape(-1, 8))


def _limbs(kernels, words) -> np.ndarray:
    return np.ascontiguousarray(kernels.to_host(words)).view(np.uint64).reshape(-1, 4)


def _device_abc(spmv: DeviceSpmv, compiled: CompiledCircuit, inputs: np.ndarray, aux: np.ndarray,
                resident: bool | tuple[bool, bool, bool] = True) -> list[np.ndarray]:
    prepared = spmv.prepare(compiled, resident)
    k = spmv.k
    out = spmv.evaluate(prepared, _words(k, inputs), _words(k, aux))
    return [_limbs(k, v) for v in out]


def _assert_equal_to_cpu(spmv: DeviceSpmv, compiled: CompiledCircuit, inputs: np.ndarray, aux: np.ndarray,
                         **kw) -> None:
    want = compiled.evaluate(inputs, aux)
    got = _device_abc(spmv, compiled, inputs, aux, **kw)
    for name, x, y in zip("abc", want, got, strict=True):
        assert x.shape == y.shape, name
        bad = np.flatnonzero(np.any(x != y, axis=1))
        assert bad.size == 0, f"{name}: {bad.size} rows differ, first {bad[:5]}"


# -- the Filecoin 2KiB circuits ------------------------------------------------------------------------

def test_winning_2k_with_its_real_witness(spmv) -> None:
    from cuzk.circuits.filecoin.compound import blank_circuit, sample_compound

    compiled = compile_circuit(blank_circuit("winning-2k"), "winning-2k")
    witness = synthesize_witness(sample_compound("winning-2k", 3).instance(0))
    inputs, aux = ints_to_limbs(witness.input_assignment), ints_to_limbs(witness.aux_assignment)
    _assert_equal_to_cpu(spmv, compiled, inputs, aux)
    # the real witness satisfies every row, on the device too
    prepared = spmv.prepare(compiled)
    k = spmv.k
    dev_in, dev_aux = _words(k, inputs), _words(k, aux)
    spmv.check_witness(dev_in, dev_aux)
    spmv.check_rows(prepared, *spmv.evaluate(prepared, dev_in, dev_aux))


@pytest.mark.slow  # porep-2k compiles in 15-30 s on 2 cores
def test_porep_2k_with_a_generated_witness(spmv) -> None:
    from cuzk.circuits.filecoin.compound import blank_circuit
    from cuzk.circuits.filecoin.porep import PRODUCTION_CONFIGS, random_stacked_circuit

    compiled = compile_circuit(blank_circuit("porep-2k"), "porep-2k")
    inputs, aux = random_stacked_circuit(PRODUCTION_CONFIGS[2 << 10], seed=5).witness_arrays()
    lengths = np.diff(compiled.a.row_ptr.astype(np.int64))
    assert lengths.max() > 1024 >= LONG_ROW  # rows longer than a block of the long-row kernel
    _assert_equal_to_cpu(spmv, compiled, inputs, aux)
    # A and C resident, B uploaded for the product: the same arrays
    _assert_equal_to_cpu(spmv, compiled, inputs, aux, resident=(True, False, True))


# -- synthetic matrices --------------------------------------------------------------------------------

#: Table entries: 1 and -1 first (the compiled convention), then values near the modulus and small ones.
_TABLE = [1, R_MODULUS - 1, R_MODULUS - 2, 2, (1 << 254) + 7, R_MODULUS - (1 << 64), 3, R_MODULUS // 2]
#: Witness values the kernels treat specially (0, 1) and values near the modulus.
_VALUES = [0, 1, 2, R_MODULUS - 1, R_MODULUS - 2, 1 << 64, (1 << 128) - 1]


def _synthetic(rng: np.random.Generator, lengths: list[int], n_in: int, n_aux: int, table: list[int], *,
               wide_ptr: bool = False) -> CompiledCircuit:
    """A compiled circuit whose A, B, C have the given row lengths (B, C: shuffled), random columns
    and coefficient indices (the densities are not used by the products)."""
    rows, n_var = len(lengths), n_in + n_aux
    idx_dtype = np.uint16 if len(table) <= 1 << 16 else np.uint32

    def matrix(lens: np.ndarray) -> CompiledMatrix:
        ptr = np.zeros(rows + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        nnz = int(ptr[-1])
        return CompiledMatrix(row_ptr=ptr if wide_ptr else ptr.astype(np.uint32),
                              cols=rng.integers(0, n_var, nnz, dtype=np.uint32),
                              coeff_idx=rng.integers(0, len(table), nnz).astype(idx_dtype))

    lens = np.asarray(lengths, dtype=np.int64)
    zero_bits = np.zeros((n_aux + 7) // 8, dtype=np.uint8)
    compiled = CompiledCircuit(
        circuit_id="synthetic", num_inputs=n_in, num_aux=n_aux, num_constraints=rows, a=matrix(lens),
        b=matrix(rng.permutation(lens)), c=matrix(rng.permutation(lens)),
        coeff_table=to_montgomery(ints_to_limbs(table)), a_aux_density_bits=zero_bits,
        b_input_density_bits=np.zeros((n_in + 7) // 8, dtype=np.uint8), b_aux_density_bits=zero_bits.copy(),
        a_input_density=n_in)
    compiled.check()
    return compiled


def _witness(rng: np.random.Generator, n: int, special: float = 0.6) -> np.ndarray:
    """n canonical values: a `special` share from _VALUES (mostly 0 and 1), the rest uniform."""
    out = []
    for _ in range(n):
        if rng.random() < special:
            out.append(_VALUES[min(int(rng.exponential(1.2)), len(_VALUES) - 1)])
        else:
            out.append(int.from_bytes(rng.bytes(32), "little") % R_MODULUS)
    return ints_to_limbs(out)


_LENGTHS = [0, 1, 2, 0, 3, 31, 32, 33, 0, 64, 65, 200, 1, 1500, 0, 5, 2 * LONG_ROW + 1] + [2] * 300 + [0]


@pytest.mark.parametrize("wide_ptr", [False, True], ids=["u32-ptr", "u64-ptr"])
@pytest.mark.parametrize("long_row", [0, LONG_ROW, 10_000], ids=["all-long", "default", "none-long"])
def test_synthetic_rows_of_every_length(kernels, wide_ptr: bool, long_row: int) -> None:
    rng = np.random.default_rng(7 + long_row + wide_ptr)
    compiled = _synthetic(rng, _LENGTHS, 5, 700, _TABLE, wide_ptr=wide_ptr)
    inputs, aux = _witness(rng, 5), _witness(rng, 700)
    inputs[0] = ints_to_limbs([1])[0]
    spmv = DeviceSpmv(kernels, long_row=long_row, long_row_threads=64)
    _assert_equal_to_cpu(spmv, compiled, inputs, aux)
    _assert_equal_to_cpu(spmv, compiled, inputs, aux, resident=False)


def test_an_all_zero_witness_gives_zeros(spmv) -> None:
    rng = np.random.default_rng(11)
    compiled = _synthetic(rng, _LENGTHS, 3, 400, _TABLE)
    inputs, aux = np.zeros((3, 4), dtype=np.uint64), np.zeros((400, 4), dtype=np.uint64)
    got = _device_abc(spmv, compiled, inputs, aux)
    assert all(not v.any() for v in got)
    _assert_equal_to_cpu(spmv, compiled, inputs, aux)


def test_a_table_of_more_than_65536_coefficients_uses_u32_indices(spmv) -> None:
    rng = np.random.default_rng(12)
    table = _TABLE + [int(x) for x in rng.integers(4, 1 << 60, (1 << 16) + 10 - len(_TABLE))]
    compiled = _synthetic(rng, [4, 0, 40, 1] * 50, 2, 300, table)
    assert compiled.a.coeff_idx.dtype == np.uint32
    _assert_equal_to_cpu(spmv, compiled, _witness(rng, 2), _witness(rng, 300))


def test_checks_find_unsatisfied_rows_and_non_canonical_values(spmv) -> None:
    k = spmv.k
    rng = np.random.default_rng(13)
    compiled = _synthetic(rng, [1, 2, 3, 40] * 10, 2, 50, _TABLE)
    inputs, aux = _witness(rng, 2), _witness(rng, 50)
    prepared = spmv.prepare(compiled)
    dev_in, dev_aux = _words(k, inputs), _words(k, aux)
    a, b, c = spmv.evaluate(prepared, dev_in, dev_aux)
    want = [int(r) for r in np.flatnonzero(
        np.array([(x * y - z) % R_MODULUS != 0 for x, y, z in zip(*(_ints(k, v) for v in (a, b, c)), strict=True)]))]
    assert spmv.unsatisfied_rows(a, b, c).tolist() == want
    # c := a·b row by row satisfies everything; then one changed row is found
    prod = ints_to_limbs([x * y % R_MODULUS for x, y in zip(_ints(k, a), _ints(k, b), strict=True)])
    c_ok = _words(k, prod)
    spmv.check_rows(prepared, a, b, c_ok)
    prod[17] = ints_to_limbs([(_ints(k, a)[17] * _ints(k, b)[17] + 1) % R_MODULUS])[0]
    with pytest.raises(SynthesisError, match=r"1 of 40 constraints are not satisfied by the witness \(rows 17\)"):
        spmv.check_rows(prepared, a, b, _words(k, prod))
    bad_aux = aux.copy()
    bad_aux[33] = ints_to_limbs([R_MODULUS - 1])[0]
    bad_aux[33, 0] += np.uint64(1)  # exactly r
    bad_aux[41] = np.uint64(0xFFFFFFFFFFFFFFFF)
    with pytest.raises(ValueError, match=r"witness aux\[33\] is not a canonical field element"):
        spmv.check_witness(dev_in, _words(k, bad_aux))


def _ints(kernels, words) -> list[int]:
    raw = np.ascontiguousarray(kernels.to_host(words)).tobytes()
    return [int.from_bytes(raw[i:i + 32], "little") for i in range(0, len(raw), 32)]


def test_bad_shapes_are_refused(spmv) -> None:
    rng = np.random.default_rng(14)
    compiled = _synthetic(rng, [1, 2], 2, 10, _TABLE)
    prepared = spmv.prepare(compiled)
    k = spmv.k
    with pytest.raises(ValueError, match=r"aux must be a \(10, 8\) u32 device array"):
        spmv.evaluate(prepared, _words(k, _witness(rng, 2)), _words(k, _witness(rng, 9)))
    with pytest.raises(ValueError, match="out a must be a C-contiguous"):
        spmv.evaluate(prepared, _words(k, _witness(rng, 2)), _words(k, _witness(rng, 10)),
                      out=[k.xp.zeros((3, 8), dtype=k.xp.uint32)] * 3)
    with pytest.raises(ValueError, match="long_row_threads must be a power of two"):
        DeviceSpmv(k, long_row_threads=48)


# -- whole proofs ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def backend(needs_gpu):
    from cuzk.backends.cuda import CudaBackend

    return CudaBackend(0)


@pytest.mark.parametrize("fixture", ["mimc_params", "bits_params"])
def test_prove_compiled_equals_the_cpu_proof(backend, request, fixture: str) -> None:
    params = request.getfixturevalue(fixture)
    spec = lookup(params.circuit_id)
    compiled = compile_circuit(spec.blank(), params.circuit_id)
    witness = synthesize_witness(spec.example(random.Random(31)))
    inputs, aux = ints_to_limbs(witness.input_assignment), ints_to_limbs(witness.aux_assignment)
    timings: dict[str, float] = {}
    proof = backend.prove_compiled(params.pk, compiled, inputs, aux, r=12345, s=67890, timings=timings)
    asg = Assignment.from_compiled(compiled, (inputs, aux))
    assert proof == CpuBackend().prove(params.pk, asg, r=12345, s=67890)
    assert proof == CpuBackend().prove_compiled(params.pk, compiled, inputs, aux, r=12345, s=67890)
    assert proof == backend.prove(params.pk, asg, r=12345, s=67890)
    assert verify_proof(params.pk.vk, proof, asg.public_inputs())
    for key in ("spmv", "check", "h", "msm_h", "msm_l", "msm_a", "msm_b_g1", "msm_b_g2", "h2d_witness", "device"):
        assert key in timings and timings[key] >= 0, key
    assert backend.compiled_resident(compiled) == (True, True, True)


def test_prove_compiled_with_streamed_matrices_and_refusals(backend, bits_params, monkeypatch) -> None:
    spec = lookup(bits_params.circuit_id)
    compiled = compile_circuit(spec.blank(), bits_params.circuit_id)
    witness = synthesize_witness(spec.example(random.Random(32)))
    inputs, aux = ints_to_limbs(witness.input_assignment), ints_to_limbs(witness.aux_assignment)
    resident = backend.prove_compiled(bits_params.pk, compiled, inputs, aux, r=5, s=6)
    backend.unload_compiled(compiled)
    assert backend.compiled_resident(compiled) == (False, False, False)
    monkeypatch.setattr(backend.plan, "fits", lambda nbytes, reserve=0: False)
    assert backend.prove_compiled(bits_params.pk, compiled, inputs, aux, r=5, s=6) == resident
    # the matrices each proof uploads have pinned host copies, which the key's plan reports
    prepared = backend.keys.compiled[residency.compiled_key(compiled)]
    assert all(m is not None for m in prepared.host)
    assert prepared.host_bytes == matrix_bytes(compiled)
    pinned = {k["circuit_id"]: k["host_pinned_bytes"] for k in backend.memory_plan({bits_params.pk: "x"})["keys"]}
    assert pinned["x"] == matrix_bytes(compiled)
    # ... and where the host cannot spare the memory, the proof uploads from the compiled file's arrays
    backend.unload_compiled(compiled)
    monkeypatch.setattr(residency, "host_available", lambda: 0)
    assert backend.prove_compiled(bits_params.pk, compiled, inputs, aux, r=5, s=6) == resident
    assert backend.keys.compiled[residency.compiled_key(compiled)].host == [None, None, None]
    monkeypatch.undo()
    backend.unload_compiled(compiled)
    bad = aux.copy()
    bad[0] = ints_to_limbs([(int.from_bytes(aux[0].tobytes(), "little") + 1) % R_MODULUS])[0]
    with pytest.raises(SynthesisError, match="constraints are not satisfied"):
        backend.prove_compiled(bits_params.pk, compiled, inputs, bad)
    # without the check the proof is made (and does not verify)
    proof = backend.prove_compiled(bits_params.pk, compiled, inputs, bad, check=False)
    assert not verify_proof(bits_params.pk.vk, proof, Assignment.from_compiled(compiled, (inputs, aux)).public_inputs())
    bad[1, 3] = np.uint64(0xFFFFFFFFFFFFFFFF)
    with pytest.raises(ValueError, match=r"witness aux\[1\] is not a canonical field element"):
        backend.prove_compiled(bits_params.pk, compiled, inputs, bad)
