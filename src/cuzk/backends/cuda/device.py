"""What a CUDA device is and how much of its memory cuzk may plan with.

Memory is planned from cudaMemGetInfo's free bytes plus what CuPy's pool holds unused (freed arrays
stay in the pool for reuse), minus a safety margin for the driver, cuBLAS-style workspaces of
other libraries and fragmentation. Callers decide with `MemoryPlan.fits` whether bases stay
resident, and size MSM batches from `MemoryPlan.available`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Never plan with the last max(MARGIN_MIN, MARGIN_FRACTION * total) bytes of a device.
MARGIN_MIN = 1 << 30
MARGIN_FRACTION = 0.03


@dataclass(frozen=True)
class GpuProperties:
    device_id: int
    name: str
    total_memory: int
    multiprocessors: int
    compute_capability: str
    clock_mhz: int


def _cupy() -> Any:
    import cupy

    return cupy


def properties(device_id: int = 0) -> GpuProperties:
    cp = _cupy()
    p = cp.cuda.runtime.getDeviceProperties(device_id)
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    return GpuProperties(device_id=device_id, name=name, total_memory=int(p["totalGlobalMem"]),
                         multiprocessors=int(p["multiProcessorCount"]),
                         compute_capability=f"{p['major']}.{p['minor']}",
                         clock_mhz=int(p.get("clockRate", 0)) // 1000)


def memory_info(device_id: int = 0) -> tuple[int, int]:
    """(free, total) bytes from cudaMemGetInfo, free including CuPy's unused pool blocks."""
    cp = _cupy()
    with cp.cuda.Device(device_id):
        free, total = cp.cuda.runtime.memGetInfo()
        pool_free = cp.get_default_memory_pool().free_bytes()
    return int(free) + int(pool_free), int(total)


class MemoryPlan:
    """Free device memory minus a margin, re-read on every question (other work may hold memory)."""

    def __init__(self, device_id: int = 0, margin: int | None = None) -> None:
        self.device_id = device_id
        total = memory_info(device_id)[1]
        self.margin = margin if margin is not None else max(MARGIN_MIN, int(total * MARGIN_FRACTION))

    def available(self) -> int:
        free, _ = memory_info(self.device_id)
        return max(0, free - self.margin)

    def fits(self, nbytes: int, reserve: int = 0) -> bool:
        """Whether nbytes can be taken while still leaving `reserve` bytes for later work."""
        return nbytes + reserve <= self.available()

    def pool_used(self) -> int:
        """Bytes of CuPy's pool held by live arrays of this process."""
        cp = _cupy()
        with cp.cuda.Device(self.device_id):
            return int(cp.get_default_memory_pool().used_bytes())

    def release_cached(self) -> None:
        """Return CuPy's unused pool blocks to the driver (before large one-off allocations)."""
        cp = _cupy()
        with cp.cuda.Device(self.device_id):
            cp.get_default_memory_pool().free_all_blocks()


def ahead_fits(need: int, available: int, *, ahead_pending: int, running_reserve: int, running_grown: int) -> bool:
    """Whether a proof waiting for the device may stage `need` bytes now, beside the proof holding it.

    `available` (free memory) already lacks what the running proof holds, so that proof is charged
    only what its reserve (`proof_working_bytes`, an upper bound of its peak) still allows it to take:
    the reserve less its growth since it took the device (`running_grown`: the pool's bytes in use now,
    less at that moment, less what proofs staged ahead since). Charging its whole reserve again would
    count its held memory twice and refuse most stagings mid-proof. Negative growth (it freed staged
    inputs) charges the whole reserve: the safe side. `ahead_pending` is what other waiting proofs
    have staged or are staging."""
    remaining = running_reserve - min(running_reserve, max(0, running_grown))
    return need + ahead_pending + remaining <= available
