"""Where one partition's time went: contiguous phases from the daemon's per-partition stamps.

Every stamp is in ms since the job was submitted (AwaitProof's PartitionTiming), so the phases of
one partition tile its wall time (submit -> proof back) without gaps or overlaps:

    queue        submitted -> the job left the scheduler
    planning     -> partitions queued (payload parsed, parameters resident)
    synth_wait   -> a synthesis worker and memory were free for this partition
    synthesis    -> the assignment was in shared memory
    handoff      -> queued for a device
    device_queue -> a device worker started it (waiting for workers and the device lock)
    device       -> the backend returned (split into the backend's own sub-phases, `device_phases`)
    finalise     -> the proof was encoded and verified and back in the daemon

The device sub-phases (h, select, msm_*, assemble for the CPU backend) come from the backend's own
timer in microseconds; `other` is the rest of device time (memory mapping, conversions). A backend
whose sub-phases overlap in time (the CUDA backend's copy-stream times and its `device` span run
beside its kernels, its msm_b_g2 beside msm_l, msm_a and msm_b_g1) sums to more than the device
phase: then no remainder exists and `other` is left out rather than shown as a false 0.
"""

from __future__ import annotations

from typing import Any

PHASES = ("queue", "planning", "synth_wait", "synthesis", "handoff", "device_queue", "device", "finalise")


def partition_phases(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per partition of a completed job's result record (see `record.result_record`)."""
    started = result["queue_wait_ms"]
    out = []
    for p in result["partitions"]:
        stamps = [0, started, p["planned_ms"], p["synth_start_ms"], p["synth_end_ms"], p["device_queue_ms"],
                  p["device_start_ms"], p["device_end_ms"], p["done_ms"]]
        phases = {name: float(stamps[k + 1] - stamps[k]) for k, name in enumerate(PHASES)}
        sub = {name: us / 1000 for name, us in sorted(p.get("device_phases_us", {}).items())}
        # 1 ms of slack: the stamps are whole milliseconds, the backend's timers microseconds.
        if sub and sum(sub.values()) <= phases["device"] + 1.0:
            sub["other"] = max(0.0, phases["device"] - sum(sub.values()))
        out.append({"job_id": result["job_id"], "partition": p["index"], "wall_ms": float(p["done_ms"]),
                    "phases": phases, "device_phases": sub, "verify_ms": p.get("verify_us", 0) / 1000,
                    "synth_worker": p.get("synth_worker", ""), "device_worker": p.get("worker", "")})
    return out
