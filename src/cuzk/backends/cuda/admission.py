"""Device admission: which proof holds the device, and what device memory each proof may still take.

The device runs one proof's kernels at a time (`lock`, served by priority: cuzk.backends.device_lock).
The memory it plans with is shared by three kinds of proof: the one holding the device (its working
reserve, less what it has grown since it took the device), proofs staging their inputs ahead, before
they take the device (`stage_ahead`), and proofs that let a higher-priority one through mid-phase
(`preemption_point`) and will take the device back. A proof stages ahead only when the plan leaves
room for it beside a whole reserve for the proof holding the device (or, when none does, the next
one to take it); a proof of higher priority is let in between two steps of a device phase (between
H and the H MSM, and after the H MSM) only when the memory holds both (docs/daemon.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any, TypeVar

from cuzk.backends.cuda.device import MemoryPlan, ahead_fits
from cuzk.backends.device_lock import PriorityLock, current_priority

T = TypeVar("T")

#: How often a device phase waiting on H checks for a proof that outranks it: well under a kernel's
#: length, and the check is one uncontended mutex.
PREEMPT_POLL_S = 0.0005


class Admission:
    """The device lock and the memory counts of the proofs around it, on a device of `memory`;
    `largest_reserve()` is the largest working reserve of the loaded keys (what the next proof to
    take the device may allocate when none holds it)."""

    def __init__(self, memory: MemoryPlan, largest_reserve: Callable[[], int]) -> None:
        self.memory = memory
        self.largest_reserve = largest_reserve
        self.lock = PriorityLock()  # device work: keys, compiled circuits, a proof's device phase
        self._mutex = threading.Lock()  # the counts below
        self.running_reserve = 0  # working reserve of the proof holding the device (0: none)
        self.running_base = 0  # the pool's bytes in use when that proof took the device
        self.ahead_since_begin = 0  # bytes staged ahead by other proofs since then
        # Device bytes that proofs staging ahead are allocating now; once allocated they are in use,
        # so `memory.available()` already lacks them.
        self.ahead_bytes = 0
        #: What proofs that yielded the device mid-phase (`preemption_point`) may still allocate
        #: when they take it back: kept out of what others stage ahead meanwhile.
        self.suspended = 0
        #: What each proof waiting for the device will still allocate once it has it, by thread.
        self.waiting_need: dict[int, int] = {}
        self.current_job: str | None = None
        #: Called again when the holder takes the device back after a yield: what it set up (`hold`).
        self._resume: Callable[[], None] = lambda: None
        self.preemptions = 0  # device phases that let a higher-priority proof through mid-phase
        self.preemptions_refused = 0  # ... and that could not, the memory for both not being free

    def stage_ahead(self, need: int, own_reserve: int, stage: Callable[[], T | None]) -> tuple[T | None, int]:
        """Run `stage()`, which allocates `need` bytes, before taking the device when the memory plan
        leaves room for it beside what other proofs are staging ahead now (what they staged already is
        in use, out of `memory.available()`) and a whole reserve for whichever proof holds the device:
        the one holding it now (what its reserve still lets it take), or, when none does, the next to
        take it, which may not have staged ahead and then allocates its reserve with the device held
        (`ahead_fits`). Returns what was staged (None: stage with the device held; `stage()` returns
        None when the memory went meanwhile) and its bytes. `own_reserve` is this proof's reserve."""
        with self._mutex:
            running = self.running_reserve > 0
            grown = self.memory.pool_used() - self.running_base - self.ahead_since_begin if running else 0
            reserve = max(self.running_reserve, own_reserve, self.largest_reserve())
            if not ahead_fits(need, self.memory.available(), ahead_pending=self.ahead_bytes + self.suspended,
                              running_reserve=reserve, running_grown=grown):
                return None, 0
            self.ahead_bytes += need
        try:
            staged = stage()
            if staged is None:
                return None, 0
            with self._mutex:
                self.ahead_since_begin += need
            return staged, need
        finally:
            with self._mutex:
                self.ahead_bytes -= need

    @contextmanager
    def hold(self, reserve: int, ahead: int, job: str, resume: Callable[[], None]) -> Iterator[None]:
        """Hold the device for a proof of working `reserve` that staged `ahead` of it already, served
        by the caller's priority; `resume()` sets up the device for it (again after each yield)."""
        me = threading.get_ident()
        with self._mutex:  # for a holder deciding whether it can let this proof through
            self.waiting_need[me] = reserve - ahead
        try:
            with self.lock.hold(current_priority()):
                with self._mutex:
                    self.waiting_need.pop(me, None)
                    self.running_reserve = reserve
                    # Inputs this proof staged ahead are in use already: held out of its reserve.
                    self.running_base = self.memory.pool_used() - ahead
                    self.ahead_since_begin = 0
                self.current_job, self._resume = job, resume
                resume()
                try:
                    yield
                finally:
                    self.current_job = None
                    with self._mutex:
                        self.running_reserve = 0
        finally:
            with self._mutex:
                self.waiting_need.pop(me, None)

    def shrink_reserve(self, nbytes: int) -> None:
        """The proof holding the device freed `nbytes` that the rest of its phase never takes again (a, b, c
        once H is done): its reserve is that much smaller from here. Otherwise the freed bytes would
        count as room it may still take, and a point after H would ask the memory for a whole second
        reserve beside it: on a card that holds the key and one reserve with little to spare, no
        CRITICAL proof would ever be let in there. Resident plans only: a streaming plan's reserve is
        its largest step's, and what it holds is counted as it grows."""
        with self._mutex:
            self.running_reserve = max(0, self.running_reserve - nbytes)

    def wait_or_yield(self, event: Any, compute: Any, t: MutableMapping[str, float],
                      gaps: list[tuple[Any, Any]]) -> None:
        """Wait on the host for `event`, or less: until a proof that outranks this one waits for the
        device, which `preemption_point` then lets through (this proof's queued kernels finish
        first, the stream being shared)."""
        while not event.done and self.lock.outranking_waiter() is None:
            time.sleep(PREEMPT_POLL_S)
        self.preemption_point(compute, t, gaps)

    def preemption_point(self, compute: Any, t: MutableMapping[str, float], gaps: list[tuple[Any, Any]]) -> None:
        """Between two steps of a device phase on the `compute` stream: when a proof of
        higher priority waits for the device, let it through now rather than at this partition's end,
        then take the device back. A WinningPoSt behind a PoRep-32GiB partition then waits for the
        step in flight (the H MSM, the longest) instead of the whole phase. It is let through only
        when the memory for both is free: what it will still allocate, beside what this proof still
        may (its reserve less its growth) and what other yielded proofs may; otherwise it waits for
        the end of the phase, counted in `preemptions_refused`. The time lent is recorded (`yielded`,
        seconds) and taken out of this proof's `device` time (`gaps`)."""
        waiter = self.lock.outranking_waiter()
        if waiter is None:
            return
        with self._mutex:
            reserve = self.running_reserve
            grown = max(0, self.memory.pool_used() - self.running_base - self.ahead_since_begin)
            remaining = reserve - min(reserve, grown)
            need = self.waiting_need.get(waiter, self.largest_reserve())
            if self.memory.available() < remaining + need + self.suspended:
                self.preemptions_refused += 1
                return
            self.suspended += remaining
            self.running_reserve = 0
        job, resume = self.current_job, self._resume
        self.current_job = None
        paused = compute.record()
        begin = time.perf_counter()
        try:
            # None: nobody outranks it any more (the waiter left), or the hold is nested: no yield.
            regrant = self.lock.yield_to_waiters()
        finally:
            with self._mutex:
                self.suspended -= remaining
                self.running_reserve = reserve
                # Growth is counted on from here: what others staged meanwhile is not this proof's.
                self.running_base = self.memory.pool_used() - grown
                self.ahead_since_begin = 0
            self.current_job, self._resume = job, resume
            resume()
        if regrant is None:
            return
        gaps.append((paused, compute.record()))
        t["yielded"] = t.get("yielded", 0.0) + time.perf_counter() - begin
        self.preemptions += 1
