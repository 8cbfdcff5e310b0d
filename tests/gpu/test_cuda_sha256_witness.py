"""The device's SHA-256 witnesses equal the CPU plan's bit for bit (aux as field elements 0/1, and
digests), for plans with and without constant message bits, the PoRep label plan, batch sizes that
are not multiples of a block, instances scattered into a larger aux vector, and an empty batch;
digests also equal hashlib's."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from cuzk.backends.cuda.deferred import complete_on_device
from cuzk.backends.cuda.poseidon_witness import DevicePoseidonPaths
from cuzk.backends.cuda.sha256_witness import DeviceSha256Witness
from cuzk.circuits.filecoin.porep_witness import label_plan
from cuzk.errors import SynthesisError
from cuzk.witness_gen.sha256 import Sha256WitnessPlan


@pytest.fixture(scope="module")
def device_sha(needs_gpu: None) -> DeviceSha256Witness:
    from cuzk.backends.cuda.module import get_module

    return DeviceSha256Witness(get_module(0, "witness"))


def _constants(bits: int, seed: int) -> Sha256WitnessPlan:
    rng = np.random.default_rng(seed)
    mask = rng.random(bits) < 0.3
    values = (rng.random(bits) < 0.5).astype(np.uint8)
    return Sha256WitnessPlan.for_message(mask, np.where(mask, values, 0).astype(np.uint8))


def _messages(plan: Sha256WitnessPlan, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2, size=(n, plan.message_bits), dtype=np.uint8)
    bits[:, plan.constant_positions] = plan.constant_values
    return bits


PLANS = {
    "allocated-256": lambda: Sha256WitnessPlan.all_allocated(256),
    "allocated-512": lambda: Sha256WitnessPlan.all_allocated(512),
    "allocated-1000": lambda: Sha256WitnessPlan.all_allocated(1000),
    "constants-1024": lambda: _constants(1024, 7),
    "porep-label-layer-2": lambda: label_plan(2),
}


@pytest.mark.parametrize("name", sorted(PLANS))
@pytest.mark.parametrize("n", [1, 129, 300])
def test_device_equals_cpu_plan(device_sha: DeviceSha256Witness, needs_real_gpu, name: str, n: int) -> None:  # type: ignore[no-untyped-def]
    plan = PLANS[name]()
    if n * plan.num_aux * 32 > 1 << 30:
        needs_real_gpu(f"{n * plan.num_aux * 32 / 1e9:.1f} GB of aux, more than the emulated card holds")
    bits = _messages(plan, n, seed=n)
    expected = plan.generate(bits)
    aux, digest = device_sha.generate(plan, bits)
    aux, digest = device_sha.kernels.to_host(aux), device_sha.kernels.to_host(digest)
    assert aux.shape == (n, plan.num_aux, 8)
    assert not aux[..., 1:].any()
    mismatch = np.argwhere(aux[..., 0] != expected.aux)
    assert mismatch.size == 0, f"first differing (instance, aux): {mismatch[0].tolist()}"
    assert np.array_equal(np.unpackbits(digest.astype(">u4").view(np.uint8), axis=1), expected.digest_bits)


def test_digests_equal_hashlib(device_sha: DeviceSha256Witness) -> None:
    plan = Sha256WitnessPlan.all_allocated(512)
    bits = _messages(plan, 5, seed=1)
    _, digest = device_sha.generate(plan, bits)
    digest = device_sha.kernels.to_host(digest)
    for row, words in zip(bits, digest, strict=True):
        assert words.astype(">u4").tobytes() == hashlib.sha256(np.packbits(row).tobytes()).digest()


def test_instances_scattered_into_an_aux_vector(device_sha: DeviceSha256Witness) -> None:
    """Each instance lands at its own destination row; rows in between are left as they were."""
    plan = PLANS["porep-label-layer-2"]()
    n = 6
    bits = _messages(plan, n, seed=11)
    expected = plan.generate(bits).aux
    dst = np.array([5 * plan.num_aux + 7 - k * (plan.num_aux + 1) for k in range(n)], dtype=np.int64)
    xp = device_sha.xp
    out = xp.full((6 * plan.num_aux + 7, 8), 0xABCDEF01, dtype=xp.uint32)
    device_sha.generate_into(plan, bits, out, dst)
    host = device_sha.kernels.to_host(out)
    written = np.zeros(host.shape[0], dtype=bool)
    for k in range(n):
        rows = host[dst[k]:dst[k] + plan.num_aux]
        assert np.array_equal(rows[:, 0], expected[k]) and not rows[:, 1:].any()
        written[dst[k]:dst[k] + plan.num_aux] = True
    assert (host[~written] == 0xABCDEF01).all()
    with pytest.raises(ValueError, match="outside out"):
        device_sha.generate_into(plan, bits, out, dst + 10)
    with pytest.raises(ValueError, match="one row index per message"):
        device_sha.generate_into(plan, bits, out, dst[:2])


def test_empty_batch_and_bad_input(device_sha: DeviceSha256Witness) -> None:
    plan = _constants(512, 3)
    aux, digest = device_sha.generate(plan, np.zeros((0, 512), dtype=np.uint8))
    assert aux.shape == (0, plan.num_aux, 8) and digest.shape == (0, 8)
    bits = _messages(plan, 2, seed=0)
    bits[1, plan.constant_positions[0]] ^= 1
    with pytest.raises(SynthesisError, match="constant"):
        device_sha.generate(plan, bits)
    with pytest.raises(ValueError, match="shape"):
        device_sha.generate(plan, np.zeros((2, 8), dtype=np.uint8))


@pytest.mark.parametrize("which", ["porep-2k", "32GiB, one challenge"])
def test_deferred_partition_completed_on_the_device_equals_the_full_generator(device_sha: DeviceSha256Witness,
                                                                               device_units, which: str) -> None:  # type: ignore[no-untyped-def]
    """A PoRep partition generated with its SHA-256 gadgets and Poseidon Merkle paths deferred,
    completed on the device: the device aux vector equals the CPU generator's, element for element."""
    import dataclasses

    from cuzk.circuits.filecoin.compound import sample_compound
    from cuzk.circuits.filecoin.porep import PRODUCTION_CONFIGS, random_stacked_circuit
    from cuzk.circuits.filecoin.porep_witness import PorepLayout, porep_witness
    from cuzk.witness_gen.deferred import DeferredWitness

    circuit = (sample_compound("porep-2k", 5).partition_circuit(0) if which == "porep-2k" else
               random_stacked_circuit(dataclasses.replace(PRODUCTION_CONFIGS[32 << 30], challenges=1), seed=32))
    _, expected = porep_witness(circuit)
    host = np.full((PorepLayout.of(circuit.config).num_aux, 4), 0xDEAD, dtype=np.uint64)
    deferred = DeferredWitness()
    porep_witness(circuit, out=host, deferred=deferred)
    out = device_sha.xp.full((host.shape[0], 8), 0xBEEF, dtype=device_sha.xp.uint32)
    assert deferred.sha256_jobs and deferred.path_jobs
    paths = DevicePoseidonPaths(device_units("poseidon"))
    complete_on_device(deferred, host, out, device_sha.kernels, lambda: device_sha, lambda: paths)
    got = device_sha.kernels.to_host(out).view(np.uint64).reshape(-1, 4)
    differing = np.flatnonzero((got != expected).any(axis=1))
    assert differing.size == 0, f"{differing.size} aux differ, first at {differing[:8].tolist()}"
    with pytest.raises(ValueError, match="out must be"):
        complete_on_device(deferred, host, out[:-1], device_sha.kernels, lambda: device_sha, lambda: paths)
