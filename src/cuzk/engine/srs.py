"""The SRS manager: parameter sets loaded on demand, kept in tiers, evicted only when idle.

Tiers (the cuzk.v1 SRSStatus.Tier values):
- COLD: the `.params` file on disk only; nothing reserved.
- WARM: the file is memory-mapped in every device process (`read_params`): its pages are the page
  cache's, read once; the file size is reserved against the budget.
- HOT: additionally resident for the backend (`backend.load_key`: decoded points on the CPU,
  uploaded on a GPU). The decoded copies the CPU backends keep in host memory are reserved as well
  (`resident_bytes`); a GPU backend's copy lives in device memory, which the device's own memory plan
  governs, so it takes nothing more from this (host) budget, except what a small card's streaming
  plan keeps in pinned host memory (streamed bases, compiled matrices): the devices report those
  bytes when the key is hot, and the entry holds them too (`pinned_bytes`). Once a GPU holds the
  key, its proofs read none of the file but the streamed bases left unpinned, so the entry keeps
  only that much of the file's reservation (`mapped_bytes`; the loader's `hot_host_bytes`) and the
  rest of its pages are the page cache's to reclaim; going back to WARM takes the whole file again,
  or the entry goes cold. A budget that cannot hold the pinned copies fails the load.

Jobs take a reference (`acquire`) for their whole life, which makes the entry hot and keeps it from
being evicted; `release` drops it. Under budget pressure the budget's evictor calls `evict_idle`:
entries with no references that have been idle at least `memory.eviction_min_idle` are demoted,
oldest first, hot -> warm first and then warm -> cold, until enough is freed. `evict` (the EvictSRS
RPC) drops an unused entry to cold at once and refuses an entry in use.

Locks: `_lock` guards reference counts and tiers (short sections); each entry's `load_lock` is held
across slow file and device work, so loading one circuit never blocks lookups of another, and the
evictor only ever try-locks entries (no lock-order cycles).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Protocol

from cuzk.curve.msm import converted_bytes_per_point
from cuzk.engine.memory import MemoryBudget, Reservation
from cuzk.engine.providers import SrsSource
from cuzk.errors import CuzkError

log = logging.getLogger("cuzk.engine.srs")


class SrsTier(IntEnum):
    HOT = 0
    WARM = 1
    COLD = 2


class SrsInUseError(CuzkError):
    """EvictSRS on an entry that jobs are using (gRPC FAILED_PRECONDITION)."""


class SrsWaitCancelledError(CuzkError):
    """The job waiting for parameters was cancelled while it waited for memory."""


class Loader(Protocol):
    """What the manager needs from the devices (`cuzk.engine.executor.Executor`)."""

    devices: list[Any]
    #: How many device processes keep a hot key decoded in host memory (CPU backends; a GPU backend
    #: uploads the file's bytes and converts them on the device).
    host_key_copies: int

    def load_all(self, circuit_id: str, path: str, *, hot: bool) -> float: ...

    def unload_all(self, circuit_id: str, tier: str) -> None: ...

    def load(self, device: Any, circuit_id: str, path: str, *, hot: bool) -> float: ...

    def hot_host_bytes(self, circuit_id: str, file_bytes: int) -> tuple[int, int]:
        """(bytes of the file the devices read while the key is hot, bytes they pinned for it)."""
        ...


@dataclass
class SrsEntry:
    circuit_id: str
    source: SrsSource
    tier: SrsTier = SrsTier.COLD
    file_bytes: int = 0
    resident_bytes: int = 0
    refs: int = 0
    last_used: float = field(default_factory=time.monotonic)
    load_s: float = 0.0
    mapped: Reservation | None = None
    resident: Reservation | None = None
    #: The host memory the devices pinned for the key (small cards' streamed bases), known once loaded.
    pinned: Reservation | None = None
    load_lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class SrsLease:
    circuit_id: str
    load_s: float
    #: What the hot entry holds of the budget when the lease is taken (file pages still read,
    #: decoded copies, pinned host copies): held for as long as any job references the key.
    held_bytes: int = 0


def resident_estimate(path: str | os.PathLike, host_copies: int) -> int:
    """Host bytes `backend.load_key` adds for the whole daemon: decoded points, once per device process
    that keeps them in host memory (`Loader.host_key_copies`)."""
    from cuzk.groth16.formats.params_file import scan_layout

    layout = scan_layout(path)
    g1 = sum(v.count for v in layout.vectors if v.name != "b_g2") + layout.num_ic
    g2 = sum(v.count for v in layout.vectors if v.name == "b_g2")
    return (g1 * converted_bytes_per_point(False) + g2 * converted_bytes_per_point(True)) * max(0, host_copies)


class SrsManager:
    def __init__(self, budget: MemoryBudget, loader: Loader, sources: Callable[[str], SrsSource],
                 materialize: Callable[[SrsSource], None], *, min_idle_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = budget
        self.loader = loader
        self._sources = sources
        self._materialize = materialize
        self.min_idle_s = min_idle_s
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, SrsEntry] = {}
        self.evictions = 0

    # -- entries ---------------------------------------------------------------------------------
    def _entry(self, circuit_id: str) -> SrsEntry:
        with self._lock:
            entry = self._entries.get(circuit_id)
        if entry is not None:
            return entry
        source = self._sources(circuit_id)  # raises InvalidRequestError for unknown ids
        with self._lock:
            return self._entries.setdefault(circuit_id, SrsEntry(circuit_id, source))

    def _ref(self, entry: SrsEntry, delta: int) -> None:
        with self._lock:
            entry.refs += delta
            entry.last_used = self._clock()

    def _make_hot(self, entry: SrsEntry, cancelled: Callable[[], bool] | None) -> float:
        """Bring `entry` to HOT (the caller holds a reference); returns the seconds spent loading."""
        with entry.load_lock:
            if entry.tier is SrsTier.HOT:
                return 0.0
            start = self._clock()
            cid, path = entry.circuit_id, str(entry.source.path)
            if entry.tier is SrsTier.COLD:
                if not entry.source.path.is_file():
                    self._materialize(entry.source)
                entry.file_bytes = entry.source.path.stat().st_size
                entry.resident_bytes = resident_estimate(path, self.loader.host_key_copies)
                entry.mapped = self._reserve(entry.file_bytes, f"srs:{cid}:mapped", cancelled)
            try:
                if entry.resident is None:
                    entry.resident = self._reserve(entry.resident_bytes, f"srs:{cid}:resident", cancelled)
                self.loader.load_all(cid, path, hot=True)
                read, pinned = self.loader.hot_host_bytes(cid, entry.file_bytes)
                assert entry.mapped is not None
                entry.mapped.release(entry.mapped.nbytes - read)
                if pinned:
                    entry.pinned = self._reserve(pinned, f"srs:{cid}:pinned", cancelled)
            except BaseException:
                try:
                    self.loader.unload_all(cid, "cold")
                except Exception as err:  # the original failure matters more
                    log.warning("cleaning up SRS %s after a failed load: %s", cid, err)
                self._drop(entry)
                raise
            with self._lock:
                entry.tier = SrsTier.HOT
            entry.load_s = self._clock() - start
            log.info("SRS %s hot in %.0f ms (%s bytes file, ~%s bytes resident in host memory)", cid,
                     entry.load_s * 1000, f"{entry.file_bytes:,}", f"{entry.resident_bytes:,}")
            return entry.load_s

    def _reserve(self, nbytes: int, label: str, cancelled: Callable[[], bool] | None) -> Reservation:
        got = self.budget.reserve(nbytes, label, cancelled=cancelled)
        if got is None:
            raise SrsWaitCancelledError(f"cancelled while waiting for memory for {label}")
        return got

    def _drop(self, entry: SrsEntry) -> int:
        """Release everything an entry holds and mark it cold (caller holds load_lock)."""
        freed = 0
        for res in (entry.pinned, entry.resident, entry.mapped):
            if res is not None:
                freed += res.release()
        entry.pinned = entry.resident = entry.mapped = None
        with self._lock:
            entry.tier = SrsTier.COLD
        return freed

    # -- jobs ------------------------------------------------------------------------------------
    def acquire(self, circuit_id: str, *, cancelled: Callable[[], bool] | None = None) -> SrsLease:
        """Reference the entry and make it hot; blocks on memory (backpressure) and on loading."""
        entry = self._entry(circuit_id)
        self._ref(entry, +1)
        try:
            load_s = self._make_hot(entry, cancelled)
            return SrsLease(circuit_id, load_s, self._held(entry))
        except BaseException:
            self._ref(entry, -1)
            raise

    def release(self, lease: SrsLease) -> None:
        with self._lock:
            entry = self._entries[lease.circuit_id]
        self._ref(entry, -1)

    # -- RPCs ------------------------------------------------------------------------------------
    def preload(self, circuit_id: str) -> tuple[bool, float]:
        """(already hot, seconds spent loading)."""
        entry = self._entry(circuit_id)
        self._ref(entry, +1)
        try:
            already = entry.tier is SrsTier.HOT
            return already, self._make_hot(entry, None)
        finally:
            self._ref(entry, -1)

    def evict(self, circuit_id: str) -> tuple[bool, int]:
        """(was loaded, bytes freed); refuses entries that jobs reference."""
        entry = self._entry(circuit_id)
        with entry.load_lock:
            with self._lock:
                if entry.refs:
                    raise SrsInUseError(f"{circuit_id} is in use by {entry.refs} job(s); it can be evicted once they "
                                   "finish")
                if entry.tier is SrsTier.COLD:
                    return False, 0
            self.loader.unload_all(circuit_id, "cold")
            freed = self._drop(entry)
        self.evictions += 1
        log.info("SRS %s evicted on request (%s bytes freed)", circuit_id, f"{freed:,}")
        return True, freed

    def evict_idle(self, need: int) -> int:
        """The budget's evictor: free at least `need` bytes from idle entries if possible."""
        now = self._clock()
        with self._lock:
            candidates = sorted((e for e in self._entries.values() if e.refs == 0 and e.tier is not SrsTier.COLD
                                 and now - e.last_used >= self.min_idle_s), key=lambda e: e.last_used)
        freed = 0
        for to_tier in ("warm", "cold"):
            for entry in candidates:
                if freed >= need:
                    return freed
                freed += self._demote(entry, to_tier)
        return freed

    def _demote(self, entry: SrsEntry, to_tier: str) -> int:
        if not entry.load_lock.acquire(blocking=False):
            return 0
        try:
            with self._lock:
                if entry.refs or entry.tier is SrsTier.COLD or (to_tier == "warm" and entry.tier is not SrsTier.HOT):
                    return 0
            freed = self._demoted(entry, to_tier)
            if freed is None:
                return 0
            self.evictions += 1
            log.info("SRS %s evicted to %s under memory pressure (%s bytes freed, idle %.0f s)", entry.circuit_id,
                     entry.tier.name.lower(), f"{freed:,}", self._clock() - entry.last_used)
            return freed
        finally:
            entry.load_lock.release()

    def _demoted(self, entry: SrsEntry, to_tier: str) -> int | None:
        """Drop an idle entry to `to_tier` (caller holds load_lock); the bytes freed, None where it is
        left as it is. HOT -> WARM frees the pinned and decoded copies but maps the whole file again:
        where that would hold more than it frees it is not done (the cold pass takes the entry), and
        where the budget cannot take back the part of the file a GPU let go (`_make_hot`) the entry
        goes cold instead."""
        cid, freed = entry.circuit_id, 0
        if to_tier == "warm":
            assert entry.mapped is not None
            regrow = entry.file_bytes - entry.mapped.nbytes
            if regrow and sum(r.nbytes for r in (entry.pinned, entry.resident) if r is not None) <= regrow:
                return None
            self.loader.unload_all(cid, "warm")
            freed = sum(r.release() for r in (entry.pinned, entry.resident) if r is not None)
            entry.pinned = entry.resident = None
            if self._remap(entry):
                with self._lock:
                    entry.tier = SrsTier.WARM
                return freed - regrow
        self.loader.unload_all(cid, "cold")
        return freed + self._drop(entry)

    def _remap(self, entry: SrsEntry) -> bool:
        """The whole file reserved again, now (this runs inside the evictor: it does not evict)."""
        assert entry.mapped is not None
        return self.budget.try_grow(entry.mapped, entry.file_bytes - entry.mapped.nbytes)

    # -- device restarts and status ------------------------------------------------------------------
    def reload_device(self, device: Any) -> None:
        """A device process was replaced: give it back every warm or hot entry."""
        with self._lock:
            entries = [e for e in self._entries.values() if e.tier is not SrsTier.COLD]
        for entry in entries:
            with entry.load_lock:
                if entry.tier is not SrsTier.COLD:
                    self.loader.load(device, entry.circuit_id, str(entry.source.path), hot=entry.tier is SrsTier.HOT)
                    if entry.tier is SrsTier.HOT:
                        self._rebudget(entry)

    def _rebudget(self, entry: SrsEntry) -> None:
        """A hot entry's reservations set again to what its devices now report (a replaced device
        pins its copies anew, and may keep a different part of the file, e.g. with less host memory
        spare than at the first load). The device has the key already, so growth the budget cannot
        take is not refused: it is logged, and the reservation stays as it was."""
        read, pinned = self.loader.hot_host_bytes(entry.circuit_id, entry.file_bytes)
        short = 0
        for attr, want in (("mapped", read), ("pinned", pinned)):
            res: Reservation | None = getattr(entry, attr)
            have = res.nbytes if res is not None else 0
            if want < have:
                res.release(have - want)  # type: ignore[union-attr]
            elif want > have:
                if res is None:
                    res = self.budget.try_reserve(0, f"srs:{entry.circuit_id}:{attr}", evict=False)
                    setattr(entry, attr, res)
                if not self.budget.try_grow(res, want - have):  # type: ignore[arg-type]
                    short += want - have
        if short:
            log.warning("SRS %s: a replaced device's copies need %s more bytes of host memory than the budget has "
                        "free; they are not reserved", entry.circuit_id, f"{short:,}")

    def snapshot(self) -> list[dict[str, Any]]:
        now = self._clock()
        with self._lock:
            return [{
                "circuit_id": e.circuit_id, "tier": e.tier.name, "tier_value": int(e.tier),
                "size_bytes": e.file_bytes, "resident_bytes": e.resident_bytes if e.tier is SrsTier.HOT else 0,
                "pinned_bytes": e.pinned.nbytes if e.pinned is not None else 0,
                "mapped_bytes": e.mapped.nbytes if e.mapped is not None else 0,
                "ref_count": e.refs, "idle_ms": 0 if e.refs else round((now - e.last_used) * 1000),
                "load_time_ms": round(e.load_s * 1000), "path": str(e.source.path), "insecure": e.source.insecure,
                "evictable": e.refs == 0 and e.tier is not SrsTier.COLD and now - e.last_used >= self.min_idle_s,
            } for e in sorted(self._entries.values(), key=lambda e: e.circuit_id)]

    @staticmethod
    def _held(e: SrsEntry) -> int:
        return (e.mapped.nbytes if e.mapped is not None else 0) + (
            e.resident_bytes if e.tier is SrsTier.HOT else 0) + (e.pinned.nbytes if e.pinned else 0)

    def held_bytes(self) -> dict[str, int]:
        with self._lock:
            out = {t.name: 0 for t in SrsTier}
            for e in self._entries.values():
                out[e.tier.name] += self._held(e)
            return out
