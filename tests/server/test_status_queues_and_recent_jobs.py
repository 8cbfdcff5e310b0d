"""The status's `queues_by_priority` and `recent_jobs` (cuzk.engine.status), on jobs built by hand:
the counts per priority, the oldest queued job's wait, the newest finished jobs first and bounded."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from cuzk.engine import status
from cuzk.engine.jobs import Job, JobState, PartitionRecord, Priority, ProofKind, ProofRequest


def _job(job_id: str, seq: int, priority: Priority, state: JobState, *, age_s: float = 0.0) -> Job:
    job = Job(job_id, seq, ProofRequest(job_id, ProofKind.TEST, priority), origin="submit")
    job.submitted -= age_s
    job.submitted_wall -= age_s
    job.state = state
    return job


def _engine(*jobs: Job) -> SimpleNamespace:
    return SimpleNamespace(_cv=threading.Condition(threading.RLock()), jobs={j.job_id: j for j in jobs})


def test_queues_by_priority_count_each_level_and_the_oldest_wait() -> None:
    engine = _engine(
        _job("n-young", 1, Priority.NORMAL, JobState.QUEUED, age_s=2.0),
        _job("n-old", 2, Priority.NORMAL, JobState.QUEUED, age_s=30.0),  # submitted earlier, numbered later
        _job("n-run", 3, Priority.NORMAL, JobState.RUNNING),
        _job("h-plan", 4, Priority.HIGH, JobState.PLANNING),
        _job("c-q", 5, Priority.CRITICAL, JobState.QUEUED, age_s=0.5),
        _job("l-done", 6, Priority.LOW, JobState.COMPLETED),
    )
    rows = status.priority_queues(engine)  # type: ignore[arg-type]
    assert [r["priority"] for r in rows] == ["CRITICAL", "HIGH", "NORMAL", "LOW"]
    by = {r["priority"]: r for r in rows}
    assert by["NORMAL"]["queued"] == 2 and by["NORMAL"]["running"] == 1
    assert by["NORMAL"]["oldest_queued_job"] == "n-old" and 30.0 <= by["NORMAL"]["oldest_wait_secs"] < 40.0
    assert by["CRITICAL"]["queued"] == 1 and by["CRITICAL"]["oldest_queued_job"] == "c-q"
    assert by["HIGH"] == {"priority": "HIGH", "queued": 0, "planning": 1, "running": 0, "oldest_queued_job": None,
                          "oldest_wait_secs": None}
    assert by["LOW"]["queued"] == by["LOW"]["running"] == 0  # finished jobs are no queue


def test_recent_jobs_are_the_newest_finished_with_phases_and_errors() -> None:
    now = time.monotonic()
    jobs = []
    for k in range(status.RECENT_JOBS + 5):
        job = _job(f"j{k}", k, Priority.NORMAL, JobState.COMPLETED, age_s=100.0)
        job.started = job.submitted + 1.0
        job.finished = now - 50 + k  # j0 finished first
        job.partitions = [PartitionRecord(0, synth_start=job.started, synth_end=job.started + 2.0,
                                          device_start=job.started + 2.5, device_end=job.started + 4.0, verify_s=0.25)]
        jobs.append(job)
    bad = _job("bad", 99, Priority.HIGH, JobState.FAILED, age_s=3.0)
    bad.finished, bad.error = now, "partition 0: synthesis failed"
    engine = _engine(*jobs, bad, _job("running", 100, Priority.NORMAL, JobState.RUNNING))

    rows = status.recent_jobs(engine)  # type: ignore[arg-type]
    assert len(rows) == status.RECENT_JOBS
    assert [r["job_id"] for r in rows[:3]] == ["bad", f"j{status.RECENT_JOBS + 4}", f"j{status.RECENT_JOBS + 3}"]
    assert rows[0]["state"] == "failed" and rows[0]["error"] == "partition 0: synthesis failed"
    assert rows[0]["priority"] == "HIGH" and rows[0]["partitions"] == 0
    done = rows[1]
    assert done["phases_secs"] == {"queue": 1.0, "srs_load": 0.0, "synthesis": 2.0, "device": 1.5, "verify": 0.25}
    assert done["state"] == "completed" and done["error"] == "" and done["partitions"] == 1
    assert done["total_secs"] > 0 and done["proof_kind"] == "test-circuit" and not done["restored"]
