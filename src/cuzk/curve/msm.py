"""Multi-scalar multiplication on the CPU, split across all cores.

Two engines compute the same sums. **blst** (the default; `curve.blst`) runs the MSMs over
parameter vectors (`msm_bases`), 1.5-2x faster than **arkworks** (py-arkworks), which stays for
lists of py-arkworks points (`msm`: verifier, setup) and wherever blst cannot be loaded.
`CUZK_CPU_MSM=arkworks|blst` picks one explicitly. Both libraries release the GIL, so work is cut
into pieces that run on one shared thread pool (docs/dependencies.md §3). Scalars equal to 0 are dropped
and scalars equal to 1 are summed with plain additions before Pippenger sees the rest: most of a
SHA-256 circuit's witness is bits.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import reduce
from itertools import pairwise
from operator import add
from typing import TypeVar

import numpy as np

from cuzk.curve import blst
from cuzk.curve.bases import G1Bases, G2Bases
from cuzk.curve.points import G1_UNCOMPRESSED_BYTES, G2_UNCOMPRESSED_BYTES, G1Point, G2Point, Scalar
from cuzk.errors import CuzkError

P = TypeVar("P", G1Point, G2Point)

#: Below this many scalars a chunk is not worth a thread hop. Splitting pays from about 2 x 128 scalars
#: on (benchmarks/HISTORY.md), so small proofs use every core too.
MIN_CHUNK = 128

ENGINE_ENV = "CUZK_CPU_MSM"
ENGINES = ("blst", "arkworks")
#: Bytes a converted parameter point holds, per engine (G1, G2): blst's affine limbs are as large as
#: the encoding; py-arkworks objects measured ~2.6x the file bytes.
_CONVERTED_BYTES = {"blst": (G1_UNCOMPRESSED_BYTES, G2_UNCOMPRESSED_BYTES), "arkworks": (256, 576)}


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


_POOL: ThreadPoolExecutor | None = None


def msm_pool() -> ThreadPoolExecutor:
    """The process-wide MSM thread pool, one worker per usable core."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=cpu_count(), thread_name_prefix="cuzk-msm")
    return _POOL


def msm_engine() -> str:
    """The engine for parameter-vector MSMs: `CUZK_CPU_MSM` if set, else blst when it loads."""
    wanted = os.environ.get(ENGINE_ENV, "").strip().lower()
    if wanted and wanted not in ENGINES:
        raise CuzkError(f"{ENGINE_ENV}={wanted!r} is not an MSM engine; choose one of {', '.join(ENGINES)}")
    if wanted == "arkworks":
        return "arkworks"
    reason = blst.unavailable_reason()
    if reason is None:
        return "blst"
    if wanted == "blst":
        raise CuzkError(f"{ENGINE_ENV}=blst, but blst cannot be used: {reason}")
    return "arkworks"


def converted_bytes_per_point(is_g2: bool) -> int:
    """Memory a parameter point takes once converted for the current engine."""
    return _CONVERTED_BYTES[msm_engine()][int(is_g2)]


def prepare_bases(bases: G1Bases | G2Bases) -> None:
    """Convert a parameter vector for the current engine now, so that the first proof does not pay."""
    if msm_engine() == "blst":
        bases.affine()
    else:
        bases.points()


def scalars_to_native(scalars: np.ndarray) -> list[Scalar]:
    """(n, 4) canonical uint64 limbs -> py-arkworks scalars (from_le_bytes: ~0.2 µs each)."""
    raw = np.ascontiguousarray(scalars, dtype=np.uint64).tobytes()
    from_le = Scalar.from_le_bytes
    return [from_le(raw[k : k + 32]) for k in range(0, len(raw), 32)]


def _check_shapes(n_points: int, scalars: np.ndarray) -> None:
    if scalars.ndim != 2 or scalars.shape[1] != 4:
        raise ValueError(f"scalars must be an (n, 4) uint64 array, got shape {scalars.shape}")
    # py-arkworks silently truncates mismatched lengths; we refuse instead.
    if scalars.shape[0] != n_points:
        raise ValueError(f"MSM length mismatch: {n_points} points, {scalars.shape[0]} scalars")


def _split_by_value(scalars: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of scalars equal to 1, and of scalars other than 0 and 1."""
    high_zero = ~scalars[:, 1:].any(axis=1)
    low = scalars[:, 0]
    is_one = high_zero & (low == 1)
    is_big = ~(high_zero & (low <= 1))
    return np.flatnonzero(is_one), np.flatnonzero(is_big)


def _sum_points(points: Sequence[P], identity: P) -> P:
    return reduce(add, points, identity)


def msm_async(points: Sequence[P], scalars: np.ndarray, *, group: type[P] | None = None,
              chunks: int | None = None) -> list[Future]:
    """Start an MSM; the result is the sum of the returned futures' results.

    Returning futures lets a caller start G1 and G2 MSMs together and keep every core busy. `group`
    (G1Point or G2Point) is needed only when `points` may be empty.
    """
    _check_shapes(len(points), scalars)
    pool = msm_pool()
    if group is None:
        if not len(points):
            raise ValueError("an empty MSM needs its group (G1Point or G2Point)")
        group = type(points[0])
    is_g1 = group is G1Point
    identity = G1Point.identity() if is_g1 else G2Point.identity()
    if not len(points):
        done: Future = Future()
        done.set_result(identity)
        return [done]
    ones, big = _split_by_value(scalars)
    all_points = isinstance(points, list) and len(big) == len(points)
    big_points = points if all_points else [points[i] for i in big.tolist()]
    big_scalars = scalars_to_native(scalars[big])
    futures = [pool.submit(_sum_points, [points[i] for i in ones.tolist()], identity)]
    n_chunks = max(1, min(chunks or cpu_count(), len(big) // MIN_CHUNK))
    multiexp = G1Point.multiexp_unchecked if is_g1 else G2Point.multiexp_unchecked
    bounds = np.linspace(0, len(big), n_chunks + 1).astype(int)
    for lo, hi in pairwise(bounds.tolist()):
        if hi > lo:
            futures.append(pool.submit(multiexp, big_points[lo:hi], big_scalars[lo:hi]))
    return futures


def msm_bases_async(bases: G1Bases | G2Bases, scalars: np.ndarray) -> list[Future]:
    """Start Σ scalars[i] * bases[i] with the current engine; sum the futures with `gather`."""
    if msm_engine() == "arkworks":
        return msm_async(bases.points(), scalars, group=bases.group)
    _check_shapes(len(bases), scalars)
    layout = blst.G2 if bases.group is G2Point else blst.G1
    affine = bases.affine()
    pool, threads = msm_pool(), cpu_count()
    ones, big = _split_by_value(scalars)
    if len(big) == len(bases):
        futures = blst.msm_tasks(pool, layout, affine, None, scalars, threads)
    else:
        futures = blst.msm_tasks(pool, layout, affine, big, scalars[big], threads)
    futures += blst.sum_tasks(pool, layout, affine, ones, threads)
    if not futures:
        done: Future = Future()
        done.set_result(bases.group.identity())
        futures = [done]
    return futures


def msm_bases(bases: G1Bases | G2Bases, scalars: np.ndarray) -> P:
    """Σ scalars[i] * bases[i]; scalars as (n, 4) canonical uint64 limbs."""
    return gather(msm_bases_async(bases, scalars))


def gather(futures: Sequence[Future]) -> P:
    return reduce(add, (f.result() for f in futures))


def msm(points: Sequence[P], scalars: np.ndarray, *, group: type[P] | None = None) -> P:
    """Σ scalars[i] * points[i]; scalars as (n, 4) canonical uint64 limbs."""
    return gather(msm_async(points, scalars, group=group))
