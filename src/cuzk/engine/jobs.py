"""What a proof job is: priorities, states, the request, per-partition records, results.

Priorities use the cuzk.v1 enum numbers so the gRPC layer converts by value. A job's kind is a
`cuzk.kinds.ProofKind` (re-exported here), which the engine carries without knowing what it means;
what a request of that kind proves is its `RequestPayload`, which only the kind's provider reads.
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any

from cuzk.kinds import ProofKind  # re-exported: every request and job carries one


class Priority(IntEnum):
    LOW = 1
    NORMAL = 2
    HIGH = 3
    CRITICAL = 4


class JobState(Enum):
    QUEUED = "queued"  #: in the scheduler or a batch being collected
    PLANNING = "planning"  #: payload parsed, partitions planned, parameters made resident
    RUNNING = "running"  #: partitions in synthesis or proving
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED)


class PartitionState(Enum):
    """The Rust daemon's /status names (docs/compatibility.md §4), plus cancelled."""

    PENDING = "pending"
    SYNTHESIZING = "synthesizing"
    SYNTH_DONE = "synth_done"
    PROVING = "gpu"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ResultStatus(IntEnum):
    """AwaitProofResponse.Status numbers."""

    UNKNOWN = 0
    COMPLETED = 1
    FAILED = 2
    CANCELLED = 3
    TIMEOUT = 4


#: The first bytes of a schema-1 journal's request record (the journal's; the providers read it too).
V1_REQUEST_MAGIC = b"CZKREQ1\n"


def frame(magic: bytes, header: dict[str, Any], parts: list[bytes]) -> bytes:
    """`magic`, the JSON `header` after its 4-byte length, then `parts`: the layout of the journal's
    request records and of the payloads kept in them."""
    head = json.dumps(header).encode()
    return b"".join([magic, len(head).to_bytes(4, "little"), head, *parts])


def unframe(data: bytes, magics: tuple[bytes, ...], what: str) -> tuple[bytes, dict[str, Any], int]:
    """`frame`'s magic (one of `magics`), header and where the header ends; ValueError, naming `what`,
    for other bytes."""
    magic = next((m for m in magics if data.startswith(m)), None)
    if magic is None:
        raise ValueError(f"not {what}")
    size = int.from_bytes(data[len(magic):len(magic) + 4], "little")
    end = len(magic) + 4 + size
    return magic, json.loads(data[len(magic) + 4:end]), end


class RequestPayload(ABC):
    """What a request of some kind proves, as its provider reads it (`CircuitProvider.payload_from_message`,
    `decode_payload`). The engine hashes, journals, sizes and frees it without looking inside."""

    @abstractmethod
    def digest(self) -> str:
        """Identifies the inputs, the kind included: a repeated request_id must carry the same."""

    @abstractmethod
    def encode(self) -> bytes:
        """The form the journal keeps; the provider's `decode_payload` reads it back."""

    @abstractmethod
    def nbytes(self) -> int:
        """Bytes held against the memory budget from submit until the job is planned."""

    @abstractmethod
    def release(self) -> None:
        """Free the bulk once the job is planned (the plan holds what its partitions need)."""


@dataclass
class ProofRequest:
    """A SubmitProofRequest in engine terms: what the engine orders by, and the provider's payload."""

    request_id: str
    proof_kind: ProofKind
    #: None: the default of the kind's provider, set by `Engine.submit`.
    priority: Priority | None = None
    payload: RequestPayload | None = None

    def digest(self) -> str:
        """Identifies the inputs (not the id or priority): a repeated request_id must carry the same."""
        return self.payload.digest() if self.payload is not None else ""

    def payload_bytes(self) -> int:
        return self.payload.nbytes() if self.payload is not None else 0

    def drop_payload(self) -> None:
        """Free the (possibly 200 MB) payload once the job is planned."""
        if self.payload is not None:
            self.payload.release()


@dataclass
class PartitionRecord:
    """One partition's progress; times are `time.monotonic()` (system-wide on Linux, so worker
    processes can stamp them too)."""

    index: int
    state: PartitionState = PartitionState.PENDING
    synth_start: float | None = None
    synth_end: float | None = None
    synth_worker: str = ""
    device_queue: float | None = None
    #: When its prover worker asked for the device lock (in-process only: not in results).
    lock_wait_start: float | None = None
    device_start: float | None = None
    device_end: float | None = None
    device_ordinal: int = 0
    device_worker: str = ""
    batch_size: int = 0
    verify_s: float = 0.0
    #: The backend's sub-phases of device compute (seconds), e.g. h, msm_h, msm_l.
    device_phases: dict[str, float] = field(default_factory=dict)
    #: When the proof came back from the device process (encoded and verified).
    done: float | None = None
    #: Devices that died (or became unusable) while holding this partition, each before answering.
    device_attempts: int = 0
    #: The last of them and its restart count when it was handed the partition: its lanes are not
    #: handed the partition again until it has restarted (its other lane would find it dead too).
    failed_on: tuple[str, int] | None = None
    proof: bytes | None = None

    @property
    def synth_s(self) -> float:
        if self.synth_start is None or self.synth_end is None:
            return 0.0
        return self.synth_end - self.synth_start

    @property
    def device_s(self) -> float:
        """Seconds it held the device: its device span less what it lent a proof of higher priority
        mid-phase (`yielded`, cuzk.backends.cuda.admission)."""
        if self.device_start is None or self.device_end is None:
            return 0.0
        return self.device_end - self.device_start - self.device_phases.get("yielded", 0.0)


@dataclass(frozen=True)
class PartitionTiming:
    index: int
    synth_start_ms: int
    synth_end_ms: int
    device_queue_ms: int
    device_start_ms: int
    device_end_ms: int
    device_ordinal: int
    worker: str
    batch_size: int
    # For bench's per-phase breakdown; defaults keep journal rows of older versions readable.
    planned_ms: int = 0
    done_ms: int = 0
    verify_us: int = 0
    device_phases_us: dict[str, int] = field(default_factory=dict)
    synth_worker: str = ""


@dataclass(frozen=True)
class ProofTimings:
    queue_wait_ms: int = 0
    srs_load_ms: int = 0
    synthesis_ms: int = 0
    gpu_compute_ms: int = 0
    verify_ms: int = 0
    total_ms: int = 0


@dataclass(frozen=True)
class JobResult:
    """What AwaitProof answers."""

    job_id: str
    status: ResultStatus
    proof: bytes = b""
    error: str = ""
    timings: ProofTimings = ProofTimings()
    proof_kind: str = ""
    circuit_id: str = ""
    submitted_at_unix_ms: int = 0
    started_at_unix_ms: int = 0
    finished_at_unix_ms: int = 0
    partitions: tuple[PartitionTiming, ...] = ()


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


class Job:
    """A proof job and its partitions. Mutated only under the engine's lock; `done` is set once."""

    def __init__(self, job_id: str, seq: int, request: ProofRequest, *, origin: str) -> None:
        self.job_id = job_id
        self.seq = seq
        self.request = request
        self.kind = request.proof_kind
        if request.priority is None:
            raise ValueError(f"job {job_id}: the request's priority is not resolved (Engine.submit sets the default)")
        self.priority: Priority = request.priority
        self.digest = request.digest()
        self.origin = origin  #: "submit" or "prove": who created it
        self.state = JobState.QUEUED
        self.circuit_id = ""
        self.partitions: list[PartitionRecord] = []
        self.error = ""
        self.proof = b""
        self.submitted = time.monotonic()
        self.submitted_wall = time.time()
        self.started: float | None = None
        self.planned: float | None = None  #: partitions queued for synthesis
        self.finished: float | None = None
        self.srs_load_s = 0.0
        self.batch_id = 0
        self.was_dispatched = False
        self.inflight = 0  #: partitions in synthesis or on a device (their memory is still held)
        #: `[scheduler] device_mode = "throughput"`: the device this job's partitions go to.
        self.device_affinity = ""
        self.prove_waiters = 0
        self.srs_lease: object | None = None
        self.payload_reservation: Any = None  #: the request's bytes, held against the budget until planned
        self.batchable = False
        #: Let out of the scheduler by aging (see cuzk.engine.scheduler): sorts as HIGH from then on.
        self.aged = False
        self.done = threading.Event()

    # -- derived -----------------------------------------------------------------------------------
    @property
    def effective_priority(self) -> Priority:
        """The priority its partitions are queued and take the device lock with: a job aged past
        younger HIGH work keeps that place in the pipeline (as HIGH, and older than them)."""
        return max(self.priority, Priority.HIGH) if self.aged else self.priority

    @property
    def sort_key(self) -> tuple[int, int, int]:
        """Order of partitions in the synthesis and device queues: priority, then batch, then job."""
        return (-int(self.effective_priority), self.batch_id or self.seq, self.seq)

    def phase(self) -> str:
        """queued / planning / synthesizing / proving / finished, for queue statistics."""
        if self.state.finished:
            return "finished"
        if self.state is JobState.QUEUED:
            return "queued"
        if self.state is JobState.PLANNING:
            return "planning"
        unsynthesized = (PartitionState.PENDING, PartitionState.SYNTHESIZING)
        if any(p.state in unsynthesized for p in self.partitions):
            return "synthesizing"
        return "proving"

    def partitions_done(self) -> int:
        return sum(p.state is PartitionState.DONE for p in self.partitions)

    def _wall_ms(self, mono: float | None) -> int:
        if mono is None:
            return 0
        return _ms(self.submitted_wall + (mono - self.submitted))

    def _rel_ms(self, mono: float | None) -> int:
        return 0 if mono is None else _ms(mono - self.submitted)

    def result(self) -> JobResult:
        status = {
            JobState.COMPLETED: ResultStatus.COMPLETED,
            JobState.FAILED: ResultStatus.FAILED,
            JobState.CANCELLED: ResultStatus.CANCELLED,
        }.get(self.state, ResultStatus.UNKNOWN)
        end = self.finished if self.finished is not None else time.monotonic()
        timings = ProofTimings(
            queue_wait_ms=_ms((self.started or end) - self.submitted),
            srs_load_ms=_ms(self.srs_load_s),
            synthesis_ms=_ms(sum(p.synth_s for p in self.partitions)),
            gpu_compute_ms=_ms(sum(p.device_s for p in self.partitions)),
            verify_ms=_ms(sum(p.verify_s for p in self.partitions)),
            total_ms=_ms(end - self.submitted),
        )
        parts = tuple(
            PartitionTiming(p.index, self._rel_ms(p.synth_start), self._rel_ms(p.synth_end),
                            self._rel_ms(p.device_queue), self._rel_ms(p.device_start), self._rel_ms(p.device_end),
                            p.device_ordinal, p.device_worker, p.batch_size, planned_ms=self._rel_ms(self.planned),
                            done_ms=self._rel_ms(p.done), verify_us=max(0, round(p.verify_s * 1e6)),
                            device_phases_us={k: max(0, round(v * 1e6)) for k, v in p.device_phases.items()},
                            synth_worker=p.synth_worker)
            for p in self.partitions
        )
        return JobResult(
            job_id=self.job_id, status=status, proof=self.proof, error=self.error, timings=timings,
            proof_kind=self.kind.label, circuit_id=self.circuit_id,
            submitted_at_unix_ms=_ms(self.submitted_wall), started_at_unix_ms=self._wall_ms(self.started),
            finished_at_unix_ms=self._wall_ms(self.finished), partitions=parts,
        )
