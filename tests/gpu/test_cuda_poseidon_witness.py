"""Merkle-path witnesses over Poseidon trees on the device (`DevicePoseidonPaths`, the "poseidon" unit)
equal the CPU generator's (`merkle_path_witness`, built on the Poseidon gadget's own kernel), aux
and roots, for every arity and layout, edge values included; WindowPoSt and SnapDeals partitions
whose openings were deferred and completed on the device equal the CPU generator's aux vectors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cuzk.backends.cuda.poseidon_witness import DevicePoseidonPaths, kind_table
from cuzk.errors import SynthesisError
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs
from cuzk.gadgets.por import TreeShape
from cuzk.witness_gen.merkle import PathLayout, merkle_path_witness, path_aux_count

SHAPES = {
    "binary": TreeShape(2**4, 2),
    "quad": TreeShape(4**2, 4),
    "oct-8-2": TreeShape(8 * 8 * 2, 8, 8, 2),  # three kinds: base 8, sub 8, top 2
    "oct-4": TreeShape(8 * 4, 8, 4),
}


@pytest.fixture(scope="module")
def device_paths(unit_kernels) -> DevicePoseidonPaths:  # type: ignore[no-untyped-def]
    return DevicePoseidonPaths(unit_kernels("poseidon"))


def _inputs(shape: TreeShape, count: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random canonical leaves and siblings, with edge values (0, 1, r - 1) and the first and last
    leaf index among them."""
    rng = np.random.default_rng(seed)
    width = sum(a - 1 for a in shape.arities)
    values = [int.from_bytes(rng.bytes(32), "little") % R_MODULUS for _ in range(count * (width + 1))]
    values[:3] = [0, 1, R_MODULUS - 1]
    limbs = ints_to_limbs(values).reshape(count, width + 1, 4)
    indices = rng.integers(0, shape.leaves, size=count)
    indices[:2] = (0, shape.leaves - 1)
    return np.ascontiguousarray(limbs[:, 0]), indices, np.ascontiguousarray(limbs[:, 1:])


def _as_limbs(kernels, a) -> np.ndarray:  # type: ignore[no-untyped-def]
    return np.ascontiguousarray(kernels.to_host(a)).view(np.uint64).reshape(*a.shape[:-1], 4)


@pytest.mark.parametrize("layout", list(PathLayout))
@pytest.mark.parametrize("name", list(SHAPES))
def test_paths_equal_the_cpu_generator(device_paths: DevicePoseidonPaths, name: str, layout: PathLayout) -> None:
    shape = SHAPES[name]
    leaves, indices, siblings = _inputs(shape, 9, seed=len(name))
    expected = merkle_path_witness(shape, layout, leaves, indices, siblings)
    aux, roots = device_paths.generate(shape, layout, leaves, indices, siblings)
    got = _as_limbs(device_paths.kernels, aux)
    assert got.shape == expected.aux.shape
    bad = np.argwhere((got != expected.aux).any(axis=2))
    assert bad.size == 0, f"{len(bad)} aux differ, first (path, row) {bad[:4].tolist()}"
    assert np.array_equal(_as_limbs(device_paths.kernels, roots), expected.roots)


def test_paths_land_at_their_rows(device_paths: DevicePoseidonPaths) -> None:
    """generate_into writes each path at its own row and nothing else."""
    shape, layout = SHAPES["oct-8-2"], PathLayout.INCLUSION
    leaves, indices, siblings = _inputs(shape, 3, seed=7)
    per = path_aux_count(shape, layout)
    xp = device_paths.xp
    out = xp.full((3 * per + 10, 8), 0xBEEF, dtype=xp.uint32)
    dst = np.array([2 * per + 10, 5, per + 7], dtype=np.int64)  # out of order, gaps between
    device_paths.generate_into(shape, layout, leaves, indices, siblings, out, dst)
    got = _as_limbs(device_paths.kernels, out)
    expected = merkle_path_witness(shape, layout, leaves, indices, siblings).aux
    untouched = np.ones(got.shape[0], dtype=bool)
    for n, row in enumerate(dst.tolist()):
        assert np.array_equal(got[row:row + per], expected[n])
        untouched[row:row + per] = False
    assert (got[untouched] == np.uint64(0xBEEF0000BEEF)).all()


def test_bad_inputs_are_refused(device_paths: DevicePoseidonPaths) -> None:
    shape, layout = SHAPES["quad"], PathLayout.LEAF_FIRST
    leaves, indices, siblings = _inputs(shape, 2, seed=3)
    xp = device_paths.xp
    out = xp.zeros((2 * path_aux_count(shape, layout), 8), dtype=xp.uint32)
    with pytest.raises(ValueError, match="reach outside"):
        device_paths.generate_into(shape, layout, leaves, indices, siblings, out, np.array([0, 1 << 20]))
    with pytest.raises(ValueError, match="one row index per path"):
        device_paths.generate_into(shape, layout, leaves, indices, siblings, out, np.array([0]))
    with pytest.raises(SynthesisError, match="leaf index"):
        device_paths.generate(shape, layout, leaves, np.array([0, shape.leaves]), siblings)
    bad = siblings.copy()
    bad[1, 2] = np.frombuffer(R_MODULUS.to_bytes(32, "little"), dtype=np.uint64)
    with pytest.raises(SynthesisError, match="canonical"):
        device_paths.generate(shape, layout, leaves, indices, bad)
    with pytest.raises(ValueError, match="Poseidon"):
        device_paths.generate(TreeShape.binary_sha256(8), layout, leaves, np.array([0, 1]), siblings[:, :3])
    with pytest.raises(ValueError, match="arities 2, 4 and 8"):
        kind_table(16)


@pytest.mark.parametrize("which", ["wpost-2k", "wpost-32g, 3 sectors", "snap-2k"])
def test_deferred_partition_completed_on_the_device(device_units, which: str) -> None:  # type: ignore[no-untyped-def]
    """A WindowPoSt partition generated with its openings deferred (a SnapDeals one: its tree_r openings
    and its tree_d opening's SHA-256 hashes), completed on the device: the device aux vector equals the
    CPU generator's, element for element."""
    from cuzk.backends.cuda.deferred import complete_on_device
    from cuzk.backends.cuda.sha256_witness import DeviceSha256Witness
    from cuzk.circuits.filecoin.compound import sample_compound
    from cuzk.circuits.filecoin.post import FallbackPoStConfig, random_post_circuit
    from cuzk.witness_gen.deferred import DeferredWitness

    if which.startswith("wpost-32g"):
        circuit = random_post_circuit(dataclasses.replace(FallbackPoStConfig.window(32 << 30), sector_count=3), 5)
    else:
        circuit = sample_compound(which, 1).partition_circuit(0)
    _, expected = circuit.witness_arrays()
    host = np.full(expected.shape, 0xDEAD, dtype=np.uint64)
    deferred = DeferredWitness()
    circuit.witness_arrays(out=host, deferred=deferred)
    assert deferred.path_jobs and bool(deferred.sha256_jobs) == which.startswith("snap")
    device_paths = DevicePoseidonPaths(device_units("poseidon"))
    xp = device_paths.xp
    out = xp.full((host.shape[0], 8), 0xBEEF, dtype=xp.uint32)
    sha256 = DeviceSha256Witness(device_units("witness"))
    complete_on_device(deferred, host, out, device_paths.kernels, lambda: sha256, lambda: device_paths)
    got = _as_limbs(device_paths.kernels, out)
    differing = np.flatnonzero((got != expected).any(axis=1))
    assert differing.size == 0, f"{differing.size} aux differ, first at {differing[:8].tolist()}"
