"""A pinned host buffer that a proof copies its witness into before it takes the device.

In resident mode a proof stages its inputs on the device before it takes the device lock, beside the
proof holding it. A streaming plan's working reserve is most of its budget, so there the next proof
cannot, and copying its witness through the pinned uploader's small buffers with the device held
costs more than twice the staged-ahead transfer. Host memory is not what the cap limits, so the host
side of that copy is done here, before the lock: the witness (or, where the host computes a, b, c,
those) goes into one pinned buffer of the key's, and with the device held only the copy engine's
transfer from it remains.

One buffer serves two workers of a device: the proof on the device hands it back as soon as its
transfer is queued, before its kernels run, and the next proof's copy waits for that transfer
(an event) before it overwrites the bytes. A proof that finds the buffer taken, or too small, stages
as before. Pure numpy with the copy and the pinned array given, so it is tested without a GPU.

Where the host computes a, b, c, it writes them straight into the buffer (`take`, no copy), and a
proof that finds it taken waits for it: a, b, c are 12.5 GB a PoRep-32GiB partition, which a second
worker holding its own pageable copy would add to the device process beside 47 GB of pinned key
bases: more than a 128 GiB host has left at 16 GiB. There the next partition's products set the
pace, and waiting for the whole transfer before they start left the device idle between
partitions. So the transfer may hand the buffer back in parts (`release` with `marks`: the first
bytes of every array are read once an event is done), and a writer that takes it `in_parts` writes
each part once the transfer has read it (`Filled.writable`). Figures:
benchmarks/results/porep-e2e-cuda-32g-cap16GiB-h200-2026-12-04d.json (history: benchmarks/HISTORY.md).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Each array starts at a multiple of this many bytes in the buffer (the copy engine's reads of a
#: misaligned source are slower).
ALIGN = 256


def staging_bytes(sizes: Mapping[str, int] | list[int]) -> int:
    """Buffer bytes that hold arrays of these byte sizes, each aligned."""
    values = sizes.values() if isinstance(sizes, Mapping) else sizes
    return sum(-(-n // ALIGN) * ALIGN for n in values)


#: (nbytes, event): the first nbytes of every array in the buffer are read once the event is done.
Mark = tuple[int, Any]


@dataclass
class Filled:
    """The buffer holding one proof's arrays: `views` (name -> the bytes, uint8, in the pinned
    buffer), to be handed back through `release` with the event after which nothing reads them (and,
    where the reads go in parts, the marks of each part)."""

    owner: HostStaging
    views: dict[str, np.ndarray] = field(default_factory=dict)
    released: bool = False
    #: The last reader's marks still to wait for before writing (`writable`), in increasing nbytes;
    #: None for a mark over the whole buffer.
    pending: list[tuple[int | None, Any]] = field(default_factory=list)
    free: float = 0.0  #: the first bytes of every view that no earlier reader reads any more (inf: all)

    def release(self, read_done: Any, marks: list[Mark] | None = None) -> None:
        if not self.released:
            self.released = True
            if read_done is None and self.pending:
                # Handed back unread (a failed attempt) before the last reader was waited for: the
                # next taker waits for what that reader may still read.
                *parts, (_, read_done) = self.pending
                marks = [(n, e) for n, e in parts if n is not None]
            self.owner._give(read_done, marks)

    def writable(self, nbytes: int | None = None) -> None:
        """Wait until the last reader is done with the first `nbytes` of every view (None: all)."""
        want = math.inf if nbytes is None else nbytes
        while self.pending and want > self.free:
            covered, event = self.pending[0]
            event.synchronize()
            self.pending.pop(0)
            self.free = math.inf if covered is None else max(self.free, covered)


class HostStaging:
    """One pinned buffer (module docstring); events are the device runtime's (anything with
    `synchronize()`)."""

    def __init__(self, buffer: np.ndarray) -> None:
        self._buffer = buffer.reshape(-1).view(np.uint8)
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._taken = False
        self._read_done: Any = None
        self._marks: list[Mark] | None = None
        self._layout: tuple[int, ...] = ()  #: the last taker's array sizes, in order
        self.fills = 0  #: proofs that staged through the buffer
        self.missed = 0  #: proofs that found it taken (or too small) and staged with the device held

    @property
    def nbytes(self) -> int:
        return int(self._buffer.nbytes)

    def fill(self, arrays: Mapping[str, np.ndarray],
             copy: Callable[[np.ndarray, np.ndarray], None] | None = None) -> Filled | None:
        """Take the buffer and copy `arrays` into it, each aligned, once the transfer that last read
        it is done, by `copy(dst, src)` (the uploader's threaded host copy; default numpy's); None
        (nothing copied) when another proof holds it or they do not fit."""
        flats = {name: np.ascontiguousarray(v).reshape(-1).view(np.uint8) for name, v in arrays.items()}
        filled = self.take({name: f.nbytes for name, f in flats.items()}, wait=False)
        if filled is None:
            return None
        try:
            filled.writable()
            do_copy = copy or np.copyto
            for name, flat in flats.items():
                if flat.nbytes:
                    do_copy(filled.views[name], flat)
        except BaseException:
            filled.release(None)
            raise
        return filled

    def take(self, sizes: Mapping[str, int], *, wait: bool, in_parts: bool = False) -> Filled | None:
        """Take the buffer for arrays of these byte sizes, once the transfer that last read it is
        done (with `in_parts`, and arrays laid out as the last taker's, once `writable` says so, part
        by part): `views` to write them into (uninitialised), each aligned. None when they do not fit,
        or when another proof holds it and not `wait` (else this waits for its release)."""
        with self._lock:
            if staging_bytes(sizes) > self.nbytes or (self._taken and not wait):
                self.missed += 1
                return None
            while self._taken:
                self._freed.wait()
            self._taken = True
            read_done, self._read_done = self._read_done, None
            marks, self._marks = self._marks, None
            same = tuple(sizes.values()) == self._layout
            self._layout = tuple(sizes.values())
        filled = Filled(self)
        if read_done is not None:
            filled.pending = list(marks) if marks and same else []
            filled.pending.append((None, read_done))
        if not in_parts:
            try:
                filled.writable()
            except BaseException:
                filled.release(None)
                raise
        offset = 0
        for name, nbytes in sizes.items():
            filled.views[name] = self._buffer[offset: offset + nbytes]
            offset += staging_bytes([nbytes])
        with self._lock:
            self.fills += 1
        return filled

    def _give(self, read_done: Any, marks: list[Mark] | None = None) -> None:
        with self._lock:
            self._read_done = read_done
            self._marks = sorted(marks, key=lambda m: m[0]) if marks and read_done is not None else None
            self._taken = False
            self._freed.notify()
