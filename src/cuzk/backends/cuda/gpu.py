"""One CUDA device as the proofs use it (sppark's `gpu_t`): its context, the kernel units, the
streams every proof shares, the memory plan, and uploads complete on return.

Kernel units other than "curve" compile on first use (`prepare_kernels` does it ahead: a unit's
NVRTC compile inside a device phase would hold the device past a WindowPoSt deadline).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from cuzk.backends.cuda.device import MemoryPlan, properties, shared_limit
from cuzk.backends.cuda.fixed_base import DeviceFixedBase
from cuzk.backends.cuda.module import get_module
from cuzk.backends.cuda.msm import DeviceMsm
from cuzk.backends.cuda.ntt import DeviceNtt
from cuzk.backends.cuda.poseidon_witness import DevicePoseidonPaths
from cuzk.backends.cuda.runtime import get_cupy
from cuzk.backends.cuda.sha256_witness import DeviceSha256Witness
from cuzk.backends.cuda.spmv import DeviceSpmv
from cuzk.backends.cuda.uploader import PinnedUploader


class Gpu:
    """The device `device_id`: `cp` (CuPy), `device` (its context, to enter around CUDA calls), the
    curve kernels (`kernels`, `ntt`, `msm`), the compute stream of the device phases, B's G2 stream
    beside it, the streamed bases' copy stream, and `memory`, the device's `MemoryPlan`.
    `memory_limit`: bytes of device memory to plan with and use at most (None: what is free);
    `memory_share`: with no limit, plan with total memory / memory_share (several logical devices,
    each its own process, on this GPU)."""

    def __init__(self, device_id: int, memory_margin: int | None = None, memory_limit: int | None = None,
                 memory_share: int = 1) -> None:
        cupy = get_cupy()
        self.cp = cupy
        self.device_id = device_id
        self.device = cupy.cuda.Device(device_id)
        with self.device:
            self.kernels = get_module(device_id)
            self.ntt = DeviceNtt(self.kernels)
            self.msm = DeviceMsm(self.kernels)
            self.compute = cupy.cuda.Stream(non_blocking=True)
            self.g2 = cupy.cuda.Stream(non_blocking=True)  # B's G2 MSM, beside the G1 MSMs
            self.bases_copy = cupy.cuda.Stream(non_blocking=True)  # streamed bases, beside the MSMs
            self._copy = cupy.cuda.Stream(non_blocking=True)
            self._uploader = PinnedUploader(cupy, self._copy)
        self.props = properties(device_id)
        self.memory = MemoryPlan(device_id, memory_margin,
                                 shared_limit(memory_limit, self.props.total_memory, memory_share))
        self.peak_pool = 0  # most bytes CuPy's pool held, sampled at a proof's phase boundaries
        self._spmv: DeviceSpmv | None = None
        self._sha256_witness: DeviceSha256Witness | None = None
        self._poseidon_paths: DevicePoseidonPaths | None = None
        self._fixed_base: DeviceFixedBase | None = None

    def sample_peak(self) -> None:
        self.peak_pool = max(self.peak_pool, self.memory.pool_total())

    def upload_now(self, host: np.ndarray, *, pinned: bool = False) -> Any:
        """A device copy of a host array through the pinned uploader (`pinned`: an array in pinned
        memory already, copied as it is, no staging), complete on return. The copy stream first waits
        for the current stream, which may still be using the reused memory."""
        cp = self.cp
        dst = cp.empty(host.shape, dtype=host.dtype)
        self._copy.wait_event(cp.cuda.get_current_stream().record())
        if host.nbytes and pinned:
            dst.set(host, stream=self._copy)
        elif host.nbytes:
            self._uploader.upload(dst, host)
        self._copy.synchronize()
        return dst

    @property
    def fixed_base(self) -> DeviceFixedBase:
        """The fixed-base multiplication kernels (the "setup" unit, compiled on first use: seconds)."""
        if self._fixed_base is None:
            with self.device:
                self._fixed_base = DeviceFixedBase(get_module(self.device_id, "setup"))
        return self._fixed_base

    @property
    def spmv(self) -> DeviceSpmv:
        """The sparse-product kernels (the "synthesis" unit, compiled on first use: seconds)."""
        if self._spmv is None:
            with self.device:
                self._spmv = DeviceSpmv(get_module(self.device_id, "synthesis"))
        return self._spmv

    @property
    def sha256_witness(self) -> DeviceSha256Witness:
        """The SHA-256 witness kernels (the "witness" unit, compiled on first use: seconds)."""
        if self._sha256_witness is None:
            with self.device:
                self._sha256_witness = DeviceSha256Witness(get_module(self.device_id, "witness"))
        return self._sha256_witness

    @property
    def poseidon_paths(self) -> DevicePoseidonPaths:
        """The Poseidon Merkle-path witness kernels (the "poseidon" unit, compiled on first use: ~40 s
        of NVRTC, then cached on disk)."""
        if self._poseidon_paths is None:
            with self.device:
                self._poseidon_paths = DevicePoseidonPaths(get_module(self.device_id, "poseidon"))
        return self._poseidon_paths

    def prepare_kernels(self) -> dict[str, float]:
        """The units a proof may reach besides "curve" (loaded at construction): compiled circuits'
        products, and the SHA-256 and Poseidon witness kernels of deferred openings. Left to first
        use, a unit's NVRTC compile (the Poseidon unit's takes minutes) would run inside a device
        phase, holding the device lock past a WindowPoSt deadline (benchmarks/HISTORY.md, "kernels
        before ready"). The units compile side by side, one NVRTC thread each; a kernel cache or
        ahead-of-time cubins make this a load."""
        units = {"synthesis": lambda: self.spmv, "witness": lambda: self.sha256_witness,
                 "poseidon": lambda: self.poseidon_paths}

        def timed(load: Any) -> float:
            start = time.perf_counter()
            load()
            return time.perf_counter() - start

        with ThreadPoolExecutor(len(units), thread_name_prefix="cuzk-kernels") as pool:
            futures = {unit: pool.submit(timed, load) for unit, load in units.items()}
            return {unit: f.result() for unit, f in futures.items()}
