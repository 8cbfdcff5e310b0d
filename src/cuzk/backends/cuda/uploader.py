"""Host -> device copies of pageable numpy arrays at close to PCIe speed, through pinned buffers."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from cuzk.backends.cuda.runtime import get_cupyx

STAGE_BYTES = 64 << 20
STAGE_THREADS = 8


class PinnedUploader:
    """Host -> device copies on one stream through two pinned staging buffers: the CPU fills one
    while the DMA engine drains the other, so pageable numpy arrays upload at close to PCIe speed.
    Each staging copy is split over `threads` threads (numpy copies release the GIL): one thread's
    memcpy is far slower than the copy engine (figures: benchmarks/HISTORY.md, "Figures cut from code
    comments")."""

    def __init__(self, cp: Any, stream: Any, chunk: int = STAGE_BYTES, threads: int = STAGE_THREADS) -> None:
        self.cp = cp
        self.stream = stream
        self.chunk = chunk
        self._host = [get_cupyx().empty_pinned(chunk, dtype=np.uint8) for _ in range(2)]
        self._done: list[Any] = [None, None]
        self._parts = max(1, min(threads, os.cpu_count() or 1))
        self._pool = ThreadPoolExecutor(max_workers=self._parts, thread_name_prefix="cuzk-stage") \
            if self._parts > 1 else None

    def host_copy(self, dst: np.ndarray, src: np.ndarray) -> None:
        """dst[:] = src (1-D, same dtype) split over the uploader's threads."""
        size = src.shape[0]
        if self._pool is None or size < (1 << 20):
            dst[:size] = src
            return
        bounds = np.linspace(0, size, self._parts + 1).astype(int).tolist()

        def part(k: int) -> None:
            dst[bounds[k]:bounds[k + 1]] = src[bounds[k]:bounds[k + 1]]

        list(self._pool.map(part, range(self._parts)))

    def upload(self, dst: Any, src: np.ndarray) -> None:
        """Queue dst[...] = src on the stream (dst a C-contiguous device array of the same bytes)."""
        flat = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
        if flat.nbytes != dst.nbytes:
            raise ValueError(f"upload size mismatch: {flat.nbytes} host bytes, {dst.nbytes} device bytes")
        runtime = self.cp.cuda.runtime
        for k, off in enumerate(range(0, flat.nbytes, self.chunk)):
            slot = k & 1
            if self._done[slot] is not None:
                self._done[slot].synchronize()
            size = min(self.chunk, flat.nbytes - off)
            self.host_copy(self._host[slot], flat[off:off + size])
            runtime.memcpyAsync(dst.data.ptr + off, self._host[slot].ctypes.data, size,
                                runtime.memcpyHostToDevice, self.stream.ptr)
            self._done[slot] = self.stream.record()
