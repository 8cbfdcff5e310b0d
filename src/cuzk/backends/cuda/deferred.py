"""Finishing on the device an aux vector whose generator left its bulk to it (`cuzk.witness_gen.deferred`).

Only the rows the host wrote go up (0.9% of a PoRep partition, 0.6% of a WindowPoSt one), gathered into
one upload and moved into place by device-to-device copies; the deferred gadgets' aux are written
by their kernels: SHA-256 gadgets one launch per plan (`DeviceSha256Witness.launches`), Poseidon
Merkle paths one launch per job (`DevicePoseidonPaths.generate_into`). The launches are small (a
PoRep label plan has 18 instances, a SnapDeals path job 86 paths of one thread each), so they run
side by side on streams of their own, and the current stream waits for all of them.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from cuzk.backends.cuda.poseidon_witness import DevicePoseidonPaths
from cuzk.backends.cuda.sha256_witness import DeviceSha256Witness
from cuzk.witness_gen.deferred import DeferredWitness

__all__ = ["complete_on_device"]

#: Side streams per device (a PoRep partition has 12 SHA-256 plans: 11 layers, tree_d).
_SIDE_STREAMS = 16
_streams: dict[int, list[Any]] = {}
_streams_lock = threading.Lock()


def _side_streams(xp: Any) -> list[Any]:
    device = xp.cuda.Device().id
    with _streams_lock:
        if device not in _streams:
            _streams[device] = [xp.cuda.Stream(non_blocking=True) for _ in range(_SIDE_STREAMS)]
        return _streams[device]


def _run_side_by_side(xp: Any, launches: list[Callable[[], Any]]) -> None:
    """Each launch on a side stream (round robin), after the current stream's work so far; the current
    stream then waits for them all."""
    main = xp.cuda.get_current_stream()
    ready = main.record()
    done = []
    for k, launch in enumerate(launches):
        side = _side_streams(xp)[k % _SIDE_STREAMS]
        side.wait_event(ready)
        with side:
            launch()
        done.append(side.record())
    for event in done:
        main.wait_event(event)


def complete_on_device(deferred: DeferredWitness, aux: np.ndarray, out: Any, kernels: Any,
                       sha256: Callable[[], DeviceSha256Witness],
                       paths: Callable[[], DevicePoseidonPaths]) -> None:
    """`out` (a C-contiguous (num_aux, 8) uint32 device array) := the aux vector `aux` ((num_aux, 4)
    uint64 on the host, the deferred gadgets' rows unwritten) with `deferred`'s gadgets completed.
    `kernels` is any `KernelModule` of the device (for its array module); `sha256` and `paths` give
    the generators, called only when there are jobs of their kind (each compiles its unit once)."""
    xp = kernels.xp
    num_aux = aux.shape[0]
    if aux.ndim != 2 or aux.shape[1] != 4 or aux.dtype != np.uint64:
        raise ValueError(f"aux must be (num_aux, 4) uint64 limbs, got {aux.dtype} {aux.shape}")
    if tuple(out.shape) != (num_aux, 8) or out.dtype != xp.uint32 or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous ({num_aux}, 8) uint32 array, got {out.dtype} "
                         f"{tuple(out.shape)}")
    starts, lengths = deferred.host_ranges(num_aux)
    if int(lengths.sum()):
        # One upload: hundreds of small pageable copies cost ~0.2 ms each.
        rows = kernels.to_device(np.concatenate(
            [aux[s:s + n] for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)]))
        stream = xp.cuda.get_current_stream()
        offset = 0
        for start, length in zip(starts.tolist(), lengths.tolist(), strict=True):
            (out.data + start * 32).copy_from_device_async(rows.data + offset * 32, length * 32, stream)
            offset += length
        del rows  # its memory returns to this stream's pool: a later use is ordered after the copies
    launches: list[Callable[[], Any]] = []
    if deferred.path_jobs:  # the longest launches first
        generator = paths()
        launches += [functools.partial(generator.generate_into, job.shape, job.layout, job.leaves, job.indices,
                                       job.siblings, out, job.rows) for job in deferred.path_jobs]
    if deferred.sha256_jobs:
        launches += sha256().launches(deferred.sha256_jobs, out)
    _run_side_by_side(xp, launches)
