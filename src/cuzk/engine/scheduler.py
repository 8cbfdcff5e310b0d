"""Which job leaves the queue next: strict priority (CRITICAL > HIGH > NORMAL > LOW), FIFO within a
level, and the optional cross-sector batch collector.

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


class Scheduler:
    """Pending jobs by priority level. Not thread-safe: the engine calls it under its lock."""

    def __init__(self, *, sort_by_type: bool = False) -> None:
        self.sort_by_type = sort_by_type
        self._levels: dict[Priority, deque[Job]] = {p: deque() for p in sorted(Priority, reverse=True)}
        self._last_circuit = ""
        self._run = 0

    def __len__(self) -> int:
        return sum(len(q) for q in self._levels.values())

    def __iter__(self) -> Iterator[Job]:
        """Jobs in the order they would leave (ignoring sort_by_type grouping)."""
        for q in self._levels.values():
            yield from q

    def push(self, job: Job) -> int:
        """Queue `job`; returns its position (jobs that leave before it)."""
        self._levels[job.priority].append(job)
        return self.position(job)

    def position(self, job: Job) -> int:
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

    def peek(self) -> Job | None:
        for level, q in self._levels.items():
            if q:
                return self._pick(level, q, remove=False)
        return None

    def pop(self) -> Job | None:
        for level, q in self._levels.items():
            if q:
                return self._pick(level, q, remove=True)
        return None

    def remove(self, job: Job) -> bool:
        q = self._levels[job.priority]
        try:
            q.remove(job)
        except ValueError:
            return False
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
