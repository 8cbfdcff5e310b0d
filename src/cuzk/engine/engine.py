"""The engine: the API the gRPC and HTTP front ends call, and the job-level flow behind it.

Threads in the daemon process (no proving or synthesis runs here):
- gRPC/HTTP threads call `submit`, `await_result`, `cancel`, `status`, ...;
- the dispatcher moves jobs from the scheduler (priority, FIFO) into planning, keeping at most
  `window` jobs in the pipeline (prover workers + `pipeline.synthesis_lookahead`; 1 when
  `pipeline.enabled = false`; CRITICAL jobs are always admitted), and runs the batch collector;
- planners (`pipeline.synthesis_concurrency` of them, plus a separate pool so CRITICAL jobs never
  wait behind another job's planning) ask the provider for partitions, measure the circuit's shape
  once per circuit id, and take the job's SRS reference (loading it hot if needed);
- the pipeline's feeder threads (one per synthesis process, one per prover worker; one synthesis
  process, `cuzk-synth-critical`, and one prover lane per device serve CRITICAL work only);
- the notifier delivers job events to listeners, and the housekeeper prunes finished jobs after
  `daemon.result_retention`, restarts idle workers found dead and refreshes device information.

A `JobJournal` (cuzk.engine.journal), unlike a listener, is written synchronously: a job is recorded
before SubmitProof answers and its result before any waiter is woken, so what a client was told
survives a crash. `restore_finished` and `submit(job_id=...)` let a new instance take over what the
journal kept.

One condition variable (`_cv`, re-entrant) guards jobs, queues and pipeline state.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import psutil

from cuzk.config import Config, ConfigError, host
from cuzk.engine import status as status_views
from cuzk.engine import timeline
from cuzk.engine.compiled_recipe import CompiledRecipe, use_compiled
from cuzk.engine.compiled_store import CompiledStore
from cuzk.engine.devices import device_witness_floor, sparse_products_where
from cuzk.engine.executor import Device, Executor
from cuzk.engine.jobs import (
    Job,
    JobResult,
    JobState,
    PartitionRecord,
    PartitionState,
    Priority,
    ProofKind,
    ProofRequest,
    ResultStatus,
)
from cuzk.engine.memory import BudgetError, MemoryBudget, PartitionEstimate
from cuzk.engine.metrics import EngineMetrics
from cuzk.engine.pipeline import Pipeline, PipelineSettings
from cuzk.engine.procs import WorkerProcess
from cuzk.engine.providers import CircuitProvider, InvalidRequestError, ProviderRegistry, SrsSource, WorkerCall
from cuzk.engine.scheduler import BatchCollector, Scheduler
from cuzk.engine.srs import SrsManager
from cuzk.errors import CuzkError

log = logging.getLogger("cuzk.engine")
MAX_REQUEST_ID = 256
#: Per worker process, on top of its measured RSS at start: allocator slack and numba/arkworks caches.
PROCESS_SLACK_BYTES = 64 << 20


class UnknownJobError(CuzkError):
    """No job with this id (never submitted, or pruned after daemon.result_retention)."""


class RequestConflictError(CuzkError):
    """A request_id already names a running job with different inputs."""


class NotAcceptingError(CuzkError):
    """The daemon is draining or shutting down."""


class QueueFullError(CuzkError):
    """daemon.max_queued_jobs jobs are already waiting (gRPC RESOURCE_EXHAUSTED: the client backs off and retries)."""


@dataclass(frozen=True)
class SubmitOutcome:
    job_id: str
    queue_position: int
    deduplicated: bool


@dataclass(frozen=True)
class JobInfo:
    """What a listener (e.g. a journal) learns about a job."""

    job_id: str
    proof_kind: str
    priority: str
    circuit_id: str
    digest: str
    submitted_at_unix_ms: int


class JobListener(Protocol):
    def job_accepted(self, job: JobInfo) -> None: ...

    def job_finished(self, job: JobInfo, result: JobResult) -> None: ...


class JobJournal(JobListener, Protocol):
    """A listener the engine calls synchronously (cuzk.engine.journal.Journal).

    `stage_request` runs before the engine's lock is taken (it may write the whole request) and
    `unstage_request` after it, whatever became of the submission; `job_accepted` and `job_finished`
    run under the lock and must be quick. An exception from `stage_request` or `job_accepted`
    refuses the submission. A result `job_finished` cannot write now it keeps; `flush` (the
    housekeeper, every second) retries those.
    """

    def stage_request(self, digest: str, request: ProofRequest) -> None: ...

    def unstage_request(self, digest: str) -> None: ...

    def flush(self) -> int: ...

    def state(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class FinishedJob:
    """A finished job kept by a journal, to be answerable again after a restart."""

    job_id: str
    digest: str
    proof_kind: ProofKind
    priority: Priority
    result: JobResult


_STATE_OF_RESULT = {ResultStatus.COMPLETED: JobState.COMPLETED, ResultStatus.FAILED: JobState.FAILED,
                    ResultStatus.CANCELLED: JobState.CANCELLED}


class _RestoredJob(Job):
    """A finished job from a previous instance: it answers with the stored result."""

    def __init__(self, record: FinishedJob, seq: int) -> None:
        super().__init__(record.job_id, seq, ProofRequest(record.job_id, record.proof_kind, record.priority),
                         origin="journal")
        result = record.result
        self.digest = record.digest
        self.state = _STATE_OF_RESULT[result.status]
        self.circuit_id = result.circuit_id
        self.error = result.error
        self.proof = result.proof
        now_mono, now_wall = time.monotonic(), time.time()
        self.submitted_wall = result.submitted_at_unix_ms / 1000
        self.submitted = now_mono - max(0.0, now_wall - self.submitted_wall)
        self.finished = now_mono - max(0.0, now_wall - result.finished_at_unix_ms / 1000)
        self._stored = result
        self.done.set()

    def result(self) -> JobResult:
        return self._stored


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Spawn worker processes with SIGINT ignored (they keep that across exec), so a Ctrl-C in the
    daemon's terminal reaches only the daemon, which drains, instead of killing the workers mid-proof."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _info(job: Job) -> JobInfo:
    return JobInfo(job.job_id, job.kind.label, job.priority.name, job.circuit_id, job.digest,
                   round(job.submitted_wall * 1000))


def validate_request(request: ProofRequest) -> None:
    """The checks of what the engine reads (the kind's provider checks the payload)."""
    rid = request.request_id
    if len(rid) > MAX_REQUEST_ID:
        raise InvalidRequestError(f"request_id is {len(rid)} characters; at most {MAX_REQUEST_ID} are allowed")
    if any(not ch.isprintable() or ch.isspace() for ch in rid):
        raise InvalidRequestError("request_id may not contain spaces or control characters")
    if request.payload is None:
        raise InvalidRequestError(f"request {rid!r} carries no payload")


class Engine:
    def __init__(self, config: Config, *, executor: Executor, providers: ProviderRegistry,
                 instance_id: str | None = None) -> None:
        """`executor`: the devices to prove on (`cuzk.engine.executor`), built from the same config
        where the daemon is wired (`cuzk.engine.executors.make_executor`); the engine starts and stops
        it. `providers`: the circuit providers the engine serves (`cuzk.engine.providers`; a daemon's
        come from the `providers` package above the engine)."""
        self.config = config
        self.instance_id = instance_id or uuid.uuid4().hex[:12]
        self.started_wall = time.time()
        self.started = time.monotonic()
        mode = config.synthesis.compiled
        self.compiled = CompiledStore(Path(config.srs.param_cache) / "compiled", enabled=mode != "off",
                                      auto_build=mode == "build")
        self.executor = executor
        self.device_specs = self.executor.specs
        self.sparse_products = sparse_products_where(config.synthesis.sparse_products, self.device_specs)
        self.device_witness = device_witness_floor(config.synthesis.device_witness, self.sparse_products,
                                                    self.device_specs)
        self.providers = providers
        for circuit_id in config.srs.preload:  # fail before any process is spawned
            try:
                self.providers.srs_source(circuit_id)
            except CuzkError as err:
                raise ConfigError(f"srs.preload: {err}") from None
        budget, self.budget_source = config.memory.resolve()
        self.budget = MemoryBudget(budget)
        self.compiled.budget = self.budget  # a background compile reserves its memory like any other user
        self._cv = threading.Condition(threading.RLock())
        self.scheduler = Scheduler(sort_by_type=config.scheduler.sort_by_type)
        self.collector = BatchCollector(config.scheduler.max_batch_size, config.scheduler.max_batch_wait_ms / 1000)
        self.jobs: dict[str, Job] = {}
        self._seq = 0
        self._active = 0
        self._accepting = True
        self._stopping = False
        self._listeners: list[JobListener] = []
        self.journal: JobJournal | None = None
        self._events: queue.Queue[tuple[str, JobInfo, JobResult | None] | None] = queue.Queue()
        self._shapes: dict[str, Any] = {}
        self._shape_lock = threading.Lock()
        self.rss = status_views.RssMeter()
        self.counters = {"completed": 0, "failed": 0, "cancelled": 0}
        self.metrics = EngineMetrics(lambda: status_views.gauges(self))

        #: The CPUs synthesis may use: the cores, bounded by a cgroup CPU quota (`cuzk.config.host`).
        self.cpus = host.cpu_limit()
        #: The synthesis processes are the executor's.
        self.synthesis = self.executor.synthesis
        self.srs = SrsManager(self.budget, self.executor, self.providers.srs_source, self._materialize,
                              min_idle_s=config.memory.eviction_min_idle)
        self.budget.evictor = self.evict_for
        self.budget.add_release_listener(self._wake)
        self.pipeline = Pipeline(
            cv=self._cv, budget=self.budget, executor=self.executor,
            settings=PipelineSettings(config.pipeline.slot_size, config.pipeline.max_gpu_queue_depth,
                                      config.scheduler.max_batch_size, config.pipeline.verify_proofs,
                                      config.scheduler.device_mode),
            host=self, metrics=self.metrics,
        )
        provers = self.pipeline.regular_provers  # the CRITICAL lanes take no window share
        window = provers + config.pipeline.synthesis_lookahead if config.pipeline.enabled else 1
        self.window = max(window, config.scheduler.max_batch_size if self.collector.enabled else 1)
        self._planners = ThreadPoolExecutor(config.pipeline.synthesis_concurrency, thread_name_prefix="cuzk-plan")
        self._critical_planners = ThreadPoolExecutor(2, thread_name_prefix="cuzk-plan-critical")
        self._threads: list[threading.Thread] = []
        self.baseline_bytes = 0
        #: Set by the daemon: listen addresses, config path, state dir, readiness (added to `status()`).
        self.identity: dict[str, Any] = {}

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the executor (its devices and synthesis processes), reserve their memory, start the
        threads, preload srs.preload."""
        log.info("starting %d synthesis and %d device processes (%s)", len(self.synthesis.processes),
                 len(self.executor.devices), ", ".join(f"{s.kind}{s.ordinal}" for s in self.device_specs))
        with _sigint_ignored():
            self.executor.start(self)
        try:
            self.executor.wait_ready()
            self._reserve_baseline(self.executor.processes())
        except BaseException:
            self.executor.shutdown(1.0)
            raise
        self.pipeline.start()
        for target, name in ((self._dispatch_loop, "cuzk-dispatcher"), (self._notify_loop, "cuzk-notifier"),
                             (self._housekeeping_loop, "cuzk-housekeeper")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        log.info("engine started: budget %s bytes (%s; %s held by worker processes), %d CPUs (%s), window %d jobs, "
                 "%d prover workers", f"{self.budget.total:,}", self.budget_source, f"{self.baseline_bytes:,}",
                 self.cpus.cpus, self.cpus.source, self.window, len(self.pipeline.prover_workers))
        for circuit_id in self.config.srs.preload:
            try:
                already, seconds = self.preload_srs(circuit_id)
            except CuzkError as err:
                self.shutdown(0)
                raise ConfigError(f"srs.preload: {circuit_id}: {err}") from None
            log.info("srs.preload: %s %s", circuit_id,
                     "already hot" if already else f"loaded in {seconds * 1000:.0f} ms")

    def _reserve_baseline(self, procs: list[WorkerProcess]) -> None:
        own = psutil.Process().memory_info().rss
        total = own + PROCESS_SLACK_BYTES
        for p in procs:
            try:
                total += psutil.Process(p.pid).memory_info().rss + PROCESS_SLACK_BYTES
            except (psutil.Error, TypeError):
                total += PROCESS_SLACK_BYTES
        self.baseline_bytes = total
        self.budget.reserve_permanent(total, "baseline:processes")

    def add_listener(self, listener: JobListener) -> None:
        self._listeners.append(listener)

    def attach_journal(self, journal: JobJournal) -> None:
        """Record every job from now on (call before the first submission)."""
        self.journal = journal

    def restore_finished(self, records: list[FinishedJob]) -> int:
        """Make finished jobs of earlier instances answerable (AwaitProof, request_id dedupe); the count."""
        restored = 0
        with self._cv:
            for record in records:
                current = self.jobs.get(record.job_id)
                if current is not None and not current.state.finished:
                    continue
                self._seq += 1
                self.jobs[record.job_id] = _RestoredJob(record, self._seq)
                restored += 1
        return restored

    def drain(self, timeout: float) -> bool:
        """Stop accepting jobs and wait up to `timeout` for queued and running ones; True if all finished."""
        deadline = time.monotonic() + timeout
        with self._cv:
            self._accepting = False
            while any(not j.state.finished for j in self.jobs.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 0.5))
        return True

    def shutdown(self, grace: float = 0.0) -> None:
        """Drain for `grace` seconds, cancel what is left, stop threads and worker processes (once)."""
        with self._cv:
            if self._stopping:
                return
        if not self.drain(grace):
            with self._cv:
                for job in list(self.jobs.values()):
                    self._finish(job, JobState.CANCELLED, "the daemon is shutting down")
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        self.pipeline.stop()
        self._events.put(None)
        self._planners.shutdown(wait=False, cancel_futures=True)
        self._critical_planners.shutdown(wait=False, cancel_futures=True)
        # Workers first: a feeder thread blocked on a long request returns once its process is gone.
        self.executor.shutdown(2.0)
        self.compiled.close()
        for t in self._threads:
            t.join(2.0)
        self.pipeline.join(5.0)
        log.info("engine stopped")

    @property
    def accepting(self) -> bool:
        return self._accepting

    def unable_to_prove(self) -> str | None:
        """Why no partition can be proven now, else None: every device dead with its restart failed
        (a GPU gone from the bus) or lost with its Ray node. Jobs are still queued (a device may come
        back), but health says NOT_SERVING, so that a balancer sends new work to another daemon."""
        devices = self.executor.devices
        if any(d.can_prove for d in devices):
            return None
        if not devices:
            return "no device"
        return "no device can prove: " + "; ".join(f"{d.worker_name} {d.why_not_proving}" for d in devices)

    def unfinished_jobs(self) -> list[Job]:
        with self._cv:
            return [j for j in self.jobs.values() if not j.state.finished]

    # -- API: jobs ------------------------------------------------------------------------------------
    def submit(self, request: ProofRequest, *, origin: str = "submit", job_id: str | None = None) -> SubmitOutcome:
        """Queue a job (or return the job already known under request_id). `job_id` keeps the id of a job
        re-queued from the journal (default: the request_id, else a new one)."""
        validate_request(request)
        provider = self.providers.for_request(request)
        if request.priority is None:
            request = replace(request, priority=provider.default_priority)
        circuit_id = provider.circuit_id(request)
        with self._cv:  # refuse early, before the inputs are hashed, journaled or reserved
            full = origin != "journal" and request.request_id not in self.jobs and self._queue_full()
        if full:
            raise self._queue_full_error()
        batchable = self.collector.enabled and provider.batchable(request) and request.priority < Priority.HIGH
        job_id = job_id or request.request_id or uuid.uuid4().hex
        job = Job(job_id, 0, request, origin=origin)  # hashes the inputs, outside the lock
        job.circuit_id = circuit_id
        job.batchable = batchable
        journal = self.journal
        if journal is not None:
            journal.stage_request(job.digest, request)
        try:
            payload = self._reserve_payload(request, job_id)
        except BaseException:
            if journal is not None:
                journal.unstage_request(job.digest)
            raise
        with self._cv:
            refusal = self._refusal(job)
            if refusal is None and journal is not None:
                try:
                    journal.job_accepted(_info(job))
                except CuzkError as err:
                    refusal = err
            if refusal is not None:
                self._release(payload)
            else:
                self._seq += 1
                job.seq = self._seq
                job.payload_reservation = payload
                self.jobs[job_id] = job
                position = self.scheduler.push(job)
                self._cv.notify_all()
        if journal is not None:  # the inputs are now referenced by the job, or not needed
            journal.unstage_request(job.digest)
        if refusal is not None:
            if isinstance(refusal, SubmitOutcome):
                return refusal
            raise refusal
        timeline.emit(timeline.Event.SUBMITTED, job, kind=job.kind.label, priority=job.priority.name,
                      circuit=circuit_id, payload_bytes=request.payload_bytes())
        self._events.put(("accepted", _info(job), None))
        return SubmitOutcome(job_id, position, False)

    def _refusal(self, job: Job) -> SubmitOutcome | CuzkError | None:
        """Why `job` is not queued (lock held): an outcome for a duplicate, an error, or None to queue it."""
        if not self._accepting:
            return NotAcceptingError("the daemon is shutting down and accepts no new jobs")
        existing = self.jobs.get(job.job_id)
        if existing is None:
            return self._queue_full_error() if job.origin != "journal" and self._queue_full() else None
        if existing.digest == job.digest and existing.state not in (JobState.FAILED, JobState.CANCELLED):
            self.metrics.deduplicated.inc()
            position = self.scheduler.position(existing) if existing.state is JobState.QUEUED else 0
            return SubmitOutcome(job.job_id, position, True)
        if existing.digest != job.digest and not existing.state.finished:
            return RequestConflictError(f"request_id {job.job_id!r} names a job still in progress with different "
                                        "inputs; use a new request_id")
        return self._queue_full_error() if job.origin != "journal" and self._queue_full() else None

    def _queue_full(self) -> bool:
        limit = self.config.daemon.max_queued_jobs
        return bool(limit) and len(self.scheduler) + len(self.collector) >= limit

    def _queue_full_error(self) -> QueueFullError:
        return QueueFullError(f"{self.config.daemon.max_queued_jobs} jobs are already waiting "
                              "(daemon.max_queued_jobs); retry later")

    def _reserve_payload(self, request: ProofRequest, job_id: str) -> Any:
        """Hold the request's payload bytes against the budget until the job is planned."""
        size = request.payload_bytes()
        if not size:
            return None
        got = self.budget.try_reserve(size, f"payload:{job_id}")
        if got is None:
            raise BudgetError(f"the memory budget has no room for this request's {size:,}-byte payload right now "
                              f"({self.budget.available:,} of {self.budget.total:,} bytes free); retry later")
        return got

    @staticmethod
    def _release(reservation: Any) -> None:
        if reservation is not None:
            reservation.release()

    def await_result(self, job_id: str, timeout: float | None = None,
                     stop: threading.Event | None = None) -> JobResult | None:
        """The job's result, or a TIMEOUT result after `timeout` seconds, or None once `stop` is set."""
        with self._cv:
            job = self.jobs.get(job_id)
        if job is None:
            raise UnknownJobError(self._unknown(job_id))
        deadline = None if timeout is None else time.monotonic() + timeout
        while not job.done.is_set():
            if stop is not None and stop.is_set():
                return None
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                self.metrics.await_timeouts.inc()
                return JobResult(job_id, ResultStatus.TIMEOUT, error=f"no result within {timeout * 1000:.0f} ms; "
                                 "the job is still in progress", proof_kind=job.kind.label, circuit_id=job.circuit_id)
            job.done.wait(0.25 if left is None else min(0.25, left))
        with self._cv:
            return job.result()

    def _unknown(self, job_id: str) -> str:
        retention = self.config.daemon.result_retention
        return (f"unknown job {job_id!r} (never submitted here, or finished more than {retention:.0f} s ago and "
                "pruned)")

    def attach_prove_waiter(self, job_id: str) -> None:
        with self._cv:
            job = self.jobs.get(job_id)
            if job is not None:
                job.prove_waiters += 1

    def detach_prove_waiter(self, job_id: str, *, disconnected: bool) -> None:
        """A Prove call stopped waiting; with on_prove_disconnect = "cancel", the last disconnecting
        waiter of a job that Prove created cancels it."""
        with self._cv:
            job = self.jobs.get(job_id)
            if job is None:
                return
            job.prove_waiters -= 1
            if (disconnected and job.prove_waiters <= 0 and job.origin == "prove" and not job.state.finished
                    and self.config.daemon.on_prove_disconnect == "cancel"):
                log.info("job %s: its Prove client disconnected; cancelling (daemon.on_prove_disconnect = cancel)",
                         job_id)
                self._finish(job, JobState.CANCELLED, "the Prove client disconnected")

    def cancel(self, job_id: str) -> bool:
        """Cancel a job; True if it had left the queue. Finished jobs are left as they are."""
        with self._cv:
            job = self.jobs.get(job_id)
            if job is None:
                raise UnknownJobError(self._unknown(job_id))
            if job.state.finished:
                return False
            was_running = job.state in (JobState.PLANNING, JobState.RUNNING)
            self._finish(job, JobState.CANCELLED, "cancelled by request")
            return was_running

    # -- API: parameters -----------------------------------------------------------------------------
    def preload_srs(self, circuit_id: str) -> tuple[bool, float]:
        return self.srs.preload(circuit_id)

    def evict_srs(self, circuit_id: str) -> tuple[bool, int]:
        was_loaded, freed = self.srs.evict(circuit_id)
        if was_loaded:
            self.metrics.srs_evictions.inc()
        return was_loaded, freed

    def evict_for(self, nbytes: int) -> int:
        """Budget evictor: idle SRS entries make room for `nbytes`."""
        before = self.srs.evictions
        freed = self.srs.evict_idle(nbytes)
        if self.srs.evictions > before:
            self.metrics.srs_evictions.inc(self.srs.evictions - before)
        return freed

    def _materialize(self, source: SrsSource) -> None:
        if source.generator is None:
            raise CuzkError(f"parameter file {source.path} does not exist (srs.param_cache = "
                            f"{self.config.srs.param_cache})")
        if not source.path.parent.is_dir():
            raise CuzkError(f"srs.param_cache {source.path.parent} is not a directory")
        log.warning("generating INSECURE test parameters for %s into %s (anyone who ran this can forge its "
                    "proofs; for tests only)", source.circuit_id, source.path)
        ref, args = source.generator
        self.pipeline.call(ref, args)

    # -- what the executor asks of the engine (`ExecutorHost`) ----------------------------------------
    def compiled_for_key(self, circuit_id: str) -> str | None:
        """With the products computed by the prover, the circuit's ready compiled file: verified and
        prepared with the key (preload: before the daemon says ready), not by a first proof."""
        if self.sparse_products != "prover" or not self.compiled.enabled:
            return None
        return self.compiled.ready_path(circuit_id)

    def device_added(self, device: Device) -> None:
        """A device that joined after the start (a node new to a Ray cluster): the parameter sets the
        others hold, then lanes of its own; the window grows with the lanes."""
        log.info("device %s joined: loading its parameter sets", device.worker_name)
        self.srs.reload_device(device)
        with self._cv:
            self.pipeline.add_device(device)
            if self.config.pipeline.enabled:
                self.window = max(self.window, self.pipeline.regular_provers + self.config.pipeline.synthesis_lookahead)
            self._cv.notify_all()

    def warm_up_calls(self) -> list[WorkerCall]:
        return self.providers.warm_up_calls()

    def device_restarted(self, device: Device) -> None:
        log.warning("device %s restarted: reloading its parameter sets", device.worker_name)
        self.srs.reload_device(device)

    # -- dispatching -------------------------------------------------------------------------------------
    def _wake(self) -> None:
        with self._cv:
            self._cv.notify_all()

    def _dispatch_loop(self) -> None:
        with self._cv:
            while not self._stopping:
                for batch in self.collector.due():
                    self._start_batch(batch)
                job = self.scheduler.peek()
                if job is not None and (job.priority is Priority.CRITICAL
                                        or self._active + len(self.collector) < self.window):
                    self.scheduler.pop()
                    if job.batchable:
                        full = self.collector.add(job)
                        if full is not None:
                            self._start_batch(full)
                    else:
                        for batch in self.collector.flush_all():
                            self._start_batch(batch)
                        self._start_job(job)
                    continue
                deadline = self.collector.next_deadline()
                wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))
                self._cv.wait(wait)

    def _start_batch(self, jobs: list[Job]) -> None:
        batch_id = jobs[0].seq
        log.info("batch %d: %d job(s) of %s: %s", batch_id, len(jobs), jobs[0].circuit_id,
                 ", ".join(j.job_id for j in jobs))
        for job in jobs:
            job.batch_id = batch_id if len(jobs) > 1 else 0
            self._start_job(job)

    def _start_job(self, job: Job) -> None:
        job.state = JobState.PLANNING
        job.started = time.monotonic()
        job.was_dispatched = True
        self._active += 1
        timeline.emit(timeline.Event.DISPATCHED, job, batch=job.batch_id)
        pool = self._critical_planners if job.priority is Priority.CRITICAL else self._planners
        pool.submit(self._plan, job)

    def _shape(self, circuit_id: str, provider: CircuitProvider, *, critical: bool = False) -> Any:
        with self._shape_lock:
            shape = self._shapes.get(circuit_id)
        if shape is None:
            ref, args = provider.shape_call(circuit_id)
            shape = self.pipeline.call(ref, args, critical=critical)
            log.info("circuit %s measured: %d constraints, %d inputs, %d aux", circuit_id, shape.num_constraints,
                     shape.num_inputs, shape.num_aux)
            with self._shape_lock:
                self._shapes[circuit_id] = shape
        return shape

    def _partition_estimate(self, plan: Any, shape: Any, room: int | None = None) -> PartitionEstimate:
        """The bytes to reserve per partition. The constraint-system estimate whenever `room` holds it
        (what the budget can ever give it; by default all it can give one reservation), so that a
        compiled circuit that turns out unusable falls back safely; otherwise, for a compiled circuit,
        the compiled path's much smaller needs, and the partitions are pinned to that path
        (`CompiledRecipe.compiled_only`) so that none can outgrow its reservation."""
        cs = PartitionEstimate.from_shape(shape).at_least(plan.min_partition_bytes)
        compiled = all(isinstance(p.recipe, CompiledRecipe) for p in plan.partitions)
        if not compiled or cs.total <= (self.budget.usable if room is None else room):
            return cs
        plan.partitions = [replace(p, recipe=p.recipe.compiled_only()) for p in plan.partitions]
        on_prover = self.sparse_products == "prover"
        device = bool(self.device_specs) and all(spec.kind == "cuda" for spec in self.device_specs)
        batched = all(p.recipe.batched_witness for p in plan.partitions)
        # A device whose plan computes this circuit's products on the host completes a deferred
        # witness there too, on a copy of the aux.
        aux_copy = device and any(p.recipe.defers_witness for p in plan.partitions) \
            and self.executor.products_on_host(plan.circuit_id)
        return PartitionEstimate.compiled(shape, products_on_prover=on_prover, device_prover=device,
                                          batched_witness=batched, aux_copy=aux_copy).at_least(plan.min_partition_bytes)

    def _plan(self, job: Job) -> None:
        try:
            provider = self.providers.for_request(job.request)
            plan = provider.plan(job.request)
            if not plan.partitions:
                raise InvalidRequestError("the request has no partitions to prove")
            use_compiled(plan, provider, self.compiled, job.request, sparse_products=self.sparse_products,
                         device_witness=self.device_witness)
            shape = self._shape(plan.circuit_id, provider, critical=job.priority is Priority.CRITICAL)
            estimate = self._partition_estimate(plan, shape)
            if estimate.total > self.budget.usable:
                raise BudgetError(f"a partition of {plan.circuit_id} needs {estimate.total:,} bytes but the memory "
                                  f"budget can never give more than {self.budget.usable:,}")
            if job.state.finished:
                return
            lease = self.srs.acquire(plan.circuit_id, cancelled=lambda: job.state.finished)
            # The job's own key stays in the budget while the job runs: a partition that cannot fit
            # beside it would wait for memory that never comes, and every job queued behind it with it.
            # A compiled circuit may still fit by its compiled path's needs.
            room = self.budget.usable - lease.held_bytes
            if estimate.total > room:
                estimate = self._partition_estimate(plan, shape, room)
            if estimate.total > room:
                self.srs.release(lease)
                raise BudgetError(f"a partition of {plan.circuit_id} needs {estimate.total:,} bytes beside the "
                                  f"{lease.held_bytes:,} its key holds, but the memory budget can never give "
                                  f"more than {self.budget.usable:,} (memory.total_budget less what the daemon's "
                                  "processes hold)")
            with self._cv:
                if job.state.finished:
                    self.srs.release(lease)
                    return
                job.srs_lease = lease
                job.srs_load_s = lease.load_s
                job.circuit_id = plan.circuit_id
                job.partitions = [PartitionRecord(p.index) for p in plan.partitions]
                job.state = JobState.RUNNING
                job.planned = time.monotonic()
                job.request.drop_payload()
                self._release(job.payload_reservation)
                job.payload_reservation = None
                timeline.emit(timeline.Event.SRS_READY, job, load_ms=round(lease.load_s * 1000))
                timeline.emit(timeline.Event.PLANNED, job, partitions=len(plan.partitions),
                              reserve_bytes=estimate.total)
                self.pipeline.enqueue(job, plan.partitions, estimate)
        except CuzkError as err:
            with self._cv:
                self._finish(job, JobState.FAILED, str(err))
        except Exception as err:
            log.exception("job %s: planning failed", job.job_id)
            with self._cv:
                self._finish(job, JobState.FAILED, f"internal error while planning: {type(err).__name__}: {err}")

    # -- pipeline host (called with _cv held) --------------------------------------------------------------
    def fail_job(self, job: Job, message: str) -> None:
        self._finish(job, JobState.FAILED, message)

    def partition_proven(self, job: Job) -> None:
        if all(p.state is PartitionState.DONE for p in job.partitions):
            job.proof = b"".join(p.proof or b"" for p in job.partitions)
            self._finish(job, JobState.COMPLETED, "")

    def work_returned(self, job: Job) -> None:
        if job.state.finished and job.inflight == 0 and job.srs_lease is not None:
            lease, job.srs_lease = job.srs_lease, None
            self.srs.release(lease)

    def _finish(self, job: Job, state: JobState, message: str) -> None:
        if job.state.finished:
            return
        previous = job.state
        job.state = state
        job.error = message
        job.finished = time.monotonic()
        if previous is JobState.QUEUED:
            if not self.scheduler.remove(job):
                self.collector.remove(job)
        else:
            self._active -= 1
            self.pipeline.drop_job(job)
        self._release(job.payload_reservation)
        job.payload_reservation = None
        leftover = PartitionState.CANCELLED if state is JobState.CANCELLED else PartitionState.FAILED
        for p in job.partitions:
            if p.state not in (PartitionState.DONE, PartitionState.FAILED):
                p.state = leftover
        self.work_returned(job)
        kind = job.kind.metric_label
        total_s = job.finished - job.submitted
        if state is JobState.COMPLETED:
            self.counters["completed"] += 1
            self.metrics.completed.inc()
            self.metrics.completed_by_kind.labels(kind).inc()
            self.metrics.duration.labels(kind).observe(total_s)
            timeline.emit(timeline.Event.COMPLETED, job, total_ms=round(total_s * 1000), bytes=len(job.proof))
        elif state is JobState.FAILED:
            self.counters["failed"] += 1
            self.metrics.failed.inc()
            self.metrics.failed_by_kind.labels(kind).inc()
            timeline.emit(timeline.Event.FAILED, job, error=repr(message))
            log.warning("job %s failed: %s", job.job_id, message)
        else:
            self.counters["cancelled"] += 1
            self.metrics.cancelled_by_kind.labels(kind).inc()
            timeline.emit(timeline.Event.CANCELLED, job, reason=repr(message),
                          was_running=previous is not JobState.QUEUED)
        result = job.result()
        if self.journal is not None:
            try:
                self.journal.job_finished(_info(job), result)
            except Exception:
                log.exception("job %s: cannot record its result in the journal", job.job_id)
        job.done.set()
        self._events.put(("finished", _info(job), result))
        self._cv.notify_all()

    # -- background -------------------------------------------------------------------------------------------
    def _notify_loop(self) -> None:
        while True:
            event = self._events.get()
            if event is None:
                return
            what, info, result = event
            for listener in self._listeners:
                try:
                    if what == "accepted":
                        listener.job_accepted(info)
                    else:
                        listener.job_finished(info, result)  # type: ignore[arg-type]
                except Exception:
                    log.exception("job listener %r failed on %s", listener, what)

    def _housekeeping_loop(self) -> None:
        last_info = 0.0
        while True:
            with self._cv:
                if self._stopping:
                    return
                self._prune(time.monotonic())
                self._cv.wait(1.0)
                if self._stopping:
                    return
            self.synthesis.revive()
            restarted = self.synthesis.restarted()  # those that died under a partition or call too
            if restarted:
                self.metrics.worker_restarts.labels("synthesis").inc(restarted)
            revived = self.executor.revive()
            if revived:
                self.metrics.worker_restarts.labels("device").inc(revived)
            if time.monotonic() - last_info > 5.0:
                last_info = time.monotonic()
                self.executor.refresh_info()
            if self.journal is not None:
                self.journal.flush()

    def _prune(self, now: float) -> None:
        retention = self.config.daemon.result_retention
        finished = sorted((j for j in self.jobs.values() if j.state.finished and j.finished is not None),
                          key=lambda j: j.finished or 0.0)
        excess = len(finished) - self.config.daemon.max_retained_results
        for k, job in enumerate(finished):
            expired = k < excess or now - (job.finished or now) > retention
            if expired and self.jobs.get(job.job_id) is job:
                del self.jobs[job.job_id]

    # -- status ------------------------------------------------------------------------------------------------
    @property
    def active_jobs(self) -> int:
        return self._active

    def status(self) -> dict[str, Any]:
        """The GetStatus / /status snapshot (see cuzk.engine.status), with the daemon's `identity`."""
        return {**status_views.snapshot(self), **self.identity}

    def info(self) -> dict[str, Any]:
        return status_views.info(self)

    def metrics_text(self) -> str:
        return self.metrics.text()
