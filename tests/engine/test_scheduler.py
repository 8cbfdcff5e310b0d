"""Job order: priority, FIFO within a level, aging (the starvation bound), grouping by circuit, batches."""

from __future__ import annotations

import itertools

from cuzk.engine.jobs import Job, Priority, ProofKind, ProofRequest
from cuzk.engine.scheduler import GROUP_RUN_LIMIT, MAX_OVERTAKES, BatchCollector, Scheduler

_seq = itertools.count(1)


def job(name: str, priority: Priority = Priority.NORMAL, circuit: str = "c") -> Job:
    j = Job(name, next(_seq), ProofRequest(name, ProofKind.TEST, priority), origin="submit")
    j.circuit_id = circuit
    return j


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


def test_fifo_within_every_level() -> None:
    s = Scheduler()
    # Interleaved arrivals, few enough that no job is overtaken MAX_OVERTAKES times: strict priority.
    jobs = [job(f"{p.name}{k}", p) for k in range(3) for p in Priority]
    for j in jobs:
        s.push(j)
    order = [s.pop() for _ in range(len(jobs))]
    for p in Priority:
        level = [j.seq for j in order if j.priority is p]
        assert level == sorted(level) and len(level) == 3
    assert [j.priority for j in order] == sorted((j.priority for j in jobs), reverse=True)
    assert not any(j.aged for j in order)


def drain_under_stream(s: Scheduler, waiting: list[Job], stream: Priority, limit: int = 1000) -> list[Job]:
    """Pop one job at a time while a steady stream of `stream` jobs arrives (one per pop), until every
    job of `waiting` has left; returns what left, in order."""
    left: list[Job] = []
    for k in range(limit):
        s.push(job(f"{stream.name.lower()}{k}", stream))
        left.append(s.pop())
        if all(j in left for j in waiting):
            return left
    raise AssertionError("the waiting jobs starved")


def test_a_low_job_under_a_steady_high_stream_waits_for_at_most_max_overtakes_jobs() -> None:
    s = Scheduler()
    low = job("low", Priority.LOW)
    s.push(low)
    left = drain_under_stream(s, [low], Priority.HIGH)
    assert left.index(low) == MAX_OVERTAKES and low.aged
    assert low.effective_priority is Priority.HIGH and low.priority is Priority.LOW
    # In the pipeline it sorts with HIGH work, older than the jobs that overtook it.
    later_high = job("later", Priority.HIGH)
    assert low.sort_key < later_high.sort_key
    assert s.overtaken(Priority.LOW) == 0


def test_the_starvation_bound_with_jobs_ahead_in_the_same_level() -> None:
    """With k LOW jobs ahead, a LOW job leaves after at most MAX_OVERTAKES x (k + 1) younger HIGH jobs."""
    s = Scheduler()
    lows = [job(f"low{k}", Priority.LOW) for k in range(3)]
    for j in lows:
        s.push(j)
    left = drain_under_stream(s, lows, Priority.HIGH)
    for k, j in enumerate(lows):
        younger_high_before = sum(1 for other in left[:left.index(j)] if other.priority is Priority.HIGH)
        assert younger_high_before == MAX_OVERTAKES * (k + 1)
    assert [j for j in left if j.priority is Priority.LOW] == lows  # FIFO kept


def test_normal_and_low_both_age_under_a_high_stream_and_due_jobs_leave_oldest_first() -> None:
    s = Scheduler()
    low, normal = job("low", Priority.LOW), job("normal", Priority.NORMAL)
    s.push(low)
    s.push(normal)
    left = drain_under_stream(s, [low, normal], Priority.HIGH)
    # Both became due on the same HIGH job; the older (LOW) went first.
    assert left.index(low) == MAX_OVERTAKES and left.index(normal) == MAX_OVERTAKES + 1
    assert low.aged and normal.aged


def test_critical_jobs_go_first_even_past_due_jobs_and_overtake_nobody() -> None:
    s = Scheduler()
    low = job("low", Priority.LOW)
    s.push(low)
    for k in range(MAX_OVERTAKES):
        s.push(job(f"h{k}", Priority.HIGH))
        assert s.pop().priority is Priority.HIGH
    assert s.overtaken(Priority.LOW) == MAX_OVERTAKES
    crits = [job(f"c{k}", Priority.CRITICAL) for k in range(3)]
    for c in crits:
        s.push(c)
    s.push(job("h-late", Priority.HIGH))
    assert s.peek() is crits[0]
    assert [s.pop() for _ in range(3)] == crits
    assert s.overtaken(Priority.LOW) == MAX_OVERTAKES  # CRITICAL jobs were not counted
    assert s.peek() is low and s.pop() is low and low.aged
    assert s.pop().job_id == "h-late"


def test_a_high_job_is_never_aged_and_removing_a_head_resets_its_charges() -> None:
    s = Scheduler()
    high = job("high", Priority.HIGH)
    s.push(high)
    for k in range(2 * MAX_OVERTAKES):
        s.push(job(f"c{k}", Priority.CRITICAL))
        s.pop()
    assert s.overtaken(Priority.HIGH) == 0 and s.pop() is high and not high.aged
    low, low2 = job("low", Priority.LOW), job("low2", Priority.LOW)
    s.push(low)
    s.push(low2)
    for k in range(MAX_OVERTAKES - 1):
        s.push(job(f"n{k}", Priority.NORMAL))
        s.pop()
    assert s.overtaken(Priority.LOW) == MAX_OVERTAKES - 1
    assert s.remove(low) and s.overtaken(Priority.LOW) == 0  # low2 starts its own count


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
