"""The per-partition pipeline: synthesis queue -> synthesis processes -> device queue -> prover workers.

Every planned partition becomes a `PartitionWork`. Both queues are ordered by (priority, batch or
job sequence, partition index), so the oldest job's lowest partition goes first within a priority
and a CRITICAL job's partitions overtake everything still queued (a job the scheduler let out by
aging sorts as HIGH: `Job.effective_priority`).

CRITICAL work never waits for a worker busy with lower-priority work: one synthesis
process (`critical_synth`) and one prover lane per device (the device process's channel past the
regular workers') take CRITICAL partitions only and are idle otherwise; the regular workers take
CRITICAL work too when they are free first. `max_gpu_queue_depth` does not hold CRITICAL partitions
back, and worker calls made for a CRITICAL job (its circuit's shape) may run in the reserved process.
On the device, the prover workers' lock (`cuzk.backends.device_lock.PriorityLock`) serves waiters
by priority, so a CRITICAL partition is the next on the device after the partition in flight, ahead
of partitions other workers have staged. Its worst-case wait is thus its own synthesis plus the rest
of one partition in flight (plus, when the memory budget is full, the time until enough of it is
released: a CRITICAL partition heads the synthesis queue, so it takes the next release that fits).

Synthesis admission (one thread per synthesis process pulls work): the first eligible item must
fit in the memory budget (its shape-based estimate is reserved up front, the synthesis part is
released when synthesis ends and the rest when the proof is back), no item may overtake a
memory-blocked head (no starvation), `pipeline.slot_size` caps one job's partitions in synthesis,
and `pipeline.max_gpu_queue_depth` caps synthesized-but-unproven partitions. When the head does not
fit, idle SRS entries are evicted (outside the engine lock) before waiting.

Prover workers (one thread per device process channel) take the device queue's head, plus, with
`scheduler.max_batch_size` > 1, further partitions of the same batch and circuit, and prove them
in one device call. Jobs that fail or are cancelled have their queued work dropped at once;
partitions already in a worker finish there and are discarded at the next boundary, their memory
freed. Host callbacks (the engine) run with the engine's condition held.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from cuzk.engine import timeline
from cuzk.engine.executor import Device, Executor
from cuzk.engine.jobs import Job, PartitionRecord, PartitionState, Priority
from cuzk.engine.memory import MemoryBudget, PartitionEstimate, Reservation
from cuzk.engine.messages import ItemResult, ProveItem
from cuzk.engine.metrics import EngineMetrics
from cuzk.engine.procs import WorkerCrashedError, WorkerProcess
from cuzk.engine.providers import PartitionPlan
from cuzk.engine.synthesis import SharedAssignment, unlink_orphans
from cuzk.engine.synthesis_pool import SynthesisPool
from cuzk.engine.synthesis_pool import restart as restart_synthesis
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
    shared: SharedAssignment | None = None

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

    def set(self, job: Job | None, partition: int = -1) -> None:
        now = time.monotonic()
        if self.job_id:
            self.busy_s += now - self.since
        self.job_id = job.job_id if job else ""
        self.proof_kind = job.kind.label if job else ""
        self.partition = partition
        self.since = now


@dataclass
class _Call:
    ref: str
    args: tuple[Any, ...]
    critical: bool = False  #: made for a CRITICAL job: the reserved synthesis process may run it
    future: Future = field(default_factory=Future)


class Pipeline:
    def __init__(self, *, cv: threading.Condition, budget: MemoryBudget, synthesis: SynthesisPool,
                 executor: Executor, settings: PipelineSettings, host: PipelineHost, metrics: EngineMetrics) -> None:
        """`synthesis`: the executor's synthesis processes, its reserved one for CRITICAL work only."""
        self.cv = cv
        self.budget = budget
        self.synth_procs = synthesis.processes
        self.executor = executor
        self.settings = settings
        self.host = host
        self.metrics = metrics
        self._synth_queue: list[PartitionWork] = []
        self._device_queue: list[PartitionWork] = []
        self._calls: deque[_Call] = deque()
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._started = False
        self.synthesizing = 0
        self.shared_segments = 0
        self.shared_bytes = 0
        #: Names of the segments handed over and not yet unlinked.
        self._held_segments: set[str] = set()
        self.synth_workers = [WorkerState(p.name, "synthesis",
                                          min_priority=Priority.CRITICAL if p is synthesis.critical else 0)
                              for p in self.synth_procs]
        self.prover_workers: list[tuple[Device, int, WorkerState]] = [
            (d, ch, WorkerState(f"{d.worker_name}/w{ch}", "prover", d.spec.ordinal))
            for d in executor.devices for ch in range(executor.workers_per_device)
        ] + [(d, executor.critical_lane, WorkerState(f"{d.worker_name}/critical", "prover", d.spec.ordinal,
                                                       min_priority=Priority.CRITICAL))
             for d in executor.devices]
        self._per_job_synthesizing: dict[int, int] = {}  #: job seq -> partitions in synthesis

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._started = True
        for proc, state in zip(self.synth_procs, self.synth_workers, strict=True):
            t = threading.Thread(target=self._synthesis_loop, args=(proc, state), name=f"{proc.name}-feeder",
                                 daemon=True)
            t.start()
            self._threads.append(t)
        for device, channel, state in self.prover_workers:
            t = threading.Thread(target=self._prover_loop, args=(device, channel, state), name=f"{state.name}-feeder",
                                 daemon=True)
            t.start()
            self._threads.append(t)

    def add_device(self, device: Device) -> None:
        """Lanes for a device that joined after the start (`ExecutorHost.device_added`: a node new to a
        Ray cluster): its regular lanes and its CRITICAL lane, each with its feeder thread, as the
        devices the pipeline began with have."""
        lanes = [(device, ch, WorkerState(f"{device.worker_name}/w{ch}", "prover", device.spec.ordinal))
                 for ch in range(self.executor.workers_per_device)]
        lanes.append((device, self.executor.critical_lane, WorkerState(
            f"{device.worker_name}/critical", "prover", device.spec.ordinal, min_priority=Priority.CRITICAL)))
        with self.cv:
            if self._stopping:
                return
            self.prover_workers.extend(lanes)
            started = self._started
            self.cv.notify_all()
        for lane in lanes if started else ():
            t = threading.Thread(target=self._prover_loop, args=lane, name=f"{lane[2].name}-feeder", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        with self.cv:
            self._stopping = True
            calls = list(self._calls)
            self._calls.clear()
            self.cv.notify_all()
        for call in calls:
            call.future.set_exception(CuzkError("the daemon is shutting down"))

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    # -- queueing (engine's condition held) ------------------------------------------------------------
    def enqueue(self, job: Job, plans: list[PartitionPlan], estimate: PartitionEstimate) -> None:
        for plan, record in zip(plans, job.partitions, strict=True):
            work = PartitionWork(job, record, plan, estimate, next(self._seq))
            if self.executor.synthesizes:
                self._to_device_unsynthesized(work)
                continue
            bisect.insort(self._synth_queue, work, key=lambda w: w.key)
        self.cv.notify_all()

    def drop_job(self, job: Job) -> None:
        """Remove a finished job's queued work, freeing its memory at once."""
        self._synth_queue[:] = [w for w in self._synth_queue if w.job is not job]
        synthesized = [w for w in self._device_queue if w.job is job]
        self._device_queue[:] = [w for w in self._device_queue if w.job is not job]
        for work in synthesized:
            self._returned(work)
        self.cv.notify_all()

    def _discard(self, work: PartitionWork) -> None:
        if work.shared is not None:
            self._unlink(work)
        if work.reservation is not None:
            work.reservation.release()
            work.reservation = None

    def _unlink(self, work: PartitionWork) -> None:
        assert work.shared is not None
        work.shared.unlink()
        self.shared_segments -= 1
        self.shared_bytes -= work.shared.size
        self._held_segments.discard(work.shared.shm_name)
        work.shared = None

    @property
    def regular_provers(self) -> int:
        """Prover workers that take any work (the CRITICAL lanes left out)."""
        return sum(1 for _, _, state in self.prover_workers if not state.min_priority)

    def waiting_for_device(self) -> int:
        return len(self._device_queue)

    def queued_for_synthesis(self) -> int:
        return len(self._synth_queue)

    # -- worker calls ------------------------------------------------------------------------------------
    def call(self, ref: str, args: tuple[Any, ...], *, critical: bool = False) -> Any:
        """Run `ref(*args)` in a synthesis process (ahead of partitions) and return its result;
        `critical` (a CRITICAL job's call) lets the reserved process run it too."""
        call = _Call(ref, args, critical)
        with self.cv:
            if self._stopping:
                raise CuzkError("the daemon is shutting down")
            self._calls.append(call)
            self.cv.notify_all()
        return call.future.result()

    # -- synthesis -----------------------------------------------------------------------------------------
    def _eligible_head(self, min_priority: int = 0) -> PartitionWork | None:
        """The first partition a worker taking `min_priority` and up may start (CRITICAL partitions,
        always first in the queue, are exempt from max_gpu_queue_depth)."""
        depth = self.settings.max_gpu_queue_depth
        capped = depth and self.synthesizing + len(self._device_queue) >= depth
        slot = self.settings.slot_size
        for work in self._synth_queue:
            critical = work.job.priority is Priority.CRITICAL
            if work.job.priority < min_priority or (capped and not critical):
                return None
            if slot and self._per_job_synthesizing.get(work.job.seq, 0) >= slot:
                continue
            return work
        return None

    def _take_call(self, state: WorkerState) -> _Call | None:
        if not state.min_priority:
            return self._calls.popleft() if self._calls else None
        call = next((c for c in self._calls if c.critical), None)
        if call is not None:
            self._calls.remove(call)
        return call

    def _take_synthesis(self, state: WorkerState) -> _Call | PartitionWork | None:
        """Wait for a call or an admissible partition; None when stopping."""
        while True:
            need = 0
            with self.cv:
                while True:
                    if self._stopping:
                        return None
                    call = self._take_call(state)
                    if call is not None:
                        return call
                    work = self._eligible_head(state.min_priority)
                    if work is None:
                        self.cv.wait(WAIT_SLICE_S)
                        continue
                    res = self.budget.try_reserve(work.estimate.total, f"partition:{work.label}", evict=False)
                    if res is None:
                        need = work.estimate.total - self.budget.available
                        break
                    self._synth_queue.remove(work)
                    work.reservation = res
                    work.record.state = PartitionState.SYNTHESIZING
                    work.job.inflight += 1
                    self.synthesizing += 1
                    seq = work.job.seq
                    self._per_job_synthesizing[seq] = self._per_job_synthesizing.get(seq, 0) + 1
                    state.set(work.job, work.record.index)
                    return work
            # The head does not fit: try to evict idle parameters (slow, so without the lock), then wait.
            if need > 0 and self.host.evict_for(need) <= 0:
                self.budget.wait_for_release(WAIT_SLICE_S)

    def _synthesis_loop(self, proc: WorkerProcess, state: WorkerState) -> None:
        while True:
            task = self._take_synthesis(state)
            if task is None:
                return
            if not proc.alive and not proc.stopping:
                self.metrics.worker_restarts.labels("synthesis").inc()
                restart_synthesis(proc, "found dead while idle")
            if isinstance(task, _Call):
                self._run_call(proc, task)
                continue
            work = task
            work.record.synth_worker = proc.name
            crashed, dead_pid = False, proc.pid
            try:
                reply = proc.request(("synth", work.plan.recipe))
            except WorkerCrashedError as crash:
                reply = ("error", f"{crash}", "")
                crashed = True
            except Exception as err:  # e.g. the recipe cannot be pickled
                reply = ("error", f"cannot send the partition to a synthesis process: {type(err).__name__}: {err}", "")
            with self.cv:
                state.set(None)
                self.synthesizing -= 1
                seq = work.job.seq
                self._per_job_synthesizing[seq] -= 1
                if not self._per_job_synthesizing[seq]:
                    del self._per_job_synthesizing[seq]
                if reply[0] == "ok":
                    self._synthesized(work, reply[1], reply[2], reply[3])
                else:
                    if len(reply) > 2 and reply[2]:
                        log.debug("synthesis of %s failed:\n%s", work.label, reply[2])
                    self._returned(work)
                    self.host.fail_job(work.job, f"partition {work.record.index}: synthesis failed: {reply[1]}")
                self.cv.notify_all()
            if crashed:  # after the job has its answer: a restart takes a second or two
                self.metrics.worker_restarts.labels("synthesis").inc()
                self._drop_orphans(dead_pid)
                restart_synthesis(proc, f"died while synthesizing {work.label}")

    def _run_call(self, proc: WorkerProcess, call: _Call) -> None:
        try:
            reply = proc.request(("call", call.ref, call.args))
        except WorkerCrashedError as crash:
            self.metrics.worker_restarts.labels("synthesis").inc()
            call.future.set_exception(CuzkError(str(crash)))
            restart_synthesis(proc, f"died in {call.ref}")
            return
        if reply[0] == "ok":
            call.future.set_result(reply[1])
        else:
            call.future.set_exception(CuzkError(f"{call.ref} failed: {reply[1]}"))

    def _synthesized(self, work: PartitionWork, shared: SharedAssignment, start: float, end: float) -> None:
        work.shared = shared
        self.shared_segments += 1
        self.shared_bytes += shared.size
        self._held_segments.add(shared.shm_name)
        rec = work.record
        rec.synth_start, rec.synth_end = start, end
        self.metrics.stage.labels("synthesis").observe(end - start)
        timeline.emit(timeline.Event.SYNTH_START, work.job, rec.index, at=start, worker=rec.synth_worker)
        timeline.emit(timeline.Event.SYNTH_END, work.job, rec.index, at=end, worker=rec.synth_worker)
        if work.job.state.finished:
            self._returned(work)
            return
        if work.reservation is not None:
            work.reservation.release(work.estimate.synthesis)
        rec.state = PartitionState.SYNTH_DONE
        rec.device_queue = time.monotonic()
        timeline.emit(timeline.Event.DEVICE_QUEUE, work.job, rec.index)
        bisect.insort(self._device_queue, work, key=lambda w: w.key)

    def _to_device_unsynthesized(self, work: PartitionWork) -> None:
        """For an executor whose devices synthesize what they prove (`Executor.synthesizes`): the
        partition goes straight to the device queue, in the same order, without a synthesis process
        or a memory reservation here (its witness is made and held on the device's node); the lane
        sends its recipe (`ProveItem.recipe`)."""
        work.job.inflight += 1  # as synthesis admission counts it; `_returned` takes it back
        bisect.insort(self._device_queue, work, key=lambda w: w.key)

    def _synthesized_on_device(self, work: PartitionWork, result: ItemResult) -> None:
        """A partition's synthesis on its device's node (`ItemResult.synth`), on the record and the timeline."""
        if result.synth is None:
            return
        rec = work.record
        rec.synth_start, rec.synth_end = result.synth
        rec.synth_worker = rec.device_worker
        # Queued for the device when its synthesis ended: the lane then waits for a prover slot and the
        # device lock. Until the lane took it, it waited for a lane to synthesize it (synth_wait), so the
        # phases keep their order (planned, synthesis, device queue) as for the local executor.
        rec.device_queue = rec.synth_end
        self.metrics.stage.labels("synthesis").observe(rec.synth_end - rec.synth_start)
        timeline.emit(timeline.Event.SYNTH_START, work.job, rec.index, at=rec.synth_start, worker=rec.synth_worker)
        timeline.emit(timeline.Event.SYNTH_END, work.job, rec.index, at=rec.synth_end, worker=rec.synth_worker)
        timeline.emit(timeline.Event.DEVICE_QUEUE, work.job, rec.index, at=rec.synth_end)

    def _returned(self, work: PartitionWork) -> None:
        """A partition left the pipeline (proven, failed or dropped after synthesis): free what it holds.

        `job.inflight` counts partitions between synthesis admission and this point; when a finished
        job's count reaches zero the engine releases its SRS reference."""
        self._discard(work)
        work.job.inflight -= 1
        self.host.work_returned(work.job)

    # -- proving -------------------------------------------------------------------------------------------
    def _next_for(self, state: WorkerState, device: Device) -> PartitionWork | None:
        """The first queued partition this lane may prove: the queue is in priority order, so a
        CRITICAL lane stops at the first partition below CRITICAL; in throughput mode a NORMAL or LOW
        job's partitions are left to the device it is bound to while that device is alive. A device
        that cannot hold a circuit's key (`Device.refused`) passes over its partitions, and one that
        failed holding a partition passes over that one until it has restarted."""
        for work in self._device_queue:
            if work.job.priority < state.min_priority:
                return None
            if work.job.circuit_id in device.refused or work.record.failed_on == (device.worker_name, device.restarts):
                continue
            bound = work.job.device_affinity
            if (self.settings.device_mode != "throughput" or work.job.priority >= Priority.HIGH or not bound
                    or bound == device.worker_name or not self._device_alive(bound)):
                return work
        return None

    def _device_alive(self, worker_name: str) -> bool:
        return any(d.worker_name == worker_name and d.alive for d in self.executor.devices)

    def _take_batch(self, state: WorkerState, device: Device) -> list[PartitionWork] | None:
        with self.cv:
            while (head := self._next_for(state, device)) is None:
                if self._stopping:
                    return None
                self.cv.wait(WAIT_SLICE_S)
            if self._stopping:
                return None
            self._device_queue.remove(head)
            if self.settings.device_mode == "throughput" and head.job.priority < Priority.HIGH:
                head.job.device_affinity = device.worker_name
            batch = [head]
            if self.settings.max_batch_size > 1 and head.job.batch_id:
                for work in list(self._device_queue):
                    if len(batch) >= self.settings.max_batch_size:
                        break
                    if work.job.batch_id == head.job.batch_id and work.job.circuit_id == head.job.circuit_id:
                        self._device_queue.remove(work)
                        batch.append(work)
            for work in batch:
                work.record.state = PartitionState.PROVING
                work.record.device_worker = state.name
                work.record.device_ordinal = max(0, state.device_ordinal)
                work.record.batch_size = len(batch)
            state.set(head.job, head.record.index)
            return batch

    def _prover_loop(self, device: Device, channel: int, state: WorkerState) -> None:
        while True:
            batch = self._take_batch(state, device)
            if batch is None:
                return
            items = [ProveItem(w.job.circuit_id, w.shared, w.plan.public_inputs, w.label,
                               int(w.job.effective_priority), w.plan.device_hold_s,
                               recipe=w.plan.recipe if w.shared is None else None) for w in batch]
            crashed, incarnation = False, device.restarts
            try:
                results = self.executor.prove(device, channel, items, self.settings.verify_proofs)
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
                    self._synthesized_on_device(work, result)
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
        may pass (`ItemResult.transient`), to the next free lane: with `avoid`, another device's or the
        restarted one's (`incarnation`: the device's restart count when it was handed the partition),
        else any. No proof came back, so it is proven once. At most MAX_DEVICE_ATTEMPTS attempts are
        made; False: fail it instead."""
        rec = work.record
        if work.job.state.finished or rec.device_attempts + 1 >= MAX_DEVICE_ATTEMPTS:
            return False
        rec.device_attempts += 1
        if avoid:
            rec.failed_on = (device.worker_name, incarnation)
        rec.state = PartitionState.SYNTH_DONE
        log.warning("%s: its device %s failed (%s); requeued for the next free device (attempt %d of %d)",
                    work.label, device.worker_name, error, rec.device_attempts + 1, MAX_DEVICE_ATTEMPTS)
        self.metrics.partitions_requeued.inc()
        bisect.insort(self._device_queue, work, key=lambda w: w.key)
        return True

    def _drop_orphans(self, dead_pid: int | None) -> None:
        """Remove what a synthesis process killed mid-partition left in shared memory."""
        if dead_pid is None:
            return
        with self.cv:
            keep = set(self._held_segments)
        removed = unlink_orphans(dead_pid, keep)
        if removed:
            log.warning("removed %d shared-memory segment(s) the dead synthesis process %d left: %s", len(removed),
                        dead_pid, ", ".join(removed))

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
