"""The priority-ordered device lock: hand-off by priority, FIFO within a level, re-entrance, yielding
at a partition boundary. Orders are checked from the grants' stamps and the order threads got the
lock in, never from how long anything took."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from cuzk.backends.device_lock import DEFAULT_PRIORITY, Grant, PriorityLock, current_priority, priority_scope

LOW, NORMAL, HIGH, CRITICAL = 1, 2, 3, 4


def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for another thread to get somewhere (the deadline only turns a hang into a failure)."""
    deadline = time.monotonic() + 20
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


class Waiters:
    """Threads that each wait for the lock at a priority, in the order they were started, and record
    the order they got it in."""

    def __init__(self, lock: PriorityLock) -> None:
        self.lock = lock
        self.order: list[str] = []
        self.grants: dict[str, Grant] = {}
        self.threads: list[threading.Thread] = []

    def add(self, name: str, priority: int, *, hold: threading.Event | None = None) -> None:
        before = self.lock.waiting()

        def run() -> None:
            with self.lock.hold(priority) as grant:
                self.order.append(name)
                self.grants[name] = grant
                if hold is not None:
                    hold.wait(20)

        t = threading.Thread(target=run, name=name, daemon=True)
        t.start()
        self.threads.append(t)
        until(lambda: self.lock.waiting() == before + 1 or name in self.grants, f"{name} to queue")

    def join(self) -> None:
        for t in self.threads:
            t.join(20)
            assert not t.is_alive()


def test_waiters_are_served_by_priority_and_fifo_within_a_level() -> None:
    lock = PriorityLock()
    w = Waiters(lock)
    with lock.hold(NORMAL):
        for name, prio in (("n1", NORMAL), ("low", LOW), ("n2", NORMAL), ("high", HIGH), ("crit", CRITICAL),
                           ("n3", NORMAL), ("high2", HIGH)):
            w.add(name, prio)
        assert lock.waiting() == 7 and lock.waiting(NORMAL) == 3 and lock.holder_priority() == NORMAL
    w.join()
    assert w.order == ["crit", "high", "high2", "n1", "n2", "n3", "low"]
    assert not lock.locked() and lock.grants == 8
    # Each grant says how many earlier waiters it went ahead of.
    assert w.grants["crit"].jumped == 4 and w.grants["n1"].jumped == 0 and w.grants["low"].jumped == 0


def test_a_critical_arrival_is_next_after_the_holder_ahead_of_a_staged_partition() -> None:
    """A NORMAL proof computes, another worker's NORMAL proof waits (staged); a CRITICAL one that asks
    later is the next on the device, and the stamps say so."""
    lock = PriorityLock()
    w = Waiters(lock)
    release_first = threading.Event()
    w.add("in-flight", NORMAL, hold=release_first)
    until(lambda: "in-flight" in w.grants, "the first proof to take the device")
    w.add("staged", NORMAL)
    w.add("winning", CRITICAL)
    release_first.set()
    w.join()
    assert w.order == ["in-flight", "winning", "staged"]
    first, crit, staged = (w.grants[k] for k in ("in-flight", "winning", "staged"))
    assert staged.requested < crit.requested < crit.granted <= staged.granted
    assert first.granted <= crit.requested and crit.jumped == 1 and lock.jumps == 1


def test_a_free_lock_is_taken_at_once_and_a_release_hands_over_without_barging() -> None:
    lock = PriorityLock()
    grant = lock._acquire(LOW, None)
    assert grant is not None and grant.requested == grant.granted and grant.waited_s == 0
    w = Waiters(lock)
    keep = threading.Event()
    w.add("queued", LOW, hold=keep)
    lock.release()
    # The waiter owns the lock from the release on, before its thread even runs: a newcomer, even a
    # CRITICAL one, cannot take it in between.
    assert not lock.acquire(blocking=False, priority=CRITICAL)
    keep.set()
    w.join()
    assert not lock.locked()


def test_reentrant_holds_release_only_at_the_outermost() -> None:
    lock = PriorityLock()
    w = Waiters(lock)
    with lock.hold(NORMAL):
        with lock:  # e.g. a key load inside the device phase
            assert lock.acquire()
            lock.release()
        w.add("other", CRITICAL)
        assert w.order == [] and lock.locked()
    w.join()
    assert w.order == ["other"]


def test_yield_at_a_partition_boundary_lets_a_higher_waiter_in_and_keeps_the_holders_place() -> None:
    lock = PriorityLock()
    w = Waiters(lock)
    order: list[str] = []
    with lock.hold(NORMAL):
        order.append("batch item 0")
        assert lock.yield_to_waiters() is None  # nobody outranks it: the hold goes on
        w.add("later normal", NORMAL)
        assert lock.yield_to_waiters() is None  # an equal level does not either
        w.add("crit", CRITICAL)
        regrant = lock.yield_to_waiters()
        order.append("batch item 1")
        assert regrant is not None and w.order == ["crit"] and "later normal" not in w.grants
    w.join()
    assert order == ["batch item 0", "batch item 1"] and w.order == ["crit", "later normal"]
    assert regrant.granted >= w.grants["crit"].granted


def test_outranking_waiter_names_only_a_waiter_above_the_holder() -> None:
    lock = PriorityLock()
    assert lock.outranking_waiter() is None  # free
    w = Waiters(lock)
    with lock.hold(NORMAL):
        assert lock.outranking_waiter() is None
        w.add("normal", NORMAL)
        w.add("high", HIGH)
        assert lock.outranking_waiter() is not None
        ident = lock.outranking_waiter()
        assert ident == next(t.ident for t in w.threads if t.name == "high")
        assert lock.yield_to_waiters() is not None  # "high" went and is done
        assert w.order == ["high"] and lock.outranking_waiter() is None
    w.join()
    assert w.order == ["high", "normal"]


def test_nested_holds_do_not_yield() -> None:
    lock = PriorityLock()
    w = Waiters(lock)
    with lock.hold(LOW), lock.hold(LOW):
        w.add("crit", CRITICAL)
        assert lock.yield_to_waiters() is None
    w.join()


def test_timeouts_non_blocking_and_misuse() -> None:
    lock = PriorityLock()
    with pytest.raises(RuntimeError):
        lock.release()
    with pytest.raises(RuntimeError):
        lock.yield_to_waiters()
    holder_has_it, done = threading.Event(), threading.Event()

    def hold() -> None:
        with lock.hold(NORMAL):
            holder_has_it.set()
            done.wait(20)

    t = threading.Thread(target=hold, daemon=True)
    t.start()
    holder_has_it.wait(20)
    assert not lock.acquire(blocking=False)
    assert not lock.acquire(timeout=0.01, priority=CRITICAL)
    with pytest.raises(TimeoutError), lock.hold(HIGH, timeout=0.01):
        pass
    assert lock.waiting() == 0  # the timed-out waiters left the queue
    done.set()
    t.join(20)
    assert lock.acquire(blocking=False)
    lock.release()


def test_priority_scope_sets_the_priority_of_a_plain_with() -> None:
    assert current_priority() == DEFAULT_PRIORITY
    lock = PriorityLock()
    w = Waiters(lock)
    with lock.hold(LOW):
        w.add("normal", NORMAL)

        def scoped() -> None:
            with priority_scope(CRITICAL):
                assert current_priority() == CRITICAL
                with priority_scope(HIGH):
                    assert current_priority() == HIGH
                assert current_priority() == CRITICAL
                with lock:
                    w.order.append("scoped critical")
            assert current_priority() == DEFAULT_PRIORITY

        t = threading.Thread(target=scoped, daemon=True)
        t.start()
        until(lambda: lock.waiting(CRITICAL) == 1, "the scoped thread to queue")
    t.join(20)
    w.join()
    assert w.order == ["scoped critical", "normal"]
