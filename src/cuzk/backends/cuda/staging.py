"""A pinned host buffer that a proof copies its witness into before it takes the device.

In resident mode a proof stages its inputs on the device before it takes the device lock, beside the
proof holding it. A streaming plan's working reserve is most of its budget, so there the next proof
cannot, and copying its witness through the pinned uploader's small buffers with the device held
takes 517 ms a PoRep-32GiB partition at 24 GiB, against 212 ms staged ahead uncapped
(benchmarks/results/porep-e2e-cuda-32g-cap24GiB-h200-2026-12-03.json). Host memory is not what the
cap limits, so the host side of that copy is done here, before the lock: the witness (or, where the
host computes a, b, c, those) goes into one pinned buffer of the key's, and with the device held
only the copy engine's transfer from it remains.

One buffer serves two workers of a device: the proof on the device hands it back as soon as its
transfer is queued, before its kernels run, and the next proof's copy waits for that transfer
(an event) before it overwrites the bytes. A proof that finds the buffer taken, or too small, stages
as before. Pure numpy with the copy and the pinned array given, so it is tested without a GPU.
"""

from __future__ import annotations

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


@dataclass
class Filled:
    """The buffer holding one proof's arrays: `views` (name -> the bytes, uint8, in the pinned
    buffer), to be handed back through `release` with the event after which nothing reads them."""

    owner: HostStaging
    views: dict[str, np.ndarray] = field(default_factory=dict)
    released: bool = False

    def release(self, read_done: Any) -> None:
        if not self.released:
            self.released = True
            self.owner._give(read_done)


class HostStaging:
    """One pinned buffer (module docstring); events are the device runtime's (anything with
    `synchronize()`)."""

    def __init__(self, buffer: np.ndarray) -> None:
        self._buffer = buffer.reshape(-1).view(np.uint8)
        self._lock = threading.Lock()
        self._taken = False
        self._read_done: Any = None
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
        with self._lock:
            if self._taken or staging_bytes([f.nbytes for f in flats.values()]) > self.nbytes:
                self.missed += 1
                return None
            self._taken = True
            read_done, self._read_done = self._read_done, None
        filled = Filled(self)
        try:
            if read_done is not None:
                read_done.synchronize()
            do_copy = copy or np.copyto
            offset = 0
            for name, flat in flats.items():
                dst = self._buffer[offset: offset + flat.nbytes]
                if flat.nbytes:
                    do_copy(dst, flat)
                filled.views[name] = dst
                offset += staging_bytes([flat.nbytes])
        except BaseException:
            filled.release(None)
            raise
        with self._lock:
            self.fills += 1
        return filled

    def _give(self, read_done: Any) -> None:
        with self._lock:
            self._read_done = read_done
            self._taken = False
