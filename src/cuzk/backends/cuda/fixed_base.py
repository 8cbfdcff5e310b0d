"""Fixed-base multiplication on a CUDA device: k_i * g for one base g, as blstrs bytes (kernels/fixed_base.cu).

Parameter generation multiplies one G1 and one G2 base by hundreds of millions of scalars (PoRep
32GiB: 427M G1 and 33M G2 points, 47 GB of output), so the work is streamed in chunks and overlapped:

* the window table (`cuzk.curve.fixed_base.window_table`, built on the CPU, its layout the device's
  affine points) is uploaded once per base and width and cached;
* per chunk, the scalars go up on an upload stream, the kernel writes the encoded points into one of
  two device buffers on the compute stream, and a copy stream brings them down into one of two
  pinned buffers; meanwhile the host copies the previous chunk from its pinned buffer into `out`
  (several threads: one memcpy thread is slower than the copy engine), so the device computes
  chunk k while chunk k-1 lands in `out` (often a memory-mapped parameter file);
* the kernel checks that every scalar is canonical (< r) and reports the first that is not, so
  the host never scans the scalars; the call then raises ValueError (`out` is left unspecified).

Output bytes are those of `cuzk.curve.fixed_base.g1_fixed_base_batch` / `g2_fixed_base_batch`: an
affine point has one encoding, whatever the method that computed it.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from cuzk.curve.fixed_base import check_into_arguments, check_scalars, choose_window, window_table
from cuzk.curve.points import G1_UNCOMPRESSED_BYTES, G2_UNCOMPRESSED_BYTES, G1Point, G2Point

#: Encoded point bytes per group.
POINT_BYTES = {"g1": G1_UNCOMPRESSED_BYTES, "g2": G2_UNCOMPRESSED_BYTES}
_KERNELS = {"g1": "g1_fixed_base", "g2": "g2_fixed_base"}
#: Window widths for large batches, the fastest on an H200 (benchmarks/results/cuda-fixed-base-h200-2026-11-30.json).
#: Fewer windows win even when the table (16 x 2^15 points: 50 MB for G1, 100 MB for G2) outgrows L2.
DEFAULT_WINDOW = {"g1": 16, "g2": 16}
#: From this many scalars on, the default width; below, the CPU cost model's (smaller table to build).
_LARGE_BATCH = 1 << 20
#: Scalars per thread sharing one inversion (at most the kernel's FB_MAX_BATCH). Measured at w = 13,
#: 2^24 points: G1 batch 1/4/8 at 28.2/65.4/84.4 M points/s, G2 17.6/27.9/30.4 M/s.
DEFAULT_BATCH = {"g1": 8, "g2": 8}
MAX_BATCH = 16
BLOCK = 128
_SCALAR_BITS = 256
_NO_BAD_INDEX = 0xFFFFFFFF
_CHUNK_BYTES = 256 << 20      # encoded output per chunk (two device and two pinned buffers of this)
_COPY_THREADS = 8
_CACHED_TABLES = 4


def windows(w: int) -> int:
    """Signed digits per scalar for width w."""
    return math.ceil(_SCALAR_BITS / w)


class DeviceFixedBase:
    """Batched fixed-base multiplications on the device of `kernels` (a KernelModule of the "setup"
    unit). Not thread-safe: callers serialise (CudaBackend holds its device lock)."""

    def __init__(self, kernels: Any, *, chunk_bytes: int = _CHUNK_BYTES, copy_threads: int = _COPY_THREADS) -> None:
        if chunk_bytes < G2_UNCOMPRESSED_BYTES:
            raise ValueError(f"chunk_bytes must hold at least one G2 point, got {chunk_bytes}")
        self.kernels = kernels
        cp = self.cp = kernels.xp
        self.chunk_bytes = int(chunk_bytes)
        self._upload = cp.cuda.Stream(non_blocking=True)
        self._compute = cp.cuda.Stream(non_blocking=True)
        self._copy = cp.cuda.Stream(non_blocking=True)
        self._tables: OrderedDict[tuple[str, bytes, int], Any] = OrderedDict()
        self._pinned: list[np.ndarray] = []
        self._threads = max(1, min(copy_threads, os.cpu_count() or 1))
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    # -- tables ---------------------------------------------------------------------------------------

    @staticmethod
    def window_for(group: str, n: int) -> int:
        """The width for n scalars: the measured default for large batches, below that the CPU cost
        model's (its table is built on the CPU: a narrower one is cheaper for few scalars)."""
        if n >= _LARGE_BATCH:
            return DEFAULT_WINDOW[group]
        return min(DEFAULT_WINDOW[group], choose_window(max(n, 1)))

    def table(self, group: str, base: G1Point | G2Point, w: int) -> Any:
        """The device copy of base's window table for width w (built on the CPU once, then cached)."""
        key = (group, bytes(base.to_xy_bytes_be()), w)
        dev = self._tables.get(key)
        if dev is None:
            host = window_table(base, w)
            dev = self.cp.asarray(host.reshape(host.shape[0] * host.shape[1], -1))
            # The copy ran on the current stream; the kernels run on others (non-blocking ones do not
            # wait for the legacy default stream), so the table must be complete before it is returned.
            self.cp.cuda.Device().synchronize()
            self._tables[key] = dev
            while len(self._tables) > _CACHED_TABLES:
                self._tables.popitem(last=False)
        else:
            self._tables.move_to_end(key)
        return dev

    def clear(self) -> None:
        """Drop the cached tables and pinned buffers."""
        self._tables.clear()
        self._pinned = []

    # -- kernels --------------------------------------------------------------------------------------

    def launch(self, group: str, table: Any, w: int, scalars: Any, n: int, out: Any, bad: Any,
               batch: int | None = None, index_base: int = 0) -> None:
        """Queue the kernel on the current stream: out[:n] = encodings of scalars[:n] * g, where table is
        `table(group, g, w)`, scalars an (>= n, 4) uint64 and out an (>= n, bytes) uint8 device array;
        bad[0] gets min(itself, index_base + index of the first non-canonical scalar)."""
        batch = DEFAULT_BATCH[group] if batch is None else batch
        if not 1 <= batch <= MAX_BATCH:
            raise ValueError(f"batch must be in 1..{MAX_BATCH}, got {batch}")
        if n <= 0:
            return
        per_block = BLOCK * batch
        self.kernels.launch(_KERNELS[group], (n + per_block - 1) // per_block, BLOCK,
                            (table, w, windows(w), scalars, n, batch, index_base, out, bad))

    # -- the whole batch ------------------------------------------------------------------------------

    def run(self, group: str, base: G1Point | G2Point, scalars: np.ndarray, out: np.ndarray, *,
            window: int | None = None, batch: int | None = None) -> None:
        """out[i] = blstrs uncompressed encoding of scalars[i] * base (infinity for 0); see the module
        docstring. `window` (2..16) and `batch` (1..16) override the defaults."""
        check_into_arguments(scalars, out, POINT_BYTES[group])
        n = scalars.shape[0]
        if n >= _NO_BAD_INDEX:
            raise ValueError(f"at most {_NO_BAD_INDEX - 1} scalars per call, got {n}")
        if n == 0:
            return
        identity = G2Point.identity() if group == "g2" else G1Point.identity()
        if base == identity:
            check_scalars(scalars)
            out[:] = 0
            out[:, 0] = 0x40
            return
        w = self.window_for(group, n) if window is None else window
        with self._lock:
            self._run(group, self.table(group, base, w), w, scalars, out, batch)

    def _pinned_buffers(self) -> list[np.ndarray]:
        if not self._pinned:
            from cuzk.backends.cuda.runtime import get_cupyx

            self._pinned = [get_cupyx().empty_pinned(self.chunk_bytes, dtype=np.uint8) for _ in range(2)]
        return self._pinned

    def _copy_out(self, dst: np.ndarray, src: np.ndarray) -> None:
        """dst[...] = src split by rows over the copy threads (numpy copies release the GIL)."""
        rows = dst.shape[0]
        if self._threads == 1 or rows * dst.shape[1] < (4 << 20):
            dst[...] = src
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="cuzk-fixed-base")
        bounds = np.linspace(0, rows, self._threads + 1).astype(int).tolist()

        def part(k: int) -> None:
            dst[bounds[k]:bounds[k + 1]] = src[bounds[k]:bounds[k + 1]]

        list(self._pool.map(part, range(self._threads)))

    def _run(self, group: str, table: Any, w: int, scalars: np.ndarray, out: np.ndarray, batch: int | None) -> None:
        cp = self.cp
        runtime = cp.cuda.runtime
        width = POINT_BYTES[group]
        n = scalars.shape[0]
        chunk = min(n, self.chunk_bytes // width)
        pinned = self._pinned_buffers()
        with self._compute:
            dev_scalars = [cp.empty((chunk, 4), dtype=cp.uint64) for _ in range(2)]
            dev_out = [cp.empty((chunk, width), dtype=cp.uint8) for _ in range(2)]
            bad = cp.full(1, _NO_BAD_INDEX, dtype=cp.uint32)
        self._upload.wait_event(self._compute.record())  # the allocations above are ordered on compute
        self._copy.wait_event(self._compute.record())
        kernel_done: list[Any] = [None, None]
        copy_done: list[Any] = [None, None]
        host_scalars: list[np.ndarray | None] = [None, None]  # alive until their upload has run
        pending: tuple[int, int, int] | None = None

        def drain(lo: int, hi: int, slot: int) -> None:
            copy_done[slot].synchronize()
            self._copy_out(out[lo:hi], pinned[slot][: (hi - lo) * width].reshape(hi - lo, width))

        for k, lo in enumerate(range(0, n, chunk)):
            hi = min(n, lo + chunk)
            count, slot = hi - lo, k & 1
            if kernel_done[slot] is not None:  # chunk k-2's kernel has read dev_scalars[slot]
                self._upload.wait_event(kernel_done[slot])
            host = np.ascontiguousarray(scalars[lo:hi])
            host_scalars[slot] = host
            runtime.memcpyAsync(dev_scalars[slot].data.ptr, host.ctypes.data, host.nbytes,
                                runtime.memcpyHostToDevice, self._upload.ptr)
            self._compute.wait_event(self._upload.record())
            if copy_done[slot] is not None:  # chunk k-2's encodings have left dev_out[slot]
                self._compute.wait_event(copy_done[slot])
            with self._compute:
                self.launch(group, table, w, dev_scalars[slot], count, dev_out[slot], bad, batch, lo)
            kernel_done[slot] = self._compute.record()
            self._copy.wait_event(kernel_done[slot])
            runtime.memcpyAsync(pinned[slot].ctypes.data, dev_out[slot].data.ptr, count * width,
                                runtime.memcpyDeviceToHost, self._copy.ptr)
            copy_done[slot] = self._copy.record()
            if pending is not None:
                drain(*pending)
            pending = (lo, hi, slot)
        if pending is not None:
            drain(*pending)
        self._upload.synchronize()
        self._compute.synchronize()
        first_bad = int(bad.get()[0])
        if first_bad != _NO_BAD_INDEX:
            raise ValueError(f"scalar {first_bad} is not a canonical Fr element (it is >= r)")
