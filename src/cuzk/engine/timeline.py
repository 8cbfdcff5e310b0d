"""Per-job and per-partition timeline events, logged as they happen.

Each event is one log record on the `cuzk.timeline` logger with the message
`TIMELINE <EVENT> job=<id> [partition=<i>] t_ms=<ms since submit> ...`; the JSON log format
carries the same fields as keys. The event names are the Rust daemon's (SYNTH_START, SYNTH_END,
GPU_QUEUE, GPU_START, GPU_END; docs/compatibility.md §4), with DEVICE_* for the device stages since
the device may be a CPU, plus job-level events. The times themselves live on the job's
PartitionRecords and come back in AwaitProof's timings.
"""

from __future__ import annotations

import logging
import time
from enum import Enum
from typing import Any

from cuzk.engine.jobs import Job

log = logging.getLogger("cuzk.timeline")


class Event(Enum):
    SUBMITTED = "SUBMITTED"
    DISPATCHED = "DISPATCHED"  #: left the scheduler; planning starts
    SRS_READY = "SRS_READY"
    PLANNED = "PLANNED"
    SYNTH_START = "SYNTH_START"
    SYNTH_END = "SYNTH_END"
    DEVICE_QUEUE = "DEVICE_QUEUE"
    DEVICE_START = "DEVICE_START"
    DEVICE_END = "DEVICE_END"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


def emit(event: Event, job: Job, partition: int | None = None, at: float | None = None, **fields: Any) -> None:
    """Log one timeline event (`at` is a time.monotonic() stamp; default now)."""
    if not log.isEnabledFor(logging.INFO):
        return
    t_ms = round(((time.monotonic() if at is None else at) - job.submitted) * 1000)
    extra = {"event": event.value, "job_id": job.job_id, "t_ms": t_ms, **fields}
    parts = [f"TIMELINE {event.value} job={job.job_id}"]
    if partition is not None:
        extra["partition"] = partition
        parts.append(f"partition={partition}")
    parts.append(f"t_ms={t_ms}")
    parts.extend(f"{k}={v}" for k, v in fields.items())
    log.info(" ".join(parts), extra={"fields": extra})
