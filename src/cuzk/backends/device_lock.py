"""The device lock: proofs take their device phase in priority order, FIFO within a level.

The prover workers of one device (`gpus.gpu_workers_per_device`, plus the engine's CRITICAL lane)
share one `PriorityLock` around their device phase: the CPU backend's whole `prove`, the CUDA
backend's kernels only (`CudaBackend._lock`). A plain lock lets whichever thread the OS wakes first
take the device; this one hands it, on release, straight to the waiter of the highest priority, the
earliest of that level first. A partition in flight is never interrupted: preemption happens at the
partition boundary. So a CRITICAL partition that starts waiting while a NORMAL one computes is the
next on the device, even when another worker's NORMAL partition has been staged and waiting
longer. A holder that proves several partitions in one hold (a batch on the CPU path) calls
`yield_to_waiters` between them, which lets a higher-priority waiter in at that boundary too; the
CUDA backend also yields inside a resident partition's device phase, between its steps
(`Admission.preemption_point`, cuzk.backends.cuda.admission), polling `outranking_waiter` to know when.

The hand-off happens under the lock's own mutex, so a thread arriving just as the holder releases
cannot overtake a waiter; `Grant.requested` and `Grant.granted` are stamped there too, which makes
"who waited while whom was served" exact from the stamps alone.

Re-entrant: its owner may take it again (`CudaBackend` loads keys under it). Priorities are the
values of `cuzk.engine.jobs.Priority` (LOW 1 ... CRITICAL 4); the lock only compares them. The
priority of a plain `with lock:` is the calling thread's (`priority_scope`, set by the device
worker for each partition), `DEFAULT_PRIORITY` outside one.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

#: Priority.NORMAL's value: what a thread outside `priority_scope` waits with (key loads, tools).
DEFAULT_PRIORITY = 2

_local = threading.local()


def current_priority() -> int:
    """The priority the calling thread's device work runs at (`priority_scope`)."""
    return getattr(_local, "priority", DEFAULT_PRIORITY)


@contextlib.contextmanager
def priority_scope(priority: int) -> Iterator[None]:
    """Run the block's device work at `priority` (restored afterwards; scopes nest)."""
    previous = getattr(_local, "priority", None)
    _local.priority = int(priority)
    try:
        yield
    finally:
        if previous is None:
            del _local.priority
        else:
            _local.priority = previous


@dataclass
class Grant:
    """One acquisition: when it was asked for and given (time.monotonic()), and how many waiters
    that had asked earlier it went ahead of (a priority jump)."""

    priority: int
    requested: float
    granted: float
    jumped: int = 0

    @property
    def waited_s(self) -> float:
        return self.granted - self.requested


class _Waiter:
    __slots__ = ("event", "grant", "ident", "priority", "requested", "ticket")

    def __init__(self, priority: int, ticket: int, ident: int, requested: float) -> None:
        self.priority = priority
        self.ticket = ticket
        self.ident = ident
        self.requested = requested
        self.event = threading.Event()
        self.grant: Grant | None = None

    def key(self) -> tuple[int, int]:
        return (-self.priority, self.ticket)

    def __lt__(self, other: _Waiter) -> bool:
        return self.key() < other.key()


class PriorityLock:
    """A re-entrant lock whose waiters are served by priority (higher first), FIFO within a level."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._tickets = itertools.count()
        self._waiters: list[_Waiter] = []  # a heap
        self._owner: int | None = None
        self._depth = 0
        self._owner_priority = 0
        self._owner_ticket = 0
        #: Acquisitions, and those that went ahead of an earlier waiter (for logs and tests).
        self.grants = 0
        self.jumps = 0

    # -- acquiring -----------------------------------------------------------------------------------
    def hold(self, priority: int | None = None, timeout: float | None = None) -> _Hold:
        """`with lock.hold(p) as grant:` holds the lock at priority `p` (None: the thread's own)."""
        return _Hold(self, current_priority() if priority is None else int(priority), timeout)

    def acquire(self, blocking: bool = True, timeout: float = -1, *, priority: int | None = None) -> bool:
        """threading.Lock's signature, plus the priority to wait with (None: the thread's own)."""
        prio = current_priority() if priority is None else int(priority)
        if not blocking:
            return self._acquire(prio, 0.0) is not None
        return self._acquire(prio, None if timeout is None or timeout < 0 else timeout) is not None

    def _acquire(self, priority: int, timeout: float | None) -> Grant | None:
        me = threading.get_ident()
        with self._mutex:
            now = time.monotonic()
            if self._owner == me:
                self._depth += 1
                return Grant(priority, now, now)
            ticket = next(self._tickets)
            if self._owner is None and not self._waiters:
                return self._take(me, priority, ticket, now, now)
            if timeout == 0.0:
                return None
            waiter = _Waiter(priority, ticket, me, now)
            heapq.heappush(self._waiters, waiter)
        if not waiter.event.wait(timeout):
            with self._mutex:
                if waiter.grant is None:  # not handed over meanwhile: leave the queue
                    self._waiters.remove(waiter)
                    heapq.heapify(self._waiters)
                    return None
        return waiter.grant

    def _take(self, ident: int, priority: int, ticket: int, requested: float, granted: float,
              jumped: int = 0) -> Grant:
        self._owner, self._depth = ident, 1
        self._owner_priority, self._owner_ticket = priority, ticket
        self.grants += 1
        self.jumps += jumped > 0
        return Grant(priority, requested, granted, jumped)

    # -- releasing ----------------------------------------------------------------------------------
    def release(self) -> None:
        with self._mutex:
            if self._owner != threading.get_ident():
                raise RuntimeError("cannot release a PriorityLock this thread does not hold")
            self._depth -= 1
            if self._depth == 0:
                self._hand_over()

    def _hand_over(self) -> None:
        """Give the lock to the best waiter, or free it (mutex held)."""
        if not self._waiters:
            self._owner = None
            return
        waiter = heapq.heappop(self._waiters)
        jumped = sum(1 for w in self._waiters if w.ticket < waiter.ticket)
        waiter.grant = self._take(waiter.ident, waiter.priority, waiter.ticket, waiter.requested, time.monotonic(),
                                  jumped)
        waiter.event.set()

    def yield_to_waiters(self, priority: int | None = None) -> Grant | None:
        """At a partition boundary inside one hold: when a waiter of higher priority than the holder's
        (or `priority`) is queued, let it through and wait for the lock again, keeping this holder's
        place among waiters of its own level. Returns the new grant, or None when nobody outranked
        the holder (the hold simply goes on). Only a single (non-nested) hold can yield."""
        me = threading.get_ident()
        with self._mutex:
            if self._owner != me:
                raise RuntimeError("cannot yield a PriorityLock this thread does not hold")
            prio = self._owner_priority if priority is None else int(priority)
            if self._depth != 1 or not self._waiters or self._waiters[0].priority <= prio:
                return None
            waiter = _Waiter(prio, self._owner_ticket, me, time.monotonic())
            heapq.heappush(self._waiters, waiter)
            self._depth = 0
            self._hand_over()
        waiter.event.wait()
        return waiter.grant

    def outranking_waiter(self) -> int | None:
        """The thread (`threading.get_ident()`) of the first waiter, when its priority is higher than
        the holder's; None otherwise. What a holder polls at the points where it could yield
        (`yield_to_waiters`), before giving anything up."""
        with self._mutex:
            if self._owner is None or not self._waiters or self._waiters[0].priority <= self._owner_priority:
                return None
            return self._waiters[0].ident

    # -- the threading.Lock protocol -----------------------------------------------------------------
    def __enter__(self) -> PriorityLock:
        self._acquire(current_priority(), None)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def locked(self) -> bool:
        with self._mutex:
            return self._owner is not None

    # -- observing ---------------------------------------------------------------------------------
    def waiting(self, priority: int | None = None) -> int:
        """Threads waiting for the lock (of exactly `priority` when given)."""
        with self._mutex:
            return sum(1 for w in self._waiters if priority is None or w.priority == priority)

    def holder_priority(self) -> int | None:
        with self._mutex:
            return None if self._owner is None else self._owner_priority


class _Hold:
    def __init__(self, lock: PriorityLock, priority: int, timeout: float | None) -> None:
        self._lock = lock
        self._priority = priority
        self._timeout = timeout

    def __enter__(self) -> Grant:
        grant = self._lock._acquire(self._priority, self._timeout)
        if grant is None:
            raise TimeoutError(f"the device lock was not free within {self._timeout} s")
        return grant

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
