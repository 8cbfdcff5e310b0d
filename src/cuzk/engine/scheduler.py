"""Which job leaves the queue next: priority (CRITICAL > HIGH > NORMAL > LOW), FIFO within a
level, with aging so that no level starves; and the optional batch collector (jobs of one circuit
proven together).

Aging: when a job leaves ahead of an older job of a lower level (it overtakes it), that level's
oldest job is charged one overtake; once charged `MAX_OVERTAKES`, it leaves next, before any job
of a higher level except CRITICAL ones (due jobs of several levels leave oldest first), and its
partitions then sort as HIGH in the pipeline (`Job.effective_priority`), still older than the jobs
that overtook it. So under a steady HIGH stream a LOW job waits for at most
`MAX_OVERTAKES` x (k + 1) younger higher-priority jobs, k being the jobs ahead of it in its own
level, plus the older jobs of every level; CRITICAL jobs (rare, and with a hard deadline)
always go first and count for nothing, so that bound is in non-CRITICAL jobs. A HIGH
job is overtaken by CRITICAL jobs only, and is never charged.

`sort_by_type` (scheduler config) serves NORMAL jobs grouped by circuit: after a job of circuit X,
the oldest waiting NORMAL job of X goes next, for at most `GROUP_RUN_LIMIT` jobs in a row while an
older job of another circuit waits, so grouping saves parameter switches without starving anyone.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator

from cuzk.engine.jobs import Job, Priority

GROUP_RUN_LIMIT = 8
#: Younger jobs of higher levels (CRITICAL excepted) that may overtake a level's oldest job before
#: it leaves next.
MAX_OVERTAKES = 8


class Scheduler:
    """Pending jobs by priority level. Not thread-safe: the engine calls it under its lock."""

    def __init__(self, *, sort_by_type: bool = False) -> None:
        self.sort_by_type = sort_by_type
        self._levels: dict[Priority, deque[Job]] = {p: deque() for p in sorted(Priority, reverse=True)}
        self._last_circuit = ""
        self._run = 0
        self._overtaken: dict[Priority, int] = {p: 0 for p in Priority}  #: charges of each level's head

    def __len__(self) -> int:
        return sum(len(q) for q in self._levels.values())

    def __iter__(self) -> Iterator[Job]:
        """Jobs by level and age (the order they would leave, ignoring grouping and aging)."""
        for q in self._levels.values():
            yield from q

    def push(self, job: Job) -> int:
        """Queue `job`; returns its position (jobs that leave before it)."""
        self._levels[job.priority].append(job)
        return self.position(job)

    def position(self, job: Job) -> int:
        """Jobs that would leave before `job` as the queue stands (aging left out)."""
        ahead = 0
        for level, q in self._levels.items():
            if level == job.priority:
                for other in q:
                    if other is job:
                        return ahead
                    ahead += 1
            else:
                ahead += len(q) if level > job.priority else 0
        return ahead

    def overtaken(self, level: Priority) -> int:
        """Overtakes charged to `level`'s oldest job so far."""
        return self._overtaken[level]

    def _next_level(self) -> Priority | None:
        """The level whose job leaves next: CRITICAL, then heads due by aging (oldest first), then
        the highest non-empty level."""
        if self._levels[Priority.CRITICAL]:
            return Priority.CRITICAL
        due = [level for level, q in self._levels.items() if q and self._overtaken[level] >= MAX_OVERTAKES]
        if due:
            return min(due, key=lambda level: self._levels[level][0].seq)
        return next((level for level, q in self._levels.items() if q), None)

    def peek(self) -> Job | None:
        level = self._next_level()
        if level is None:
            return None
        q = self._levels[level]
        return q[0] if self._overtaken[level] >= MAX_OVERTAKES else self._pick(level, q, remove=False)

    def pop(self) -> Job | None:
        level = self._next_level()
        if level is None:
            return None
        q = self._levels[level]
        if self._overtaken[level] >= MAX_OVERTAKES:  # due: the head itself, whatever the grouping
            job = q.popleft()
            job.aged = True
            if level == Priority.NORMAL:
                self._last_circuit, self._run = job.circuit_id, 0
        else:
            was_head = q[0]
            job = self._pick(level, q, remove=True)
            if job is not was_head:
                return self._charge(level, job)
        self._overtaken[level] = 0
        return self._charge(level, job)

    def _charge(self, level: Priority, job: Job) -> Job:
        """`job` left from `level`: every lower level whose oldest job is older was overtaken."""
        if level is not Priority.CRITICAL:
            for lower, lq in self._levels.items():
                if lower < level and lq and lq[0].seq < job.seq:
                    self._overtaken[lower] += 1
        return job

    def remove(self, job: Job) -> bool:
        q = self._levels[job.priority]
        try:
            head = q[0] is job
            q.remove(job)
        except (ValueError, IndexError):
            return False
        if head:
            self._overtaken[job.priority] = 0
        return True

    def _pick(self, level: Priority, q: deque[Job], *, remove: bool) -> Job:
        job = q[0]
        if self.sort_by_type and level == Priority.NORMAL and self._last_circuit and self._run < GROUP_RUN_LIMIT:
            same = next((j for j in q if j.circuit_id == self._last_circuit), None)
            if same is not None:
                job = same
        if remove:
            head = q[0]
            q.remove(job)
            if level == Priority.NORMAL:
                # A run only counts while it skips over an older job of another circuit.
                self._run = self._run + 1 if job is not head else 0
                self._last_circuit = job.circuit_id
        return job


class BatchCollector:
    """Jobs of one circuit collected until `max_size` arrive or the first has waited `max_wait_s`."""

    def __init__(self, max_size: int, max_wait_s: float) -> None:
        self.max_size = max_size
        self.max_wait_s = max_wait_s
        self._open: dict[str, tuple[float, list[Job]]] = {}

    @property
    def enabled(self) -> bool:
        return self.max_size > 1

    def __len__(self) -> int:
        return sum(len(jobs) for _, jobs in self._open.values())

    def __iter__(self) -> Iterator[Job]:
        for _, jobs in self._open.values():
            yield from jobs

    def add(self, job: Job, now: float | None = None) -> list[Job] | None:
        """Add `job`; returns the batch if that filled it."""
        now = time.monotonic() if now is None else now
        _, jobs = self._open.setdefault(job.circuit_id, (now, []))
        jobs.append(job)
        if len(jobs) >= self.max_size:
            del self._open[job.circuit_id]
            return jobs
        return None

    def due(self, now: float | None = None) -> list[list[Job]]:
        """Batches whose first job has waited long enough (removed from the collector)."""
        now = time.monotonic() if now is None else now
        ready = [cid for cid, (started, _) in self._open.items() if now - started >= self.max_wait_s]
        return [self._open.pop(cid)[1] for cid in ready]

    def flush_all(self) -> list[list[Job]]:
        batches = [jobs for _, jobs in self._open.values()]
        self._open.clear()
        return batches

    def next_deadline(self) -> float | None:
        if not self._open:
            return None
        return min(started for started, _ in self._open.values()) + self.max_wait_s

    def remove(self, job: Job) -> bool:
        entry = self._open.get(job.circuit_id)
        if entry is None or job not in entry[1]:
            return False
        entry[1].remove(job)
        if not entry[1]:
            del self._open[job.circuit_id]
        return True
