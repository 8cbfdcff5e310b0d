"""What every benchmark records next to its numbers: the machine, the date, the code version."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def hardware() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    except (OSError, StopIteration):
        pass
    return {"cpu": model, "cores": len(os.sched_getaffinity(0)), "memory_bytes": mem,
            "python": platform.python_version(), "machine": platform.machine()}


def git_revision() -> str:
    """`git describe` of this tree. $CUZK_COMMIT, when set, is the revision the runner declares (a
    device copy's git metadata can be older than its files); both are named when they differ."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                             check=False, cwd=Path(__file__).parent)
        revision = out.stdout.strip()
    except OSError:
        revision = ""
    declared = os.environ.get("CUZK_COMMIT", "")
    if declared and revision and not revision.startswith(declared):
        return f"{declared} (declared by CUZK_COMMIT; git describes this tree as {revision})"
    return revision or declared or "unknown"


def envelope(name: str, results: Any, **extra: Any) -> dict[str, Any]:
    return {"benchmark": name, "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "git": git_revision(), "hardware": hardware(), **extra, "results": results}


def write(name: str, payload: dict[str, Any], out: Path | None = None) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = out or RESULTS / f"{name}-{dt.date.today().isoformat()}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def median_time(fn: Callable[[], Any], reps: int) -> tuple[float, list[float]]:
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), samples


def nvidia_smi() -> dict[str, str]:
    """The GPU as nvidia-smi reports it (clocks, memory, power limit, PCIe generation); {} without one."""
    fields = ["name", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
              "memory.total", "power.limit", "pcie.link.gen.current"]
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
        return dict(zip(fields, [v.strip() for v in out.split(",")], strict=False))
    except (OSError, subprocess.CalledProcessError, IndexError):
        return {}


def still_running(seen: dict[int, float]) -> list[dict[str, Any]]:
    """Of the processes seen (pid -> create time), those alive now: the same pid with the same create
    time (pids are reused), zombies left out."""
    import psutil

    alive = []
    for pid, created in seen.items():
        try:
            p = psutil.Process(pid)
            if abs(p.create_time() - created) < 0.01 and p.status() != psutil.STATUS_ZOMBIE:
                alive.append({"pid": pid, "cmdline": " ".join(p.cmdline())[:200]})
        except psutil.Error:
            continue
    return alive
