"""The JSON record of a benchmark run, and the facts that make its numbers attributable.

A record says what ran (mode, proof inputs, count, concurrency, cuzk commit), where (the client's
hardware, and for daemon runs the daemon's instance id, config fingerprint, version, backend and
devices, asked before and after the run so a restart in between is noticed) and what came out
(every sample with the daemon's per-partition timings, and the summaries). `cuzk bench compare`
reads two of them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from cuzk import __version__
from cuzk.errors import CuzkError

SCHEMA = "cuzk-bench/1"
STATUS_NAMES = {0: "UNKNOWN", 1: "COMPLETED", 2: "FAILED", 3: "CANCELLED", 4: "TIMEOUT"}


def result_record(msg: Any) -> dict[str, Any]:
    """An AwaitProofResponse as plain JSON (integers stay integers; the proof bytes only as a length)."""
    return {
        "job_id": msg.job_id, "status": STATUS_NAMES.get(msg.status, str(msg.status)), "error": msg.error_message,
        "proof_bytes": len(msg.proof), "queue_wait_ms": msg.queue_wait_ms, "srs_load_ms": msg.srs_load_ms,
        "synthesis_ms": msg.synthesis_ms, "gpu_compute_ms": msg.gpu_compute_ms, "verify_ms": msg.verify_ms,
        "total_ms": msg.total_ms, "submitted_at_unix_ms": msg.submitted_at_unix_ms,
        "started_at_unix_ms": msg.started_at_unix_ms, "finished_at_unix_ms": msg.finished_at_unix_ms,
        "proof_kind": msg.proof_kind, "circuit_id": msg.circuit_id,
        "partitions": [{
            "index": p.index, "planned_ms": p.planned_ms, "synth_start_ms": p.synth_start_ms,
            "synth_end_ms": p.synth_end_ms, "device_queue_ms": p.device_queue_ms,
            "device_start_ms": p.device_start_ms, "device_end_ms": p.device_end_ms, "done_ms": p.done_ms,
            "device_ordinal": p.device_ordinal, "worker": p.worker, "synth_worker": p.synth_worker,
            "batch_size": p.batch_size, "verify_us": p.verify_us, "device_phases_us": dict(p.device_phases_us),
        } for p in msg.partitions],
    }


def _gpus() -> list[str]:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


def host_info() -> dict[str, Any]:
    """The machine the benchmark client ran on."""
    import psutil

    from cuzk.backends.cpu import cpu_model  # the same name the CPU backend reports for its device

    return {"hostname": platform.node(), "cpu": cpu_model(), "cores": os.cpu_count(),
            "memory_bytes": psutil.virtual_memory().total, "gpus": _gpus(), "os": platform.platform(),
            "python": platform.python_version(), "cuzk_version": __version__, "commit": git_commit(),
            **({"declared_commit": os.environ["CUZK_COMMIT"]} if os.environ.get("CUZK_COMMIT") else {})}


def git_commit() -> str:
    """The cuzk checkout's commit (with "+dirty" for local changes), or "" outside a git checkout. A
    runner whose copy's git metadata may be stale (a device machine) also sets $CUZK_COMMIT, recorded
    beside it as `declared_commit`."""
    root = Path(__file__).resolve().parents[3]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False)
        if head.returncode != 0:
            return ""
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def save(record: dict[str, Any], path: Path) -> None:
    try:
        path.write_text(json.dumps(record, indent=1) + "\n")
    except OSError as err:
        raise CuzkError(f"--json {path}: {err.strerror}") from None


def load(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text())
    except OSError as err:
        raise CuzkError(f"{path}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise CuzkError(f"{path}: not JSON: {err}") from None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise CuzkError(f"{path}: not a cuzk bench record (schema {SCHEMA}; write one with `cuzk bench ... --json`)")
    return record
