"""What the engine reports: the GetStatus / `/status` snapshot, queue statistics, scrape-time gauges.

Read-only views over an `Engine`, built under its lock so every number in one snapshot describes
the same moment. The `/status` JSON is `snapshot()` as is; GetStatus maps it onto cuzk.v1 fields.
"""

from __future__ import annotations

import heapq
import os
import time
from typing import TYPE_CHECKING, Any

import psutil

from cuzk import __version__
from cuzk.engine.jobs import JobState, Priority, ProofKind
from cuzk.engine.metrics import GaugeSnapshot

if TYPE_CHECKING:
    from cuzk.engine.engine import Engine

#: Finished jobs stay on the /status page this long (their results stay answerable much longer).
FINISHED_VISIBLE_S = 30.0


class RssMeter:
    """RSS of this process and all its descendants, cached for a second (psutil walks /proc)."""

    def __init__(self) -> None:
        self._at = 0.0
        self._value = 0

    def __call__(self) -> int:
        if time.monotonic() - self._at < 1.0:
            return self._value
        me = psutil.Process()
        total = 0
        for p in [me, *me.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                continue
        self._at, self._value = time.monotonic(), total
        return total


def queue_stats(engine: Engine) -> list[dict[str, Any]]:
    """One row per proof kind (all kinds, even idle ones): pending, and in progress by phase."""
    with engine._cv:
        rows = {k: {"proof_kind": k.label, "pending": 0, "planning": 0, "synthesizing": 0, "proving": 0}
                for k in ProofKind}
        for job in engine.jobs.values():
            phase = job.phase()
            if phase == "queued":
                rows[job.kind]["pending"] += 1
            elif phase != "finished":
                rows[job.kind][phase] += 1
    for row in rows.values():
        row["in_progress"] = row["planning"] + row["synthesizing"] + row["proving"]
    return list(rows.values())


#: Finished jobs in the status's `recent_jobs`, newest first (the operator page's table).
RECENT_JOBS = 20


def priority_queues(engine: Engine) -> list[dict[str, Any]]:
    """One row per priority, CRITICAL first: jobs queued (in the scheduler or a batch being
    collected), planning and running, and how long the oldest queued one has waited (None when none)."""
    now = time.monotonic()
    with engine._cv:
        rows = {p: {"priority": p.name, "queued": 0, "planning": 0, "running": 0,
                    "oldest_queued_job": None, "oldest_wait_secs": None} for p in sorted(Priority, reverse=True)}
        oldest: dict[Priority, Any] = {}
        for job in engine.jobs.values():
            row = rows[job.priority]
            if job.state is JobState.QUEUED:
                row["queued"] += 1
                if job.priority not in oldest or job.submitted < oldest[job.priority].submitted:
                    oldest[job.priority] = job
            elif job.state is JobState.PLANNING:
                row["planning"] += 1
            elif job.state is JobState.RUNNING:
                row["running"] += 1
        for level, job in oldest.items():
            rows[level]["oldest_queued_job"] = job.job_id
            rows[level]["oldest_wait_secs"] = round(now - job.submitted, 3)
    return list(rows.values())


def recent_jobs(engine: Engine, limit: int = RECENT_JOBS) -> list[dict[str, Any]]:
    """The last `limit` finished jobs, newest first: what each was, how it ended, where its time
    went. Phase seconds are the job's result timings: queue wait and parameter load once, synthesis,
    device and verify summed over its partitions (so they can exceed the total when partitions overlap)."""
    with engine._cv:
        done = (j for j in engine.jobs.values() if j.state.finished and j.finished is not None)
        finished = heapq.nlargest(limit, done, key=lambda j: j.finished)
        results = [(job, job.result()) for job in finished]
    rows = []
    for job, r in results:
        t = r.timings
        rows.append({
            "job_id": job.job_id, "proof_kind": r.proof_kind or job.kind.label, "priority": job.priority.name,
            "state": job.state.value, "circuit_id": r.circuit_id, "partitions": len(r.partitions),
            "finished_at_unix_ms": r.finished_at_unix_ms, "total_secs": t.total_ms / 1000,
            "phases_secs": {"queue": t.queue_wait_ms / 1000, "srs_load": t.srs_load_ms / 1000,
                            "synthesis": t.synthesis_ms / 1000, "device": t.gpu_compute_ms / 1000,
                            "verify": t.verify_ms / 1000},
            # Restored from the journal: a job of an earlier daemon instance.
            "restored": job.origin == "journal", "error": r.error,
        })
    return rows


def gauges(engine: Engine) -> GaugeSnapshot:
    pipeline = engine.pipeline
    with engine._cv:
        by_state: dict[str, int] = {s.value: 0 for s in JobState}
        for job in engine.jobs.values():
            by_state[job.state.value] += 1
        snap = GaugeSnapshot(
            uptime_seconds=time.monotonic() - engine.started,
            queue_depth=len(engine.scheduler) + len(engine.collector),
            running_jobs=by_state["planning"] + by_state["running"],
            gpu_workers=len(pipeline.prover_workers),
            busy_gpu_workers=sum(s.busy and s.phase == "proving" for _, _, s in pipeline.prover_workers),
            synthesis_workers=len(engine.synthesis.processes),
            busy_synthesis_workers=sum(s.busy for s in pipeline.synth_workers),
            jobs_by_state=by_state,
            shared_segments=pipeline.shared_segments, shared_bytes=pipeline.shared_bytes,
        )
    snap.memory_budget_bytes = engine.budget.total
    snap.memory_reserved_bytes = engine.budget.used
    snap.memory_reserved_by_purpose = engine.budget.by_label()
    snap.process_rss_bytes = engine.rss()
    entries = engine.srs.snapshot()
    snap.srs_entries_by_tier = {t: sum(e["tier"] == t for e in entries) for t in ("HOT", "WARM", "COLD")}
    snap.srs_bytes_by_tier = engine.srs.held_bytes()
    for d in engine.executor.devices:
        snap.device_partitions[d.spec.label] = d.partitions_proven
        snap.device_busy_seconds[d.spec.label] = d.busy_s
        snap.device_can_prove[d.spec.label] = 1.0 if d.can_prove else 0.0
        if d.placement:
            snap.device_nodes.append((d.spec.label, d.placement["node"], d.placement["state"]))
        plan = d.info[0].get("memory_plan") if d.info else None
        if plan:
            label = d.spec.label
            snap.device_memory_budget_bytes[label] = plan["budget"]
            snap.device_memory_peak_bytes[label] = plan["peak_pool_bytes"]
            snap.device_oom_retries[label] = plan["oom_retries"]
            snap.device_preemptions[label] = plan["preemptions"]
            snap.device_preemptions_refused[label] = plan["preemptions_refused"]
    return snap


def info(engine: Engine) -> dict[str, Any]:
    return {
        "version": __version__, "instance_id": engine.instance_id, "config_fingerprint": engine.config.fingerprint(),
        "pid": os.getpid(), "started_at_unix_ms": round(engine.started_wall * 1000),
        "backend": ",".join(sorted({s.kind for s in engine.device_specs})),
        "test_circuits_enabled": engine.config.debug.test_circuits, "circuit_providers": engine.providers.names(),
    }


def _reserved_for(state: Any) -> str | None:
    """The priority a reserved worker serves ("CRITICAL"), None for a worker that takes anything."""
    return Priority(state.min_priority).name if state.min_priority else None


def snapshot(engine: Engine) -> dict[str, Any]:
    """Everything GetStatus and /status report (the /status JSON is this dict)."""
    now = time.monotonic()
    pipeline = engine.pipeline
    with engine._cv:
        pipelines = []
        for job in sorted(engine.jobs.values(), key=lambda j: j.seq):
            if job.state.finished and now - (job.finished or now) > FINISHED_VISIBLE_S:
                continue
            pipelines.append({
                "job_id": job.job_id, "proof_kind": job.kind.label, "priority": job.priority.name,
                "state": job.state.value, "phase": job.phase(), "circuit_id": job.circuit_id,
                "batch_id": job.batch_id,
                "queued_secs": round((job.started or now) - job.submitted, 3),
                "started_secs_ago": None if job.started is None else round(now - job.started, 3),
                "total_partitions": len(job.partitions), "partitions_done": job.partitions_done(),
                "error": job.error,
                "partitions": [{"index": p.index, "state": p.state.value, "synth_ms": round(p.synth_s * 1000),
                                "gpu_ms": round(p.device_s * 1000), "synth_worker": p.synth_worker,
                                "device_worker": p.device_worker} for p in job.partitions],
            })
        workers = [{"worker_id": s.name, "device": d.spec.label, "gpu_ordinal": d.spec.ordinal,
                    "device_kind": d.spec.kind,
                    "state": (s.phase or "proving") if s.busy else "idle", "current_job": s.job_id,
                    "current_partition": s.partition if s.busy else None, "current_proof_kind": s.proof_kind,
                    "busy_secs": round(s.busy_s + ((now - s.since) if s.busy else 0.0), 3),
                    "reserved_for": _reserved_for(s)}
                   for d, _, s in pipeline.prover_workers]
        synth = [{"worker_id": s.name, "pid": p.pid, "state": "synthesizing" if s.busy else "idle",
                  "current_job": s.job_id, "current_partition": s.partition if s.busy else None,
                  "restarts": p.restarts, "reserved_for": _reserved_for(s)}
                 for p, s in zip(engine.synthesis.processes, pipeline.synth_workers, strict=True)]
        counters = {
            "total_completed": engine.counters["completed"], "total_failed": engine.counters["failed"],
            "total_cancelled": engine.counters["cancelled"],
            "queue_depth": len(engine.scheduler) + len(engine.collector),
            "active_jobs": engine.active_jobs, "window": engine.window,
        }
        buffers = {"synth_in_flight": pipeline.synthesizing, "waiting_for_device": pipeline.waiting_for_device(),
                   "queued_for_synthesis": pipeline.queued_for_synthesis(),
                   "shared_segments": pipeline.shared_segments, "shared_bytes": pipeline.shared_bytes}
    devices = [{"label": d.spec.label, "ordinal": d.spec.ordinal, "kind": d.spec.kind, "name": d.name, "pid": d.pid,
                "provers": engine.executor.provers_per_device, "restarts": d.restarts, "failures": d.failures,
                "partitions_proven": d.partitions_proven, "busy_secs": round(d.busy_s, 3),
                "busy_fraction": round(min(1.0, d.busy_s / max(1e-9, now - engine.started)), 4),
                "keys": (d.info[0].get("keys", []) if d.info else []),
                # Keys this device's memory plan cannot hold: the other devices prove those circuits.
                "refused_keys": dict(d.refused),
                "last_failure": ({"at_unix_ms": round(d.last_failure[0] * 1000), "reason": d.last_failure[1]}
                                 if d.last_failure else None),
                # Dead and its last restart failed: it takes no partitions until a retry succeeds.
                "restart_error": d.restart_error if not d.can_prove else None,
                "memory_total": (d.info[0]["memory_total"] if d.info else 0),
                "memory_free": (d.info[0]["memory_free"] if d.info else 0),
                # GPUs, as last read (every few seconds): the device process's memory pool, the bytes
                # it hands to live arrays and those it holds from the driver, and the card's used
                # bytes as its driver counts them (every process on it); null on a CPU.
                "memory_pool_used": (d.info[0].get("pool_used") if d.info else None),
                "memory_pool_held": (d.info[0].get("pool_held") if d.info else None),
                "memory_driver_used": (d.info[0].get("driver_used") if d.info else None),
                # GPUs: the memory plan (limit, budget, per key resident/streamed bytes and working
                # reserve, the pool's peak, out-of-memory retries); docs/memory.md.
                "memory_plan": (d.info[0].get("memory_plan") if d.info else None),
                # Devices on other hosts (the Ray executor): node id and address, state, missing keys.
                **d.placement} for d in engine.executor.devices]
    budget = engine.budget
    return {
        **info(engine),
        "uptime_secs": round(now - engine.started, 3),
        "accepting": engine.accepting,
        # Why no device can prove now (health NOT_SERVING meanwhile), or null.
        "unable_to_prove": engine.unable_to_prove(),
        # The job journal: writable, or why not (new jobs are refused meanwhile), results not yet written.
        "journal": engine.journal.state() if engine.journal is not None else None,
        "memory": {"total_bytes": budget.total, "used_bytes": budget.used, "available_bytes": budget.available,
                   "peak_bytes": budget.peak, "baseline_bytes": engine.baseline_bytes,
                   "by_purpose": budget.by_label(), "process_rss_bytes": engine.rss(),
                   # Which limit the budget came from: memory.total_budget, MemAvailable or a cgroup's.
                   "budget_source": engine.budget_source},
        "synthesis": {"max_concurrent": len(engine.synthesis.processes),
                      "active": sum(s["state"] != "idle" for s in synth),
                      "cpus": engine.cpus.cpus, "cpus_source": engine.cpus.source, "workers": synth},
        "devices": devices,
        "gpu_workers": workers,
        "pipelines": pipelines,
        "queues": queue_stats(engine),
        "queues_by_priority": priority_queues(engine),
        "allocations": {"srs": engine.srs.snapshot()},
        "compiled_circuits": engine.compiled.to_dict(),
        "counters": counters,
        "buffers": buffers,
        **_cluster(engine),
        "recent_jobs": recent_jobs(engine),
    }


def _cluster(engine: Engine) -> dict[str, Any]:
    """`cluster`: the nodes behind the devices (the Ray executor); nothing for a local executor."""
    cluster = engine.executor.cluster_status()
    return {} if cluster is None else {"cluster": cluster}


#: How far back /timeline.json looks by default (the live page shows this window).
TIMELINE_WINDOW_S = 120.0


def _wall_ms(job: Any, mono: float | None) -> int | None:
    """A monotonic stamp on a job as unix ms (the job's own submit stamps tie the two clocks)."""
    if mono is None:
        return None
    return round((job.submitted_wall + (mono - job.submitted)) * 1000)


def timeline(engine: Engine, window_s: float = TIMELINE_WINDOW_S) -> dict[str, Any]:
    """Every partition's synthesis and device spans in the last `window_s` seconds, with the workers.

    Times are unix ms; a span still running has `end` null. This is the data behind the daemon's
    live timeline page and the same shape `cuzk bench --timeline` renders (cuzk.bench.timeline)."""
    now = time.monotonic()
    pipeline = engine.pipeline
    spans: list[dict[str, Any]] = []
    with engine._cv:
        # Work in progress has no end stamps yet: the workers know since when they are busy with what.
        running: dict[tuple[str, int, str], tuple[str, float]] = {}
        for state in pipeline.synth_workers:
            if state.busy:
                running[(state.job_id, state.partition, "synth")] = (state.name, state.since)
        for _, _, state in pipeline.prover_workers:
            if state.busy and state.phase == "proving":
                running[(state.job_id, state.partition, "device")] = (state.name, state.since)
        for job in sorted(engine.jobs.values(), key=lambda j: j.seq):
            if job.finished is not None and now - job.finished > window_s:
                continue
            for p in job.partitions:
                synth = running.get((job.job_id, p.index, "synth"))
                device = running.get((job.job_id, p.index, "device"))
                if p.synth_start is None and synth is None:
                    continue
                span: dict[str, Any] = {
                    "job_id": job.job_id, "partition": p.index, "proof_kind": job.kind.label,
                    "priority": job.priority.name, "state": p.state.value,
                    "synth_worker": p.synth_worker or (synth[0] if synth else ""),
                    "device_worker": p.device_worker or (device[0] if device else ""),
                    "synth": ([_wall_ms(job, p.synth_start), _wall_ms(job, p.synth_end)] if p.synth_start is not None
                              else [_wall_ms(job, synth[1]) if synth else None, None]),
                    "device": None,
                }
                if p.device_start is not None:
                    span["device"] = [_wall_ms(job, p.device_start), _wall_ms(job, p.device_end)]
                elif device is not None:
                    span["device"] = [_wall_ms(job, device[1]), None]
                spans.append(span)
        synth_workers = [s.name for s in pipeline.synth_workers]
        # Partitions synthesized on their device's node (the Ray executor) name that device's lane.
        synth_workers += sorted({s["synth_worker"] for s in spans} - set(synth_workers) - {""})
        device_workers = [s.name for _, _, s in pipeline.prover_workers]
    return {"instance_id": engine.instance_id, "now_ms": round(time.time() * 1000), "window_s": window_s,
            "synth_workers": synth_workers, "device_workers": device_workers, "spans": spans}
