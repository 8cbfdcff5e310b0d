"""The memory budget: reservations, partial release, eviction on shortage, backpressure, estimates."""

from __future__ import annotations

import threading
import time

import pytest

from cuzk.circuits.registry import lookup
from cuzk.engine.memory import BudgetError, MemoryBudget, PartitionEstimate, shared_bytes
from cuzk.groth16.synthesis import circuit_shape


def test_reserve_release_and_partial_release() -> None:
    budget = MemoryBudget(1000)
    a = budget.try_reserve(600, "partition:a")
    assert a is not None and budget.used == 600 and budget.available == 400
    assert budget.try_reserve(500, "partition:b") is None
    assert a.release(200) == 200 and budget.used == 400
    b = budget.try_reserve(500, "srs:x")
    assert b is not None and budget.by_label() == {"partition": 400, "srs": 500}
    assert a.release() == 400 and a.release() == 0  # releasing twice is harmless
    b.release()
    assert budget.used == 0 and budget.peak == 1000 - 100


def test_a_request_larger_than_the_budget_is_an_error() -> None:
    budget = MemoryBudget(1000)
    budget.reserve_permanent(300, "baseline:processes")
    with pytest.raises(BudgetError, match="can never give more than 700"):
        budget.try_reserve(701, "partition:x")
    with pytest.raises(BudgetError, match=r"raise memory\.total_budget"):
        budget.reserve_permanent(800, "baseline:more")
    with pytest.raises(BudgetError):
        MemoryBudget(0)


def test_shortage_asks_the_evictor_once() -> None:
    budget = MemoryBudget(1000)
    held = budget.try_reserve(900, "srs:old")
    asked: list[int] = []

    def evictor(need: int) -> int:
        asked.append(need)
        return held.release() if held is not None else 0

    budget.evictor = evictor
    got = budget.try_reserve(300, "partition:new")
    assert got is not None and asked == [200]
    assert budget.try_reserve(800, "partition:more") is None and asked == [200, 100]  # nothing left to evict
    assert budget.try_reserve(800, "partition:more", evict=False) is None and len(asked) == 2


def test_reserve_waits_for_a_release_and_honours_cancel() -> None:
    budget = MemoryBudget(1000)
    held = budget.try_reserve(1000, "partition:a")
    assert held is not None
    woken = []
    budget.add_release_listener(lambda: woken.append(1))
    threading.Timer(0.2, held.release).start()
    start = time.monotonic()
    got = budget.reserve(800, "partition:b", timeout=5)
    assert got is not None and time.monotonic() - start >= 0.15 and woken
    assert budget.reserve(800, "partition:c", timeout=0.1) is None
    flag = threading.Event()
    threading.Timer(0.1, flag.set).start()
    assert budget.reserve(800, "partition:d", cancelled=flag.is_set) is None


def test_estimates_come_from_the_measured_shape() -> None:
    small = PartitionEstimate.from_shape(circuit_shape(lookup("mimc-4").blank()))
    big = PartitionEstimate.from_shape(circuit_shape(lookup("mimc-8").blank()))
    assert 0 < small.total < big.total
    assert big.shared == shared_bytes(256, 2, 254) and big.shared % 4096 == 0
    raised = big.at_least(10 * big.total)
    assert raised.total == 10 * big.total and raised.synthesis == big.synthesis
    assert big.at_least(1).total == big.total
