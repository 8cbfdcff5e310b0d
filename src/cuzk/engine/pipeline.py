"""The per-partition pipeline: one queue of partitions -> the devices' lanes -> the executor.

Every planned partition becomes a `PartitionWork` in one queue ordered by (priority, batch or job
sequence, partition index), so the oldest job's lowest partition goes first within a priority and a
CRITICAL job's partitions overtake everything still queued (a job the scheduler let out by aging
sorts as HIGH: `Job.effective_priority`). A lane (one thread per lane of each device: the
executor's `workers_per_device` and its CRITICAL lane) takes the first partition it may prove and
hands its work to the executor (`Executor.prove`), which synthesizes it and proves it on the lane's
device; a device has more lanes than it proves at once, so that partitions are synthesized while
others are on the device.

CRITICAL work never waits for a worker busy with lower-priority work: one lane per device and one
synthesis process (the executor's) take CRITICAL partitions only and are idle otherwise; the regular
lanes take CRITICAL work too when they are free first. `max_gpu_queue_depth` does not hold CRITICAL
partitions back, and worker calls made for a CRITICAL job (its circuit's shape) may run in the
reserved process. On the device, the provers' lock (`cuzk.backends.device_lock.PriorityLock`)
serves waiters by priority, so a CRITICAL partition is the next on the device after the partition
in flight. Its worst-case wait is thus its own synthesis plus the rest of one partition in flight
(plus, when the memory budget is full, the time until enough of it is released: a CRITICAL
partition heads the queue, so it takes the next release that fits).

Admission (a lane taking a partition): where the executor synthesizes in this host's memory
(`Executor.host_memory`), the partition's shape-based estimate must fit the memory budget (reserved
up front; the synthesis part is released when the executor reports the synthesis done, the rest
when the proof is back), and no partition is taken past a memory-blocked one (no starvation);
`pipeline.slot_size` caps one job's partitions in synthesis, and `pipeline.max_gpu_queue_depth`
the partitions taken and not yet on a device. When the head does not fit, idle SRS entries are
evicted (outside the engine lock) before waiting. A lane takes, with `scheduler.max_batch_size` > 1,
further partitions of the same batch and circuit, proven in one device call. Jobs that fail or are
cancelled have their queued work dropped at once; partitions already in a lane finish there and
are discarded, their memory freed. Host callbacks (the engine) run with the engine's condition held.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from cuzk.engine import timeline
from cuzk.engine.executor import Device, Executor
from cuzk.engine.jobs import Job, PartitionRecord, PartitionState, Priority
from cuzk.engine.memory import MemoryBudget, PartitionEstimate, Reservation
from cuzk.engine.messages import ItemResult, ProveItem
from cuzk.engine.metrics import EngineMetrics
from cuzk.engine.procs import WorkerCrashedError
from cuzk.engine.providers import PartitionPlan
from cuzk.errors import CuzkError

log = logging.getLogger("cuzk.engine.pipeline")
WAIT_SLICE_S = 0.5
#: Devices a partition is tried on when they die (or become unusable) before answering.
MAX_DEVICE_ATTEMPTS = 3


class PipelineHost(Protocol):
    """What the pipeline needs from the engine (called with the engine's condition held)."""

    def fail_job(self, job: Job, message: str) -> None: ...

    def partition_proven(self, job: Job) -> None: ...

    def work_returned(self, job: Job) -> None: ...

    def evict_for(self, nbytes: int) -> int: ...


@dataclass
class PipelineSettings:
    slot_size: int = 0
    max_gpu_queue_depth: int = 0
    max_batch_size: int = 1
    verify_proofs: bool = True
    #: `[scheduler] device_mode`: "latency" (a job's partitions go to every free device) or
    #: "throughput" (NORMAL and LOW jobs stay on the device that took their first partition).
    device_mode: str = "latency"


@dataclass(eq=False)
class PartitionWork:
    job: Job
    record: PartitionRecord
    plan: PartitionPlan
    estimate: PartitionEstimate
    seq: int
    reservation: Reservation | None = None
    #: "queued", then in a lane "synthesizing", "waiting" (for the device) and "proving".
    phase: str = "queued"
    #: Bytes of this host's shared memory its witness holds while it waits and is proven.
    witness_bytes: int = 0
    #: The synthesis process's state while it synthesizes this partition.
    synth_state: WorkerState | None = None
    #: Its synthesis is on the record (reported as it ended, or from the result).
    synth_recorded: bool = False

    @property
    def key(self) -> tuple[Any, ...]:
        return (*self.job.sort_key, self.record.index, self.seq)

    @property
    def label(self) -> str:
        return f"{self.job.job_id}#{self.record.index}"


@dataclass
class WorkerState:
    """One synthesis process's or prover worker's current activity, for status pages."""

    name: str
    kind: str  #: "synthesis" or "prover"
    device_ordinal: int = -1
    #: The lowest priority this worker takes (0: any); Priority.CRITICAL for the reserved workers.
    min_priority: int = 0
    job_id: str = ""
    partition: int = -1
    proof_kind: str = ""
    since: float = field(default_factory=time.monotonic)
    busy_s: float = 0.0

    @property
    def busy(self) -> bool:
        return bool(self.job_id)

    #: A lane's step with its partition: "synthesizing", "waiting" or "proving".
    phase: str = ""

    def set(self, job: Job | None, partition: int = -1, phase: str = "") -> None:
        now = time.monotonic()
        if self.job_id:
            self.busy_s += now - self.since
        self.job_id = job.job_id if job else ""
        self.proof_kind = job.kind.label if job else ""
        self.partition = partition
        self.phase = phase if job else ""
        self.since = now


class Pipeline:
    def __init__(self, *, cv: threading.Condition, budget: MemoryBudget, executor: Executor,
                 settings: PipelineSettings, host: PipelineHost, metrics: EngineMetrics) -> None:
        self.cv = cv
        self.budget = budget
        self.executor = executor
        self.settings = settings
        self.host = host
        self.metrics = metrics
        self._queue: list[PartitionWork] = []
        #: A partition whose estimate did not fit the budget: none behind it is taken before it.
        self._blocked: PartitionWork | None = None
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._started = False
        #: Partitions synthesized and not yet handed to their device.
        self.waiting = 0
        self.shared_segments = 0
        self.shared_bytes = 0
        pool = executor.synthesis
        #: What each of the executor's synthesis processes on this host is doing (as it reports).
        self.synth_workers = [WorkerState(p.name, "synthesis",
                                          min_priority=Priority.CRITICAL if p is pool.critical else 0)
                              for p in pool.processes]
        self._synth_by_name = {w.name: w for w in self.synth_workers}
        self.prover_workers: list[tuple[Device, int, WorkerState]] = []
        for d in executor.devices:
            self.prover_workers += self._lanes(d)
        self._per_job_synthesizing: dict[int, int] = {}  #: job seq -> partitions in synthesis

    def _lanes(self, device: Device) -> list[tuple[Device, int, WorkerState]]:
        lanes = [(device, ch, WorkerState(f"{device.worker_name}/w{ch}", "prover", device.spec.ordinal))
                 for ch in range(self.executor.workers_per_device)]
        lanes.append((device, self.executor.critical_lane, WorkerState(
            f"{device.worker_name}/critical", "prover", device.spec.ordinal, min_priority=Priority.CRITICAL)))
        return lanes

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._started = True
        for lane in self.prover_workers:
            self._start_lane(lane)

    def _start_lane(self, lane: tuple[Device, int, WorkerState]) -> None:
        t = threading.Thread(target=self._lane_loop, args=lane, name=f"{lane[2].name}-feeder", daemon=True)
        t.start()
        self._threads.append(t)

    def add_device(self, device: Device) -> None:
        """Lanes for a device that joined after the start (`ExecutorHost.device_added`: a node new to a
        Ray cluster): its regular lanes and its CRITICAL lane, each with its thread, as the devices
        the pipeline began with have."""
        lanes = self._lanes(device)
        with self.cv:
            if self._stopping:
                return
            self.prover_workers.extend(lanes)
            started = self._started
            self.cv.notify_all()
        for lane in lanes if started else ():
            self._start_lane(lane)

    def stop(self) -> None:
        with self.cv:
            self._stopping = True
            self.cv.notify_all()

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    # -- queueing (engine's condition held) ------------------------------------------------------------
    def enqueue(self, job: Job, plans: list[PartitionPlan], estimate: PartitionEstimate) -> None:
        for plan, record in zip(plans, job.partitions, strict=True):
            bisect.insort(self._queue, PartitionWork(job, record, plan, estimate, next(self._seq)),
                          key=lambda w: w.key)
        self.cv.notify_all()

    def drop_job(self, job: Job) -> None:
        """Remove a finished job's queued work (it holds nothing yet); what is in a lane is
        discarded when the lane is done with it."""
        self._queue[:] = [w for w in self._queue if w.job is not job]
        if self._blocked is not None and self._blocked.job is job:
            self._blocked = None
        self.cv.notify_all()

    @property
    def synthesizing(self) -> int:
        """Partitions in synthesis."""
        return sum(self._per_job_synthesizing.values())

    @property
    def regular_provers(self) -> int:
        """Lanes that take any work (the CRITICAL lanes left out)."""
        return sum(1 for _, _, state in self.prover_workers if not state.min_priority)

    def waiting_for_device(self) -> int:
        return self.waiting

    def queued_for_synthesis(self) -> int:
        return len(self._queue)

    # -- worker calls ------------------------------------------------------------------------------------
    def call(self, ref: str, args: tuple[Any, ...], *, critical: bool = False) -> Any:
        """Run `ref(*args)` in one of the executor's synthesis processes (ahead of partitions) and
        return its result; `critical` (a CRITICAL job's call) lets the reserved process run it too."""
        with self.cv:
            if self._stopping:
                raise CuzkError("the daemon is shutting down")
        return self.executor.synthesis.call(ref, args, critical=critical)

    # -- admission -----------------------------------------------------------------------------------------
    def _admissible(self, state: WorkerState, device: Device) -> PartitionWork | None:
        """The first queued partition this lane may take: the queue is in priority order, so a
        CRITICAL lane stops at the first partition below CRITICAL, and none is taken past a
        memory-blocked one; CRITICAL partitions are exempt from max_gpu_queue_depth. A device that
        cannot hold a circuit's key (`Device.refused`) passes over its partitions, one that failed
        holding a partition passes over that one until it has restarted, and in throughput mode a
        NORMAL or LOW job's partitions are left to the device it is bound to while that lives. A device
        that is dead and could not be restarted takes none."""
        if not device.can_prove:  # dead and its restart failed: its partitions wait for no one
            return None
        depth = self.settings.max_gpu_queue_depth
        capped = depth and self.synthesizing + self.waiting >= depth
        slot = self.settings.slot_size
        blocked = self._blocked
        for work in self._queue:
            if work.job.priority < state.min_priority:
                return None
            if blocked is not None and work is not blocked and work.key > blocked.key:
                return None
            if capped and work.job.priority is not Priority.CRITICAL:
                return None
            if slot and self._per_job_synthesizing.get(work.job.seq, 0) >= slot:
                continue
            if work.job.circuit_id in device.refused or work.record.failed_on == (device.worker_name, device.restarts):
                continue
            bound = work.job.device_affinity
            if (self.settings.device_mode != "throughput" or work.job.priority >= Priority.HIGH or not bound
                    or bound == device.worker_name or not self._device_alive(bound)):
                return work
        return None

    def _device_alive(self, worker_name: str) -> bool:
        return any(d.worker_name == worker_name and d.alive for d in self.executor.devices)

    def _reserve(self, work: PartitionWork) -> tuple[bool, Reservation | None]:
        """Whether `work` fits the budget, with its reservation (None where the executor's host
        budgets its own memory)."""
        if not self.executor.host_memory:
            return True, None
        res = self.budget.try_reserve(work.estimate.total, f"partition:{work.label}", evict=False)
        return res is not None, res

    def _take(self, state: WorkerState, device: Device) -> list[PartitionWork] | None:
        """Wait for an admissible partition (with its batch); None when stopping."""
        while True:
            need = 0
            with self.cv:
                while True:
                    if self._stopping:
                        return None
                    work = self._admissible(state, device)
                    if work is None:
                        self.cv.wait(WAIT_SLICE_S)
                        continue
                    fits, res = self._reserve(work)
                    if not fits:
                        self._blocked = work
                        need = work.estimate.total - self.budget.available
                        break
                    batch = [self._admit(work, res, state, device)]
                    if self.settings.max_batch_size > 1 and work.job.batch_id:
                        for more in list(self._queue):
                            if len(batch) >= self.settings.max_batch_size:
                                break
                            if (more.job.batch_id != work.job.batch_id or more.job.circuit_id != work.job.circuit_id
                                    or more.record.failed_on == (device.worker_name, device.restarts)):
                                continue
                            fits, res = self._reserve(more)
                            if not fits:
                                break
                            batch.append(self._admit(more, res, state, device))
                    for w in batch:
                        w.record.batch_size = len(batch)
                    state.set(work.job, work.record.index, "synthesizing")
                    return batch
            # The head does not fit: try to evict idle parameters (slow, so without the lock), then wait.
            if need > 0 and self.host.evict_for(need) <= 0:
                self.budget.wait_for_release(WAIT_SLICE_S)

    def _admit(self, work: PartitionWork, res: Reservation | None, state: WorkerState, device: Device) -> PartitionWork:
        self._queue.remove(work)
        if self._blocked is work:
            self._blocked = None
        work.reservation = res
        work.phase = "synthesizing"
        work.record.state = PartitionState.SYNTHESIZING
        work.record.device_worker = state.name
        work.record.device_ordinal = max(0, state.device_ordinal)
        work.job.inflight += 1
        seq = work.job.seq
        self._per_job_synthesizing[seq] = self._per_job_synthesizing.get(seq, 0) + 1
        if self.settings.device_mode == "throughput" and work.job.priority < Priority.HIGH:
            work.job.device_affinity = device.worker_name
        return work

    # -- what the executor reports (without the engine's condition) -----------------------------------------
    def _synthesis_began(self, work: PartitionWork, worker: str) -> None:
        with self.cv:
            work.record.synth_worker = worker
            state = self._synth_by_name.get(worker)
            if state is not None:
                state.set(work.job, work.record.index, "synthesizing")
                work.synth_state = state

    def _synthesized(self, work: PartitionWork, start: float, end: float, worker: str, nbytes: int) -> bool:
        with self.cv:
            self._synthesis_over(work)
            work.phase = "waiting"
            self.waiting += 1
            work.witness_bytes = nbytes
            self.shared_segments += 1
            self.shared_bytes += nbytes
            self._record_synthesis(work, start, end, worker)
            keep = not work.job.state.finished
            if keep and work.reservation is not None:
                work.reservation.release(work.estimate.synthesis)
            self.cv.notify_all()
            return keep

    def _on_device(self, works: list[PartitionWork], state: WorkerState) -> None:
        with self.cv:
            for work in works:
                self._phase_over(work)  # synthesized here, or on the device's node (still "synthesizing")
                work.phase = "proving"
                work.record.state = PartitionState.PROVING
            state.set(works[0].job, works[0].record.index, "proving")
            self.cv.notify_all()

    def _phase_over(self, work: PartitionWork) -> None:
        """It leaves its synthesis or its wait for the device (the condition held)."""
        self._synthesis_over(work)
        if work.phase == "waiting":
            self.waiting -= 1

    def _synthesis_over(self, work: PartitionWork) -> None:
        """Its synthesis ended, done or not (the condition held)."""
        if work.phase != "synthesizing":
            return
        seq = work.job.seq
        self._per_job_synthesizing[seq] -= 1
        if not self._per_job_synthesizing[seq]:
            del self._per_job_synthesizing[seq]
        if work.synth_state is not None and work.synth_state.job_id == work.job.job_id \
                and work.synth_state.partition == work.record.index:
            work.synth_state.set(None)
        work.synth_state = None

    def _record_synthesis(self, work: PartitionWork, start: float, end: float, worker: str) -> None:
        """A partition's synthesis on the record and the timeline; queued for its device from its end."""
        rec = work.record
        rec.synth_start, rec.synth_end, rec.synth_worker = start, end, worker or rec.device_worker
        rec.state = PartitionState.SYNTH_DONE
        rec.device_queue = end
        work.synth_recorded = True
        self.metrics.stage.labels("synthesis").observe(end - start)
        timeline.emit(timeline.Event.SYNTH_START, work.job, rec.index, at=start, worker=rec.synth_worker)
        timeline.emit(timeline.Event.SYNTH_END, work.job, rec.index, at=end, worker=rec.synth_worker)
        timeline.emit(timeline.Event.DEVICE_QUEUE, work.job, rec.index, at=end)

    def _left_lane(self, work: PartitionWork, result: ItemResult) -> None:
        """Its lane is done with it (the condition held): the counts it was in, and its synthesis on
        the record where the executor reported it only in the result (synthesized on another node)."""
        self._phase_over(work)
        work.phase = "queued"
        if work.witness_bytes:
            self.shared_segments -= 1
            self.shared_bytes -= work.witness_bytes
            work.witness_bytes = 0
        if not work.synth_recorded and result.synth is not None:
            self._record_synthesis(work, *result.synth, result.synth_worker)

    def _returned(self, work: PartitionWork) -> None:
        """A partition left the pipeline (proven, failed or dropped): free what it holds.

        `job.inflight` counts partitions between admission and this point; when a finished job's
        count reaches zero the engine releases its SRS reference."""
        self._release(work)
        self.host.work_returned(work.job)

    def _release(self, work: PartitionWork) -> None:
        """Its memory and its count in `job.inflight` go (the condition held)."""
        if work.reservation is not None:
            work.reservation.release()
            work.reservation = None
        work.job.inflight -= 1

    # -- the lanes -----------------------------------------------------------------------------------------
    def _lane_loop(self, device: Device, lane: int, state: WorkerState) -> None:
        while True:
            batch = self._take(state, device)
            if batch is None:
                return
            items = [ProveItem(w.job.circuit_id, w.plan.recipe, w.plan.public_inputs, w.label,
                               int(w.job.effective_priority), w.plan.device_hold_s) for w in batch]
            crashed, incarnation = False, device.restarts
            try:
                results = self.executor.prove(device, lane, items, self.settings.verify_proofs,
                                              _LaneReport(self, batch, state))
            except WorkerCrashedError as crash:
                results = [ItemResult(False, error=str(crash), fatal=True) for _ in batch]
                crashed = True
            except Exception as err:
                results = [ItemResult(False, error=f"cannot send to the device: {type(err).__name__}: {err}")
                           for _ in batch]
            failed = next((r for r in results if r.fatal), None)
            with self.cv:
                state.set(None)
                for work, result in zip(batch, results, strict=True):
                    self._left_lane(work, result)
                    if not ((result.fatal or result.transient)
                            and self._requeue(work, device, incarnation, result.error, avoid=result.fatal)):
                        self._proven(work, result)
                    if result.ok:  # less what it lent a proof of higher priority mid-phase
                        device.proven(result.device_end - result.device_start - result.phases.get("yielded", 0.0))
                self.cv.notify_all()
            if failed is not None:
                reason = (f"died while proving {batch[0].label}" if crashed
                          else f"unusable after proving {batch[0].label}: {failed.error}")
                self.metrics.worker_restarts.labels("device").inc()
                self.executor.restart(device, reason, force=not crashed)

    def _requeue(self, work: PartitionWork, device: Device, incarnation: int, error: str, avoid: bool = True) -> bool:
        """Give a partition whose device died (or became unusable), or whose proof failed in a way that
        may pass (`ItemResult.transient`), back to the queue for the next free lane (it is synthesized
        again there): with `avoid`, another device's or the restarted one's (`incarnation`: the
        device's restart count when it was handed the partition), else any. No proof came back, so it
        is proven once. At most MAX_DEVICE_ATTEMPTS attempts are made; False: fail it instead."""
        rec = work.record
        if work.job.state.finished or rec.device_attempts + 1 >= MAX_DEVICE_ATTEMPTS:
            return False
        rec.device_attempts += 1
        if avoid:
            rec.failed_on = (device.worker_name, incarnation)
        log.warning("%s: its device %s failed (%s); requeued for the next free device (attempt %d of %d)",
                    work.label, device.worker_name, error, rec.device_attempts + 1, MAX_DEVICE_ATTEMPTS)
        self.metrics.partitions_requeued.inc()
        self._release(work)  # taken again, with its memory, by the lane that takes it
        rec.state = PartitionState.PENDING
        work.synth_recorded = False
        bisect.insort(self._queue, work, key=lambda w: w.key)
        return True

    def _proven(self, work: PartitionWork, result: ItemResult) -> None:
        rec, job = work.record, work.job
        if result.ok:
            rec.device_start, rec.device_end, rec.verify_s = result.device_start, result.device_end, result.verify_s
            rec.lock_wait_start = result.lock_wait_start or None
            rec.device_phases = dict(result.phases)
            rec.done = time.monotonic()
            self.metrics.stage.labels("device_wait").observe(max(0.0, result.device_start - (rec.device_queue or 0)))
            self.metrics.stage.labels("device").observe(rec.device_s)
            if self.settings.verify_proofs:
                self.metrics.stage.labels("verify").observe(result.verify_s)
            timeline.emit(timeline.Event.DEVICE_START, job, rec.index, at=result.device_start, worker=rec.device_worker,
                          batch=rec.batch_size)
            timeline.emit(timeline.Event.DEVICE_END, job, rec.index, at=result.device_end, worker=rec.device_worker)
        self._returned(work)
        if job.state.finished:
            return
        if result.ok:
            rec.proof = result.proof
            rec.state = PartitionState.DONE
            self.host.partition_proven(job)
        else:
            rec.state = PartitionState.FAILED
            self.host.fail_job(job, f"partition {rec.index}: {result.error}")


class _LaneReport:
    """What the executor reports of a lane's batch (`cuzk.engine.executor.ProveReport`)."""

    def __init__(self, pipeline: Pipeline, batch: list[PartitionWork], state: WorkerState) -> None:
        self._pipeline, self._batch, self._state = pipeline, batch, state

    def synthesizing(self, k: int, worker: str) -> None:
        self._pipeline._synthesis_began(self._batch[k], worker)

    def synthesized(self, k: int, start: float, end: float, worker: str, nbytes: int) -> bool:
        return self._pipeline._synthesized(self._batch[k], start, end, worker, nbytes)

    def proving(self, ks: list[int]) -> None:
        self._pipeline._on_device([self._batch[k] for k in ks], self._state)
