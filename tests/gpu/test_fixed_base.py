"""Device fixed-base multiplication (kernels/fixed_base.cu) against the CPU's bytes (cuzk.curve.fixed_base)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from cuzk.curve.fixed_base import g1_fixed_base_batch, g2_fixed_base_batch, scalars_from_ints
from cuzk.curve.points import G1Point, G2Point, Scalar
from cuzk.field.constants import R_MODULUS

pytestmark = pytest.mark.gpu

GROUPS = {"g1": (G1Point, g1_fixed_base_batch, 96), "g2": (G2Point, g2_fixed_base_batch, 192)}


@pytest.fixture(scope="module")
def engine(needs_gpu: None):
    """DeviceFixedBase runs on streams of its own: a GPU, or the emulated device."""
    from cuzk.backends.cuda.fixed_base import DeviceFixedBase
    from cuzk.backends.cuda.module import get_module

    return DeviceFixedBase(get_module(0, "setup"))


@pytest.fixture(scope="module")
def backend(needs_gpu: None):
    from cuzk.backends.cuda import CudaBackend

    return CudaBackend()


def _base(group: str, seed: int):
    cls = GROUPS[group][0]
    k = random.Random(seed).randrange(1, R_MODULUS)
    return cls() * Scalar.from_le_bytes(k.to_bytes(32, "little"))


def _edge_scalars(rng: random.Random) -> list[int]:
    values = [0, 1, 2, 3, R_MODULUS - 1, R_MODULUS - 2, (R_MODULUS - 1) // 2, (R_MODULUS + 1) // 2, 2**64 - 1,
              2**64, 2**128 - 1]
    values += [2**k for k in range(255)] + [2**k - 1 for k in range(1, 255)]
    values += [rng.randrange(R_MODULUS)] * 7 + [5] * 5  # repeated scalars
    return values


def _device(engine, group: str, base, scalars: np.ndarray, **kw) -> np.ndarray:
    out = np.full((scalars.shape[0], GROUPS[group][2]), 0xAB, dtype=np.uint8)
    engine.run(group, base, scalars, out, **kw)
    return out


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_random_and_edge_scalars_match_cpu(engine, group: str) -> None:
    rng = random.Random(7)
    base = _base(group, 1)
    values = [rng.randrange(R_MODULUS) for _ in range(1000)] + _edge_scalars(rng)
    rng.shuffle(values)
    scalars = scalars_from_ints(values)
    expect = GROUPS[group][1](base, scalars)
    np.testing.assert_array_equal(_device(engine, group, base, scalars), expect)


@pytest.mark.parametrize("group", ["g1", "g2"])
@pytest.mark.parametrize(("window", "batch"), [(4, 1), (8, 3), (13, 8), (16, 2), (16, 16)])
def test_windows_and_batches(engine, group: str, window: int, batch: int) -> None:
    rng = random.Random(window * 10 + batch)
    base = _base(group, 2)
    scalars = scalars_from_ints([rng.randrange(R_MODULUS) for _ in range(300)] + _edge_scalars(rng)[:40])
    expect = GROUPS[group][1](base, scalars)
    np.testing.assert_array_equal(_device(engine, group, base, scalars, window=window, batch=batch), expect)


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_many_chunks_uneven_tail(needs_gpu: None, group: str) -> None:
    from cuzk.backends.cuda.fixed_base import DeviceFixedBase
    from cuzk.backends.cuda.module import get_module

    width = GROUPS[group][2]
    small = DeviceFixedBase(get_module(0, "setup"), chunk_bytes=width * 257)  # 257 points a chunk
    rng = random.Random(11)
    base = _base(group, 3)
    scalars = scalars_from_ints([rng.choice([0, 1, rng.randrange(R_MODULUS)]) for _ in range(257 * 5 + 13)])
    np.testing.assert_array_equal(_device(small, group, base, scalars), GROUPS[group][1](base, scalars))


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_empty_and_identity_base(engine, group: str) -> None:
    cls, _, width = GROUPS[group]
    out = np.zeros((0, width), dtype=np.uint8)
    engine.run(group, _base(group, 4), np.zeros((0, 4), dtype=np.uint64), out)
    scalars = scalars_from_ints([0, 1, 12345])
    got = _device(engine, group, cls.identity(), scalars)
    expect = np.zeros((3, width), dtype=np.uint8)
    expect[:, 0] = 0x40
    np.testing.assert_array_equal(got, expect)


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_bad_inputs(engine, group: str) -> None:
    base = _base(group, 5)
    width = GROUPS[group][2]
    scalars = scalars_from_ints([1, 2, R_MODULUS, 3, 2**256 - 1])
    with pytest.raises(ValueError, match="scalar 2 is not a canonical"):
        engine.run(group, base, scalars, np.zeros((5, width), dtype=np.uint8))
    with pytest.raises(ValueError, match="out must be"):
        engine.run(group, base, scalars[:2], np.zeros((2, width + 1), dtype=np.uint8))
    with pytest.raises(ValueError, match="scalars must be"):
        engine.run(group, base, np.zeros((2, 3), dtype=np.uint64), np.zeros((2, width), dtype=np.uint8))
    readonly = np.zeros((1, width), dtype=np.uint8)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        engine.run(group, base, scalars[:1], readonly)


def test_backend_writes_into_memmap(backend, tmp_path) -> None:
    rng = random.Random(13)
    g1, g2 = _base("g1", 6), _base("g2", 7)
    s1 = scalars_from_ints([rng.randrange(R_MODULUS) for _ in range(777)] + [0, 1, R_MODULUS - 1])
    s2 = scalars_from_ints([rng.randrange(R_MODULUS) for _ in range(333)] + [0, 1, R_MODULUS - 1])
    header = 17  # the points start at an odd offset, as in a parameter file
    size = header + 96 * len(s1) + 192 * len(s2)
    path = tmp_path / "points.bin"
    mm = np.memmap(path, dtype=np.uint8, mode="w+", shape=(size,))
    out1 = mm[header:header + 96 * len(s1)].reshape(-1, 96)
    out2 = mm[header + 96 * len(s1):].reshape(-1, 192)
    backend.fixed_base_g1(g1, s1, out1)
    backend.fixed_base_g2(g2, s2, out2)
    mm.flush()
    del mm, out1, out2
    data = np.fromfile(path, dtype=np.uint8)
    np.testing.assert_array_equal(data[header:header + 96 * len(s1)].reshape(-1, 96), g1_fixed_base_batch(g1, s1))
    np.testing.assert_array_equal(data[header + 96 * len(s1):].reshape(-1, 192), g2_fixed_base_batch(g2, s2))
