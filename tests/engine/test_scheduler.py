"""Job order: strict priority, FIFO within a level, kind defaults, grouping by circuit, batches."""

from __future__ import annotations

import itertools

import pytest

from cuzk.engine.jobs import Job, Priority, ProofKind, ProofRequest
from cuzk.engine.scheduler import GROUP_RUN_LIMIT, BatchCollector, Scheduler

_seq = itertools.count(1)


def job(name: str, priority: Priority = Priority.NORMAL, circuit: str = "c") -> Job:
    j = Job(name, next(_seq), ProofRequest(name, ProofKind.TEST, priority), origin="submit")
    j.circuit_id = circuit
    return j


@pytest.mark.parametrize(("kind", "expected"), [
    (ProofKind.WINNING_POST, Priority.CRITICAL), (ProofKind.WINDOW_POST_PARTITION, Priority.HIGH),
    (ProofKind.POREP_SEAL_COMMIT, Priority.NORMAL), (ProofKind.SNAP_DEALS_UPDATE, Priority.NORMAL),
])
def test_kind_defaults_and_explicit_priorities(kind: ProofKind, expected: Priority) -> None:
    assert Priority.resolve(0, kind) is expected
    assert Priority.resolve(1, kind) is Priority.LOW


def test_priority_then_fifo_and_positions() -> None:
    s = Scheduler()
    n1, n2 = job("n1"), job("n2")
    low = job("low", Priority.LOW)
    assert [s.push(n1), s.push(low), s.push(n2)] == [0, 1, 1]
    crit = job("crit", Priority.CRITICAL)
    high = job("high", Priority.HIGH)
    assert s.push(crit) == 0 and s.push(high) == 1
    assert s.position(low) == 4 and s.peek() is crit and len(s) == 5
    assert [s.pop().job_id for _ in range(5)] == ["crit", "high", "n1", "n2", "low"]
    assert s.pop() is None and s.peek() is None


def test_remove() -> None:
    s = Scheduler()
    a, b = job("a"), job("b")
    s.push(a)
    s.push(b)
    assert s.remove(a) and not s.remove(a)
    assert s.position(b) == 0 and list(s) == [b]


def test_sort_by_type_groups_normal_jobs_without_starving() -> None:
    s = Scheduler(sort_by_type=True)
    first = job("x0", circuit="x")
    s.push(first)
    for k in range(GROUP_RUN_LIMIT + 3):
        s.push(job(f"y{k}", circuit="y"))
        s.push(job(f"x{k + 1}", circuit="x"))
    order = [s.pop().job_id for _ in range(len(s))]
    # After x0, more x jobs go first, but only GROUP_RUN_LIMIT of them may skip the older y0.
    assert order[: GROUP_RUN_LIMIT + 2] == ["x0", *[f"x{k}" for k in range(1, GROUP_RUN_LIMIT + 1)], "y0"]
    assert sorted(order) == sorted({*order})
    plain = Scheduler()
    for j in (job("a", circuit="x"), job("b", circuit="y"), job("c", circuit="x")):
        plain.push(j)
    assert [plain.pop().job_id for _ in range(3)] == ["a", "b", "c"]


def test_batch_collector() -> None:
    c = BatchCollector(max_size=3, max_wait_s=10)
    a, b, other = job("a", circuit="p"), job("b", circuit="p"), job("o", circuit="q")
    assert c.add(a, now=0) is None and c.add(other, now=1) is None and c.add(b, now=2) is None
    assert len(c) == 3 and c.next_deadline() == 10
    full = c.add(job("d", circuit="p"), now=3)
    assert full is not None and [j.job_id for j in full] == ["a", "b", "d"]
    assert c.due(now=10.5) == [] and c.due(now=11.5) == [[other]] and len(c) == 0
    e = job("e", circuit="p")
    c.add(e, now=20)
    assert c.remove(e) and not c.remove(e) and c.next_deadline() is None
    c.add(job("f", circuit="p"), now=30)
    assert [[j.job_id for j in batch] for batch in c.flush_all()] == [["f"]]
    assert not BatchCollector(1, 0).enabled
