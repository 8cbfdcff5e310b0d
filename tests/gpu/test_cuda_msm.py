"""Device G1/G2 MSMs against the CPU MSM (cuzk.curve.msm) on random and edge-case inputs."""

from __future__ import annotations

import random

import numpy as np
import pytest

import cuzk.backends.cuda.msm as msm_module
from cuzk.backends.cuda.msm import ACCUMULATE_VARIANTS, DeviceMsm
from cuzk.curve.encoding import g1_points_to_uncompressed, g2_points_to_uncompressed
from cuzk.curve.msm import msm as cpu_msm
from cuzk.curve.points import G1Point, G2Point, Scalar
from cuzk.field.constants import R_MODULUS
from cuzk.field.limbs import ints_to_limbs

pytestmark = pytest.mark.gpu

GROUPS = {"g1": (G1Point, g1_points_to_uncompressed), "g2": (G2Point, g2_points_to_uncompressed)}


def _sc(x: int) -> Scalar:
    return Scalar.from_le_bytes(x.to_bytes(32, "little"))


def _points(cls: type, n: int, seed: int, distinct: int | None = None) -> list:
    """n points; with `distinct`, only that many different ones (repeated bases)."""
    rng = random.Random(seed)
    pool = [cls() * _sc(rng.randrange(1, R_MODULUS)) for _ in range(distinct or n)]
    return pool if distinct is None else [pool[rng.randrange(distinct)] for _ in range(n)]


def _device_msm(kernels, eng: DeviceMsm, group: str, points: list, scalars: list[int], split: bool) -> object:
    _, enc = GROUPS[group]
    raw = enc(points) if points else np.zeros((0, 96 if group == "g1" else 192), np.uint8)
    bases = eng.upload_bases(group, raw)
    sc = kernels.to_device(ints_to_limbs(scalars).view(np.uint32).reshape(-1, 8))
    out = eng.msm_split(group, bases, sc) if split else eng.msm(group, bases, sc)
    return eng.to_points(group, [out])[0]


def _scalar_sets(n: int, rng: random.Random) -> dict[str, list[int]]:
    return {
        "random": [rng.randrange(R_MODULUS) for _ in range(n)],
        "zeros": [0] * n,
        "ones": [1] * n,
        "binary": [rng.choice([0, 1, 1, 1]) for _ in range(n)],
        "mostly-binary": [rng.choice([0, 0, 1, 1, 1, rng.randrange(R_MODULUS)]) for _ in range(n)],
        "edge": [rng.choice([0, 1, 2, 3, R_MODULUS - 1, R_MODULUS - 2, (R_MODULUS - 1) // 2, 2**64 - 1,
                             2**128, 2**254]) for _ in range(n)],
        "same": [rng.randrange(R_MODULUS)] * n,  # one bucket per window holds everything
        "small": [rng.randrange(2**20) for _ in range(n)],
    }


def _sizes(emulated: bool) -> list[int]:
    return [1, 2, 5, 100, 777] + ([] if emulated else [4099, 65537])


@pytest.mark.parametrize("group", ["g1", "g2"])
@pytest.mark.parametrize("split,ones_tree", [(False, 0), (True, 0), (True, 1), (True, 2)])
def test_msm_matches_cpu(kernels, emulated: bool, group: str, split: bool, ones_tree: int) -> None:
    cls, _ = GROUPS[group]
    eng = DeviceMsm(kernels, threads_per_sm=4 if emulated else 1024)
    eng.ones_tree = ones_tree
    rng = random.Random(f"{group}{split}")
    for n in _sizes(emulated):
        if group == "g2" and n > 5000:
            continue
        pts = _points(cls, n, n)
        for name, scalars in _scalar_sets(n, rng).items():
            want = cpu_msm(pts, ints_to_limbs(scalars), group=cls)
            assert _device_msm(kernels, eng, group, pts, scalars, split) == want, (n, name)


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_repeated_and_infinite_bases(kernels, emulated: bool, group: str) -> None:
    cls, _ = GROUPS[group]
    eng = DeviceMsm(kernels, threads_per_sm=4 if emulated else 1024)
    rng = random.Random(7)
    n = 300
    pts = _points(cls, n, 3, distinct=5)
    for i in rng.sample(range(n), 40):
        pts[i] = cls.identity()
    pts[10] = pts[11] = pts[12]
    neg = [-p for p in pts[:50]]
    pts = pts + neg  # P and -P in one MSM: buckets receive a point and its negation
    for scalars in ([rng.randrange(R_MODULUS) for _ in pts], [5] * len(pts), [rng.choice([0, 1]) for _ in pts]):
        want = cpu_msm(pts, ints_to_limbs(scalars), group=cls)
        for split, ones_tree in ((False, 0), (True, 0), (True, 1)):
            eng.ones_tree = ones_tree
            assert _device_msm(kernels, eng, group, pts, scalars, split) == want, ones_tree


@pytest.mark.parametrize("group,variant", [(g, v) for g in GROUPS for v in ACCUMULATE_VARIANTS[g]])
def test_accumulate_variants(kernels, emulated: bool, group: str, variant: str) -> None:
    """Every accumulation kernel, not only the default one, gives the CPU's sum: on random scalars, and
    on repeated, opposite and infinite bases, which reach the doubling (a bucket adding its own value)
    and cancellation (acc + (-acc)) branches. Few threads per SM, so buckets straddle segments."""
    cls, _ = GROUPS[group]
    eng = DeviceMsm(kernels, threads_per_sm=4 if emulated else 8)
    eng.accumulate_variant[group] = variant
    rng = random.Random(f"acc{group}{variant}")
    n = 200 if emulated else (3000 if group == "g1" else 1000)
    pts = _points(cls, n, 21)
    scalars = [rng.randrange(R_MODULUS) for _ in range(n)]
    assert _device_msm(kernels, eng, group, pts, scalars, False) == cpu_msm(pts, ints_to_limbs(scalars), group=cls)
    few = _points(cls, 60, 4, distinct=3)
    for i in (5, 17, 30):
        few[i] = cls.identity()
    few = few + [-p for p in few[:20]]
    for scalars in ([7] * len(few), [rng.choice([3, R_MODULUS - 3]) for _ in few],
                    [rng.randrange(R_MODULUS) for _ in few]):
        want = cpu_msm(few, ints_to_limbs(scalars), group=cls)
        assert _device_msm(kernels, eng, group, few, scalars, False) == want, scalars[:3]


@pytest.mark.parametrize("group", ["g1", "g2"])
@pytest.mark.parametrize("group_bytes", [6 << 30, 3000])
def test_tree_rounds(kernels, emulated: bool, monkeypatch: pytest.MonkeyPatch, group: str,
                     group_bytes: int) -> None:
    """The batch-affine tree rounds, forced at small sizes (every round runs while any bucket holds two
    points; few threads, so a thread's additions span buckets), give the CPU's sum: random, edge,
    all-equal and small scalars, repeated, opposite and infinite bases (the doubling and P + (-P)
    cases of an affine addition), window groups of one or all windows, and rounds spread over up to
    three waves of threads. A split MSM's 1s summed by the rounds too (`ones_tree`), in chunks of the
    group's bytes."""
    cls, _ = GROUPS[group]
    monkeypatch.setattr(msm_module, "TREE_GROUP_BYTES", group_bytes)
    monkeypatch.setattr(msm_module, "TREE_WAVE_PAIRS", 2)
    eng = DeviceMsm(kernels, threads_per_sm=4 if emulated else 64)
    eng.tree_min_pairs[group] = 1
    eng.tree_threads[group] = 5 if emulated else 37
    eng.tree_waves[group] = 3
    rng = random.Random(f"tree{group}{group_bytes}")
    n = 150 if emulated else (3000 if group == "g1" else 1000)
    pts = _points(cls, n, 61, distinct=n // 2)
    for i in rng.sample(range(n), n // 10):
        pts[i] = cls.identity()
    pts = pts + [-p for p in pts[:n // 5]]
    sets = _scalar_sets(len(pts), rng)
    for name in ("random", "edge", "same", "small", "mostly-binary", "binary", "ones"):
        want = cpu_msm(pts, ints_to_limbs(sets[name]), group=cls)
        for split, ones_tree in ((False, 0), (True, 0), (True, 1)):
            eng.ones_tree = ones_tree
            assert _device_msm(kernels, eng, group, pts, sets[name], split) == want, (name, split, ones_tree)


@pytest.mark.parametrize("group,bits", [("g1", 13), ("g1", 17), ("g1", 20), ("g1", 22), ("g2", 18), ("g2", 20)])
def test_forced_window_sizes(kernels, emulated: bool, group: str, bits: int) -> None:
    """Windows other than the default choice (the per-size windows tuned on the device): random, edge,
    all-equal and all-zero scalars over repeated bases; long windows leave most buckets empty and
    make the reduction's per-bit sums long."""
    if emulated and bits > 17:
        pytest.skip("millions of buckets: too slow for the emulator")
    cls, _ = GROUPS[group]
    eng = DeviceMsm(kernels, threads_per_sm=4 if emulated else 64)
    eng.window_bits = bits
    rng = random.Random(f"window{group}{bits}")
    n = 150 if emulated else (2500 if group == "g1" else 700)
    pts = _points(cls, n, 31, distinct=n // 2)
    sets = _scalar_sets(n, rng)
    for name in ("random", "edge", "same", "zeros", "mostly-binary"):
        want = cpu_msm(pts, ints_to_limbs(sets[name]), group=cls)
        for split in (False, True):
            assert _device_msm(kernels, eng, group, pts, sets[name], split) == want, (name, split)


@pytest.mark.parametrize("group,log_l", [("g1", 0), ("g1", 2), ("g1", 5), ("g2", 1), ("g2", 3)])
def test_reduction_run_lengths(kernels, emulated: bool, group: str, log_l: int) -> None:
    """Every running-sum length of the bucket reduction (tuned per group on the device) gives the CPU's
    sum, with random scalars and with scalars that fill a few buckets only."""
    cls, _ = GROUPS[group]
    eng = DeviceMsm(kernels, threads_per_sm=4 if emulated else 64)
    eng.reduce_log_l[group] = log_l
    rng = random.Random(f"reduce{group}{log_l}")
    n = 120 if emulated else 1500
    pts = _points(cls, n, 41)
    sets = _scalar_sets(n, rng)
    for name in ("random", "edge", "same", "small"):
        want = cpu_msm(pts, ints_to_limbs(sets[name]), group=cls)
        assert _device_msm(kernels, eng, group, pts, sets[name], False) == want, name


@pytest.mark.parametrize("by_window", [0, 1])
@pytest.mark.parametrize("group", ["g1", "g2"])
def test_global_atomic_sort(kernels, emulated: bool, group: str, by_window: int) -> None:
    """The sort large MSMs use (one global atomic per pair, windows of the default size), forced at a
    small size, gives the CPU's sum, with its pairs placed a scalar at a time or a window at a time."""
    cls, _ = GROUPS[group]
    eng = DeviceMsm(kernels, threads_per_sm=4 if emulated else 64)
    eng.smem_sort_max_pairs = 0
    eng.scatter_by_window = by_window
    rng = random.Random(f"gsort{group}")
    n = 150 if emulated else 3000
    pts = _points(cls, n, 51, distinct=n // 3)
    sets = _scalar_sets(n, rng)
    for name in ("random", "edge", "zeros", "binary"):
        want = cpu_msm(pts, ints_to_limbs(sets[name]), group=cls)
        for split in (False, True):
            assert _device_msm(kernels, eng, group, pts, sets[name], split) == want, (name, split)


def test_window_override_is_checked(kernels) -> None:
    eng = DeviceMsm(kernels)
    eng.window_bits = 30
    with pytest.raises(ValueError, match="window_bits"):
        eng.window(1 << 20)


def test_empty_msm_is_infinity(kernels) -> None:
    eng = DeviceMsm(kernels)
    for group, (cls, _) in GROUPS.items():
        assert _device_msm(kernels, eng, group, [], [], False) == cls.identity()
        assert _device_msm(kernels, eng, group, [], [], True) == cls.identity()


def test_batched_msm_and_index_map(kernels, emulated: bool) -> None:
    """Batches (as used when memory is short) and gathered tails give the same sum."""
    rng = random.Random(11)
    n = 500 if emulated else 20000
    pts = _points(G1Point, n, 5)
    scalars = [rng.randrange(R_MODULUS) for _ in range(n)]
    want = cpu_msm(pts, ints_to_limbs(scalars), group=G1Point)
    eng = DeviceMsm(kernels, threads_per_sm=4 if emulated else 1024, max_batch=n // 3 + 1)
    assert _device_msm(kernels, eng, "g1", pts, scalars, False) == want
    assert _device_msm(kernels, eng, "g1", pts, scalars, True) == want


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_ones_summed_by_tree_rounds(kernels, launched: list[str], emulated: bool, group: str) -> None:
    """`ones_tree` 1: the 1s' compacted indices go through the tree rounds as one bucket (the rounds run,
    in several chunks when the group's bytes are few) and msm_sum_list adds what they leave; 2: the list
    summed alone. The sum is the plain one's, with repeated, opposite and infinite bases among the 1s."""
    cls, enc = GROUPS[group]
    rng = random.Random(f"ones{group}")
    n = 200 if emulated else 5000
    pts = _points(cls, n, 17, distinct=n // 4)
    for i in rng.sample(range(n), n // 10):
        pts[i] = cls.identity()
    pts = pts + [-p for p in pts[:n // 5]]
    flags = np.array([rng.choice([0, 1, 1, 2]) for _ in pts], np.uint8)
    want = cpu_msm(pts, ints_to_limbs([int(f == 1) for f in flags]), group=cls)
    eng = DeviceMsm(kernels, threads_per_sm=4 if emulated else 64)
    eng.tree_min_pairs[group] = 1
    eng.tree_threads[group] = 3
    bases = eng.upload_bases(group, enc(pts))
    ones = int((flags == 1).sum())
    # (ones_tree, tree_group_bytes, chunks): 80 entries a chunk at 40 points' bytes (first round: 40);
    # ones_tree 2 sums the compacted list without rounds.
    for ones_tree, group_bytes, chunks in ((0, 6 << 30, 0), (1, 6 << 30, 1),
                                           (1, 40 * 4 * msm_module.AFFINE_WORDS[group], -(-ones // 80)),
                                           (2, 6 << 30, 1)):
        eng.ones_tree, eng.tree_group_bytes = ones_tree, group_bytes
        launched.clear()
        got = eng.to_points(group, [eng.sum_ones(group, bases, kernels.to_device(flags))])[0]
        assert got == want, (ones_tree, group_bytes)
        assert launched.count(f"msm_sum_list_{group}") == chunks
        rounds = launched.count(f"msm_tree_round_{group}")
        assert rounds >= chunks if ones_tree == 1 else rounds == 0, (ones_tree, rounds)


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_sum_ones_chunks(kernels, group: str) -> None:
    """msm_sum_ones with chunks of 1, 2, 3 and 7 flags and one chunk of all: each lane walks its chunk
    to its next 1 (G1 with the next point loaded ahead). Flags with no 1, 1s only, a 1 first or last
    alone, alternating, runs, and infinite bases among the 1s give the CPU's sum."""
    cls, enc = GROUPS[group]
    rng = random.Random(f"chunks{group}")
    n = 41
    pts = _points(cls, n, 29)
    pts[5] = cls.identity()
    bases = DeviceMsm(kernels).upload_bases(group, enc(pts))
    patterns = {"none": [0] * n, "all": [1] * n, "first": [1] + [0] * (n - 1), "last": [2] * (n - 1) + [1],
                "alternating": [i % 2 for i in range(n)], "runs": [int(i // 5 % 2 == 0) for i in range(n)],
                "random": [rng.choice([0, 1, 2]) for _ in range(n)]}
    for chunk in (1, 2, 3, 7, n):
        eng = DeviceMsm(kernels)
        eng.acc_threads[group] = -(-n // chunk)
        for name, flags in patterns.items():
            want = cpu_msm(pts, ints_to_limbs([int(f == 1) for f in flags]), group=cls)
            got = eng.to_points(group, [eng.sum_ones(group, bases, kernels.to_device(np.array(flags, np.uint8)))])[0]
            assert got == want, (chunk, name)


@pytest.mark.parametrize("group", ["g1", "g2"])
@pytest.mark.parametrize("resident,ones_tree", [(False, 0), (True, 0), (True, 1)])
def test_merged_tails_give_the_split_msm(kernels, emulated: bool, group: str, resident: bool,
                                         ones_tree: int) -> None:
    """MergedTails (a split MSM in batches, as streaming plans run it): each batch's 1s summed, the
    other scalars of all batches gathered into MSMs of `capacity`, flushed within a batch when full,
    the bases copied out of each batch's own or indexed in the whole vector. Any batch and capacity
    gives the vector's sum, crowded buckets (equal scalars) included."""
    cls, enc = GROUPS[group]
    rng = random.Random(f"tails{group}{resident}")
    n = 300 if emulated else 20000
    pts = _points(cls, n, 3)
    same = rng.randrange(2, R_MODULUS)
    scalars = [rng.choice([0, 0, 1, 1, 1, same, rng.randrange(R_MODULUS)]) for _ in range(n)]
    want = cpu_msm(pts, ints_to_limbs(scalars), group=cls)
    eng = DeviceMsm(kernels, threads_per_sm=4 if emulated else 1024)
    eng.ones_tree = ones_tree
    bases = eng.upload_bases(group, enc(pts))
    sc = kernels.to_device(ints_to_limbs(scalars).view(np.uint32).reshape(-1, 8))
    for batch, capacity in ((n, n), (n // 3 + 1, n // 5), (n // 7 + 3, 17), (n // 2, 1)):
        tails = msm_module.MergedTails(eng, group, capacity, whole=bases if resident else None)
        for lo in range(0, n, batch):
            tails.add(lo, bases[lo:lo + batch], sc[lo:lo + batch])
        assert eng.to_points(group, [tails.finish()])[0] == want, (batch, capacity)
    empty = msm_module.MergedTails(eng, group, 8, whole=bases if resident else None)
    empty.add(0, bases[:4], kernels.to_device(np.zeros((4, 8), np.uint32)))
    assert eng.to_points(group, [empty.finish()])[0] == cls.identity()


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_bases_uploaded_beside_the_sort(device_units, group: str) -> None:  # type: ignore[no-untyped-def]
    """`bases_ready`: bases copied from pinned memory on another stream while the scalars are sorted;
    the sum is the one of the bases already resident, batched or not."""
    from cuzk.backends.cuda import runtime
    cp = runtime.get_cupy()
    cupyx = runtime.get_cupyx()
    kernels = device_units("curve")

    cls, enc = GROUPS[group]
    rng = random.Random(f"ready{group}")
    n = 30000 if group == "g1" else 6000
    pts = _points(cls, n, 9, distinct=64)
    scalars = [rng.randrange(R_MODULUS) for _ in range(n)]
    want = cpu_msm(pts, ints_to_limbs(scalars), group=cls)
    for max_batch in (None, n // 2 + 1):
        eng = DeviceMsm(kernels, max_batch=max_batch)
        resident = eng.upload_bases(group, enc(pts))
        host = cupyx.empty_pinned(resident.shape, dtype=np.uint32)
        resident.get(out=host)
        sc = cp.asarray(ints_to_limbs(scalars).view(np.uint32).reshape(-1, 8))
        copy = cp.cuda.Stream(non_blocking=True)
        bases = cp.empty_like(resident)
        copy.wait_event(cp.cuda.get_current_stream().record())
        rt = cp.cuda.runtime
        rt.memcpyAsync(bases.data.ptr, host.ctypes.data, host.nbytes, rt.memcpyHostToDevice, copy.ptr)
        out = eng.msm(group, bases, sc, bases_ready=copy.record())
        assert eng.to_points(group, [out])[0] == want, max_batch
