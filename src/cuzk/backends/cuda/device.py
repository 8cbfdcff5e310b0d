"""What a CUDA device is and how much of its memory cuzk may plan with.

Memory is planned from cudaMemGetInfo's free bytes plus what CuPy's pool holds unused (freed arrays
stay in the pool for reuse), minus a safety margin for the driver, cuBLAS-style workspaces of
other libraries and fragmentation. With a limit (`[gpus] memory_limit`), cuzk plans with at most
the limit less what the CUDA context takes (`plan.CONTEXT_BYTES`), and CuPy's pool is capped there,
so an allocation past it fails in cuzk rather than taking memory the limit leaves to others.
Callers decide with `MemoryPlan.fits` whether bases stay resident, and size MSM batches from
`MemoryPlan.available`; `cuzk.backends.cuda.plan` turns the budget into a proof's plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cuzk.backends.cuda.runtime import get_cupy

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
    return get_cupy()


def properties(device_id: int = 0) -> GpuProperties:
    cp = _cupy()
    p = cp.cuda.runtime.getDeviceProperties(device_id)
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    return GpuProperties(device_id=device_id, name=name, total_memory=int(p["totalGlobalMem"]),
                         multiprocessors=int(p["multiProcessorCount"]),
                         compute_capability=f"{p['major']}.{p['minor']}",
                         clock_mhz=int(p.get("clockRate", 0)) // 1000)


@dataclass(frozen=True)
class MemoryUsage:
    """One reading of a device's memory: cudaMemGetInfo's free and total, and CuPy's pool in this
    process (bytes handed to live arrays, bytes held from the driver)."""

    driver_free: int
    total: int
    pool_used: int
    pool_held: int

    @property
    def free(self) -> int:
        """What cuzk may still take: the driver's free bytes and the pool's unused blocks."""
        return self.driver_free + self.pool_held - self.pool_used

    @property
    def driver_used(self) -> int:
        return self.total - self.driver_free


def memory_usage(device_id: int = 0) -> MemoryUsage:
    cp = _cupy()
    with cp.cuda.Device(device_id):
        free, total = cp.cuda.runtime.memGetInfo()
        pool = cp.get_default_memory_pool()
        used, held = pool.used_bytes(), pool.total_bytes()
    return MemoryUsage(int(free), int(total), int(used), int(held))


def memory_info(device_id: int = 0) -> tuple[int, int]:
    """(free, total) bytes from cudaMemGetInfo, free including CuPy's unused pool blocks."""
    usage = memory_usage(device_id)
    return usage.free, usage.total


_RELEASING = False


def _install_releasing_allocator() -> None:
    """Make CuPy's default allocator free the pool's cached blocks and try once more when an
    allocation would pass the pool's limit. CuPy's pool keeps freed blocks per stream and, with a
    limit set, refuses past it without releasing them: blocks another stream freed would then count
    against the limit although nothing uses them. (cudaFree waits for the device, so releasing is
    safe while kernels still read memory that was freed on the host.)"""
    global _RELEASING
    if _RELEASING:
        return
    cp = _cupy()
    pool = cp.get_default_memory_pool()

    def malloc(size: int) -> Any:
        try:
            return pool.malloc(size)
        except cp.cuda.memory.OutOfMemoryError:
            pool.free_all_blocks()
            return pool.malloc(size)

    cp.cuda.set_allocator(malloc)
    _RELEASING = True


def default_margin(total: int) -> int:
    """The margin a card of `total` bytes is planned with (`MARGIN_MIN`, `MARGIN_FRACTION`)."""
    return max(MARGIN_MIN, int(total * MARGIN_FRACTION))


def shared_limit(limit: int | None, total: int, share: int) -> int | None:
    """The cap of one of `share` logical devices on a card of `total` bytes: `limit` when given, else
    the card's share of it (None: one device, no cap)."""
    return total // share if limit is None and share > 1 else limit


def available_bytes(free: int, margin: int, limit: int | None, used: int = 0) -> int:
    """What may still be taken: `free` device memory less the margin, and under a `limit` no more
    than it leaves beside the CUDA context and the `used` bytes of the pool."""
    from cuzk.backends.cuda.plan import CONTEXT_BYTES

    left = max(0, free - margin)
    return left if limit is None else min(left, max(0, limit - CONTEXT_BYTES - used))


class MemoryPlan:
    """Free device memory minus a margin, re-read on every question (other work may hold memory),
    and within `limit` bytes when one is set."""

    def __init__(self, device_id: int = 0, margin: int | None = None, limit: int | None = None) -> None:
        from cuzk.backends.cuda.plan import CONTEXT_BYTES

        self.device_id = device_id
        total = memory_info(device_id)[1]
        self.margin = margin if margin is not None else default_margin(total)
        self.limit = limit
        self.pool_limit: int | None = None
        if limit is not None:
            if limit <= CONTEXT_BYTES:
                raise ValueError(f"memory_limit {limit} bytes leaves nothing beside the CUDA context "
                                 f"({CONTEXT_BYTES >> 20} MiB)")
            self.pool_limit = limit - CONTEXT_BYTES
            cp = _cupy()
            with cp.cuda.Device(device_id):
                cp.get_default_memory_pool().set_limit(size=self.pool_limit)
            _install_releasing_allocator()

    def available(self) -> int:
        free, _ = memory_info(self.device_id)
        return available_bytes(free, self.margin, self.limit, self.pool_used() if self.limit is not None else 0)

    def budget(self) -> int:
        """What cuzk may hold in all: what it holds now plus what is still available."""
        return self.pool_used() + self.available()

    def pool_total(self) -> int:
        """Bytes CuPy's pool holds from the driver (in use and cached)."""
        cp = _cupy()
        with cp.cuda.Device(self.device_id):
            return int(cp.get_default_memory_pool().total_bytes())

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
    """Whether a proof waiting for the device may stage `need` bytes now.

    The rule keeps one whole reserve (`proof_working_bytes`, an upper bound of a proof's peak) free
    for the proof holding the device at every moment, beside what waiting proofs are staging now
    (`ahead_pending`: what they staged already is in use, so `available` lacks it).
    `running_reserve` is the largest reserve of a proof that may hold the device while this staging
    lives: the one holding it now, and any that may take it next without having staged (it
    allocates its inputs with the device held), so the caller passes the largest reserve of its
    loaded keys even when no proof runs. `available` (free memory) already lacks what
    the running proof holds, so that proof is charged only what the reserve still allows it to take:
    the reserve less its growth since it took the device (`running_grown`: the pool's bytes in use
    now, less at that moment, less what proofs staged ahead since; 0 when none holds the device).
    Charging the whole reserve again would count its held memory twice and refuse most stagings
    mid-proof. Negative growth (it freed staged inputs) charges the whole reserve: the safe side."""
    remaining = running_reserve - min(running_reserve, max(0, running_grown))
    return need + ahead_pending + remaining <= available
