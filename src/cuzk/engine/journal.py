"""The job journal: accepted jobs and finished results in SQLite, so a crash or restart loses nothing.

The engine writes to this journal synchronously (see `JobJournal` in cuzk.engine.engine; why:
docs/compatibility.md §5):

- when it accepts a job, before SubmitProof/Prove answer: job id (= request_id when given), input
  digest, kind, priority, the accepting instance; with `daemon.on_restart = "requeue"` also the
  request itself (its id, kind and priority, and its payload as the kind's provider encodes it),
  stored once per input digest;
- when a job finishes, before any waiter is woken: status, proof bytes, error, timings.

On the next start `recover()` hands the engine every finished result still within
`daemon.result_retention` (AwaitProof answers them, and the same request_id maps to the same job),
and decides about jobs left "accepted" by an instance that died: re-queued with their original id
(`requeue`; at most MAX_ATTEMPTS times, so a job that brings the daemon down cannot do it forever),
or answered FAILED with the reason (`fail`, or when the inputs were not kept).

A job cancelled by a graceful stop (its grace ran out) is finished: CANCELLED is what its waiters
were told, and what the journal keeps.

Schema 2 differs from schema 1 in the request records alone: schema 1 kept the request's fields in
the journal's own layout (`CZKREQ1`), schema 2 keeps the provider's encoding (`CZKREQ2`). A schema-1
file is taken over as it is (its meta row says 2 from then on); its records are handed whole to the
kind's provider, which reads that layout too (`CircuitProvider.decode_payload`).

WAL mode with synchronous=NORMAL: a commit survives the daemon being killed at any point; an
operating-system crash may lose the last commits. One daemon per state directory is the only
writer (the pid file lock ensures it).

While the state directory cannot be written (disk full, I/O errors), a job cannot be recorded, so it
is refused (`JournalUnavailableError`, gRPC UNAVAILABLE, naming the directory and SQLite's error)
and every later submission tries again: the daemon recovers by itself once space returns. A result
that cannot be written stays in memory (its waiters get it) and is written by the next write or
`flush`; a job whose result is still unwritten when the daemon dies is found in flight at the next
start, like any other.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cuzk.engine.engine import FinishedJob, JobInfo
from cuzk.engine.jobs import (
    V1_REQUEST_MAGIC,
    JobResult,
    PartitionTiming,
    Priority,
    ProofKind,
    ProofRequest,
    ProofTimings,
    RequestPayload,
    ResultStatus,
    frame,
    unframe,
)
from cuzk.errors import CuzkError

log = logging.getLogger("cuzk.engine.journal")
SCHEMA_VERSION = 2
#: Older schemas this code takes over in place (what changed: the module docstring).
READABLE_SCHEMAS = ("1", "2")
#: A job found in flight this many times after a daemon died is failed instead of re-queued again.
MAX_ATTEMPTS = 3
#: How often finished rows past their retention are deleted (besides at open).
SWEEP_INTERVAL_S = 60.0
_REQUEST_MAGIC = b"CZKREQ2\n"
_KIND_BY_LABEL = {k.label: k for k in ProofKind}
_STATE_BY_STATUS = {ResultStatus.COMPLETED: "completed", ResultStatus.FAILED: "failed",
                    ResultStatus.CANCELLED: "cancelled"}
RESTART_POLICIES = ("requeue", "fail")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    proof_kind TEXT NOT NULL,
    priority TEXT NOT NULL,
    circuit_id TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL,               -- accepted | completed | failed | cancelled
    instance_id TEXT NOT NULL,         -- the instance that accepted it last (or finished it)
    attempts INTEGER NOT NULL DEFAULT 1,
    submitted_at_ms INTEGER NOT NULL,
    finished_at_ms INTEGER,
    status INTEGER,
    error TEXT,
    proof BLOB,
    result_json TEXT
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, finished_at_ms);
CREATE TABLE IF NOT EXISTS requests (digest TEXT PRIMARY KEY, request BLOB NOT NULL);
"""


class JournalError(CuzkError):
    """The journal cannot be opened or written; the message names the file."""


class JournalUnavailableError(JournalError):
    """The journal cannot be written now (the disk is full, I/O errors): new work is refused until it can."""


class PayloadDecoder(Protocol):
    """Reads a payload back (the daemon's `ProviderRegistry`)."""

    def decode_payload(self, kind: ProofKind, data: bytes) -> RequestPayload: ...


def encode_request(request: ProofRequest) -> bytes:
    """A request as bytes: a JSON header (id, kind, priority) and the payload as its provider encodes it."""
    if request.payload is None or request.priority is None:
        raise ValueError("only a request with a payload and a resolved priority is kept")
    header = {"request_id": request.request_id, "proof_kind": int(request.proof_kind),
              "priority": int(request.priority)}
    return frame(_REQUEST_MAGIC, header, [request.payload.encode()])


def decode_request(data: bytes, payloads: PayloadDecoder) -> ProofRequest:
    """`encode_request`'s bytes, or a schema-1 record (whose header the provider reads too)."""
    magic, header, end = unframe(data, (_REQUEST_MAGIC, V1_REQUEST_MAGIC), "a journal request record")
    kind = ProofKind(header["proof_kind"])
    payload = data[end:] if magic == _REQUEST_MAGIC else data
    return ProofRequest(str(header["request_id"]), kind, Priority(header["priority"]),
                        payloads.decode_payload(kind, payload))


def _result_json(result: JobResult) -> str:
    data = asdict(result)
    data.pop("proof")
    data["status"] = int(result.status)
    return json.dumps(data)


def _result_from_row(job_id: str, result_json: str | None, status: int, error: str, proof: bytes | None,
                     finished_at_ms: int, submitted_at_ms: int) -> JobResult:
    data: dict[str, Any] = json.loads(result_json) if result_json else {}
    return JobResult(
        job_id=job_id, status=ResultStatus(status), proof=bytes(proof or b""), error=error or "",
        timings=ProofTimings(**data.get("timings", {})), proof_kind=data.get("proof_kind", ""),
        circuit_id=data.get("circuit_id", ""), submitted_at_unix_ms=data.get("submitted_at_unix_ms", submitted_at_ms),
        started_at_unix_ms=data.get("started_at_unix_ms", 0),
        finished_at_unix_ms=data.get("finished_at_unix_ms", finished_at_ms),
        partitions=tuple(PartitionTiming(**p) for p in data.get("partitions", ())),
    )


@dataclass
class Recovery:
    """What a new instance takes over from the journal."""

    finished: list[FinishedJob] = field(default_factory=list)
    #: (job id, input digest) of jobs to run again, oldest first; `Journal.load_request` reads each
    #: one's inputs when it is its turn (they may be hundreds of MB each).
    requeue: list[tuple[str, str]] = field(default_factory=list)
    #: Jobs found in flight and failed now (also in `finished`).
    failed_now: list[str] = field(default_factory=list)


class Journal:
    """The SQLite journal of one state directory; implements the engine's `JobJournal` hooks."""

    def __init__(self, path: Path, *, instance_id: str, keep_requests: bool, retention_s: float,
                 max_results: int) -> None:
        self.path = path
        self.instance_id = instance_id
        self.keep_requests = keep_requests
        self.retention_s = retention_s
        self.max_results = max_results
        self._lock = threading.Lock()
        self._staged: collections.Counter[str] = collections.Counter()
        self._last_sweep = 0.0
        #: Finished results not written yet (the journal was unavailable), by job id, oldest first.
        self._unwritten: dict[str, tuple[JobInfo, JobResult]] = {}
        #: Why the last write failed; "" while writes succeed.
        self._write_error = ""
        try:
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise JournalError(f"job journal {path}: cannot use WAL mode (got {mode})")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif row[0] not in READABLE_SCHEMAS:
                raise JournalError(f"job journal {path}: schema version {row[0]}, this cuzk reads "
                                   f"{', '.join(READABLE_SCHEMAS)}; move the file away to start a new journal")
            elif row[0] != str(SCHEMA_VERSION):
                log.info("job journal %s: schema %s taken over as schema %s", path, row[0], SCHEMA_VERSION)
                self._db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        except sqlite3.Error as err:
            raise JournalError(f"job journal {path}: {err}") from None
        try:
            self.sweep(requests=True)
        except JournalUnavailableError as err:  # read-only until space returns: jobs are refused, not lost
            log.warning("%s", err)

    # -- engine hooks ---------------------------------------------------------------------------------------
    def stage_request(self, digest: str, request: ProofRequest) -> None:
        """Keep the request's inputs (before the job is accepted, outside the engine's lock), once per digest."""
        if not self.keep_requests:
            return
        with self._lock:
            self._staged[digest] += 1
            if self._db.execute("SELECT 1 FROM requests WHERE digest = ?", (digest,)).fetchone() is not None:
                return
        blob = encode_request(request)
        with self._lock:
            try:
                self._write("INSERT OR IGNORE INTO requests (digest, request) VALUES (?, ?)", (digest, blob))
            except JournalError:
                self._unstage(digest)  # the submission is refused: nothing will unstage it
                raise

    def unstage_request(self, digest: str) -> None:
        """The staged submission was decided: its inputs stay if an accepted job uses them, else they go."""
        if not self.keep_requests:
            return
        with self._lock:
            self._unstage(digest)
            self._drop_request_if_unused(digest)

    def job_accepted(self, job: JobInfo) -> None:
        now = round(time.time() * 1000)
        with self._lock:
            self._flush()  # results finished earlier go first; if they cannot, neither can this job
            self._write(
                """INSERT INTO jobs (job_id, digest, proof_kind, priority, circuit_id, state, instance_id, attempts,
                                     submitted_at_ms)
                   VALUES (?, ?, ?, ?, ?, 'accepted', ?, 1, ?)
                   ON CONFLICT (job_id) DO UPDATE SET
                     attempts = CASE WHEN jobs.state = 'accepted' AND jobs.digest = excluded.digest
                                     THEN jobs.attempts + 1 ELSE 1 END,
                     submitted_at_ms = CASE WHEN jobs.state = 'accepted' AND jobs.digest = excluded.digest
                                            THEN jobs.submitted_at_ms ELSE excluded.submitted_at_ms END,
                     digest = excluded.digest, proof_kind = excluded.proof_kind, priority = excluded.priority,
                     circuit_id = excluded.circuit_id, state = 'accepted', instance_id = excluded.instance_id,
                     finished_at_ms = NULL, status = NULL, error = NULL, proof = NULL, result_json = NULL""",
                (job.job_id, job.digest, job.proof_kind, job.priority, job.circuit_id, self.instance_id,
                 job.submitted_at_unix_ms or now))

    def job_finished(self, job: JobInfo, result: JobResult) -> None:
        """Record a result; while the journal is unavailable it is kept in memory and written later."""
        if result.status not in _STATE_BY_STATUS:
            return
        with self._lock:
            self._unwritten[job.job_id] = (job, result)
            try:
                self._flush()
            except JournalUnavailableError:
                return  # kept; `flush` or the next write retries
        if time.monotonic() - self._last_sweep > SWEEP_INTERVAL_S:
            with contextlib.suppress(JournalUnavailableError):  # tried again at the next interval
                self.sweep()

    def flush(self) -> int:
        """Write the results kept while the journal was unavailable; how many are still unwritten."""
        with self._lock:
            if self._unwritten:
                with contextlib.suppress(JournalUnavailableError):
                    self._flush()
            return len(self._unwritten)

    def state(self) -> dict[str, Any]:
        """For status: whether the journal can be written, why not, and the results waiting to be."""
        with self._lock:
            return {"path": str(self.path), "writable": not self._write_error, "error": self._write_error,
                    "unwritten_results": len(self._unwritten)}

    def _flush(self) -> None:
        while self._unwritten:
            job_id = next(iter(self._unwritten))
            try:
                self._write_result(*self._unwritten[job_id])
            except JournalUnavailableError:
                raise
            except JournalError as err:  # never writable: kept, it would refuse every later job
                log.error("journal: the result of job %s cannot be recorded and is dropped: %s", job_id, err)
            del self._unwritten[job_id]

    def _write_result(self, job: JobInfo, result: JobResult) -> None:  # lock held
        state = _STATE_BY_STATUS[result.status]
        finished = result.finished_at_unix_ms or round(time.time() * 1000)
        self._write(
            """INSERT INTO jobs (job_id, digest, proof_kind, priority, circuit_id, state, instance_id,
                                 submitted_at_ms, finished_at_ms, status, error, proof, result_json)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT (job_id) DO UPDATE SET
                 digest = excluded.digest, circuit_id = excluded.circuit_id, state = excluded.state,
                 instance_id = excluded.instance_id, finished_at_ms = excluded.finished_at_ms,
                 status = excluded.status, error = excluded.error, proof = excluded.proof,
                 result_json = excluded.result_json""",
            (job.job_id, job.digest, job.proof_kind, job.priority, result.circuit_id or job.circuit_id, state,
             self.instance_id, job.submitted_at_unix_ms, finished, int(result.status), result.error,
             result.proof, _result_json(result)))
        self._drop_request_if_unused(job.digest)

    # -- recovery ----------------------------------------------------------------------------------------------
    def recover(self, policy: str) -> Recovery:
        """Finished results to restore, and the verdict on jobs a dead instance left in flight."""
        if policy not in RESTART_POLICIES:
            raise ValueError(f"unknown restart policy {policy!r}")
        out = Recovery()
        with self._lock:
            in_flight = self._db.execute(
                "SELECT job_id, digest, instance_id, attempts FROM jobs WHERE state = 'accepted' "
                "ORDER BY submitted_at_ms, rowid").fetchall()
        for job_id, digest, instance, attempts in in_flight:
            reason = self._requeue_obstacle(policy, digest, instance, attempts)
            if reason is None:
                out.requeue.append((job_id, digest))
                continue
            self.fail(job_id, reason)
            out.failed_now.append(job_id)
        out.finished = self.finished_jobs()
        return out

    def _requeue_obstacle(self, policy: str, digest: str, instance: str, attempts: int) -> str | None:
        """Why an in-flight job cannot be re-queued, or None if it can."""
        lost = f"the daemon (instance {instance}) stopped while this job was in flight"
        if policy == "fail":
            return f"{lost}; daemon.on_restart = \"fail\", so it is not run again: submit it again"
        if attempts >= MAX_ATTEMPTS:
            return (f"{lost}, {attempts} times now; it is not re-queued again (it may be what brings the "
                    "daemon down): submit it again")
        with self._lock:
            kept = self._db.execute("SELECT 1 FROM requests WHERE digest = ?", (digest,)).fetchone()
        if kept is None:
            return (f"{lost} and its inputs were not kept (daemon.on_restart was \"fail\" or the journal was off "
                    "when it was accepted): submit it again")
        return None

    def load_request(self, digest: str, payloads: PayloadDecoder) -> ProofRequest:
        """The kept inputs of a job to re-queue, its payload read by `payloads` (the daemon's providers);
        JournalError if they are gone or unreadable."""
        with self._lock:
            row = self._db.execute("SELECT request FROM requests WHERE digest = ?", (digest,)).fetchone()
        if row is None:
            raise JournalError(f"job journal {self.path}: the kept inputs ({digest[:16]}...) are gone")
        try:
            return decode_request(bytes(row[0]), payloads)
        except (ValueError, KeyError, TypeError, CuzkError) as err:
            raise JournalError(f"job journal {self.path}: the kept inputs cannot be read: {err}") from None

    def fail(self, job_id: str, reason: str) -> None:
        """Record an unfinished job as FAILED with `reason` (e.g. it could not be re-queued)."""
        now = round(time.time() * 1000)
        with self._lock:
            row = self._db.execute("SELECT digest, proof_kind, submitted_at_ms FROM jobs WHERE job_id = ?",
                                   (job_id,)).fetchone()
            if row is None:
                return
            result = JobResult(job_id, ResultStatus.FAILED, error=reason, proof_kind=row[1],
                               submitted_at_unix_ms=row[2], finished_at_unix_ms=now)
            self._write("UPDATE jobs SET state = 'failed', instance_id = ?, finished_at_ms = ?, status = ?, "
                        "error = ?, proof = NULL, result_json = ? WHERE job_id = ?",
                        (self.instance_id, now, int(ResultStatus.FAILED), reason, _result_json(result), job_id))
            self._drop_request_if_unused(row[0])

    def finished_jobs(self) -> list[FinishedJob]:
        with self._lock:
            rows = self._db.execute(
                "SELECT job_id, digest, proof_kind, priority, status, error, proof, result_json, finished_at_ms, "
                "submitted_at_ms FROM jobs WHERE state != 'accepted' ORDER BY finished_at_ms, rowid").fetchall()
        out = []
        for job_id, digest, kind, priority, status, error, proof, result_json, finished_ms, submitted_ms in rows:
            try:
                result = _result_from_row(job_id, result_json, status, error, proof, finished_ms, submitted_ms)
                out.append(FinishedJob(job_id, digest, _KIND_BY_LABEL[kind], Priority[priority], result))
            except (KeyError, ValueError, TypeError) as err:
                log.warning("journal: skipping unreadable finished job %s: %s", job_id, err)
        return out

    # -- housekeeping ---------------------------------------------------------------------------------------------
    def sweep(self, *, requests: bool = False) -> int:
        """Delete finished jobs past `retention_s` or beyond `max_results`; with `requests`, also unused inputs."""
        cutoff = round((time.time() - self.retention_s) * 1000)
        with self._lock:
            self._last_sweep = time.monotonic()
            before = self._db.total_changes
            self._write("DELETE FROM jobs WHERE state != 'accepted' AND finished_at_ms < ?", (cutoff,))
            self._write("DELETE FROM jobs WHERE job_id IN (SELECT job_id FROM jobs WHERE state != 'accepted' "
                        "ORDER BY finished_at_ms DESC LIMIT -1 OFFSET ?)", (self.max_results,))
            if requests and not self._staged:
                self._write("DELETE FROM requests WHERE digest NOT IN "
                            "(SELECT digest FROM jobs WHERE state = 'accepted')", ())
            return self._db.total_changes - before

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())

    def row(self, job_id: str) -> dict[str, Any] | None:
        """A job's journal row (without proof bytes), for status output and tests."""
        with self._lock:
            cur = self._db.execute("SELECT job_id, digest, proof_kind, priority, state, instance_id, attempts, "
                                   "submitted_at_ms, finished_at_ms, status, error FROM jobs WHERE job_id = ?",
                                   (job_id,))
            values = cur.fetchone()
            if values is None:
                return None
            return dict(zip([d[0] for d in cur.description], values, strict=True))

    def close(self) -> None:
        """Checkpoint the WAL into the database file and close (the daemon's last step on a clean stop)."""
        with self._lock:
            with contextlib.suppress(JournalUnavailableError):
                self._flush()
            if self._unwritten:
                log.error("journal: %d result(s) could not be written (%s): %s; the next start finds those jobs "
                          "in flight (daemon.on_restart decides)", len(self._unwritten), self._write_error,
                          ", ".join(self._unwritten))
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as err:
                log.warning("journal: checkpoint failed: %s", err)
            self._db.close()

    # -- internals (lock held) -------------------------------------------------------------------------------------
    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        try:
            self._db.execute(sql, params)
        except sqlite3.OperationalError as err:  # disk full, I/O error, read-only file system...
            if not self._write_error:
                log.error("journal: the state directory %s cannot be written (%s): new jobs are refused until "
                          "it can", self.path.parent, err)
            self._write_error = str(err)
            raise JournalUnavailableError(
                f"the state directory {self.path.parent} cannot be written ({err}), so job journal {self.path} "
                "cannot record new jobs; none are accepted until writes succeed again: retry later") from None
        except sqlite3.Error as err:
            raise JournalError(f"job journal {self.path}: {err}") from None
        if self._write_error:
            log.warning("journal: the state directory %s can be written again; accepting jobs", self.path.parent)
            self._write_error = ""

    def _unstage(self, digest: str) -> None:
        if self._staged[digest] > 0:
            self._staged[digest] -= 1
            if self._staged[digest] == 0:
                del self._staged[digest]

    def _drop_request_if_unused(self, digest: str) -> None:
        if self._staged.get(digest):
            return
        self._write("DELETE FROM requests WHERE digest = ? AND NOT EXISTS "
                    "(SELECT 1 FROM jobs WHERE digest = ? AND state = 'accepted')", (digest, digest))
