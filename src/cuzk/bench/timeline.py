"""`--timeline FILE.png|FILE.html`: every partition's synthesis and device spans per worker.

The spans come from the daemon's per-partition timings in the samples (unix ms = the job's
submitted_at_unix_ms + the partition's offsets), in the same layout as the daemon's /timeline.json,
so the HTML file is the daemon's live page with the run embedded. Gaps between consecutive device
spans of all workers of one device are the device's idle time and are marked: a pipeline that keeps
its device busy has none after the first partition.

Preemptions (`preemptions`): a partition that took its device before a partition of lower priority
that had been waiting for that device longer (queued for it earlier) went ahead of it: the
priority-ordered device queue and device lock at work. The PNG marks each such partition with a
triangle at the start of its device span, and draws CRITICAL partitions' device spans in their own
colour.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cuzk.errors import CuzkError

#: Priority names (as a stress stream's samples carry them, any case) by rank; others rank NORMAL.
PRIORITY_RANK = {"LOW": 1, "NORMAL": 2, "HIGH": 3, "CRITICAL": 4}


def priority_rank(name: str) -> int:
    return PRIORITY_RANK.get(str(name).upper(), PRIORITY_RANK["NORMAL"])


def spans_from_samples(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The timeline data (see cuzk.server.timeline_page) of every sample with partition timings."""
    spans = []
    end = 0
    for s in samples:
        r = s.get("result")
        if not r or not r.get("submitted_at_unix_ms"):
            continue
        base = r["submitted_at_unix_ms"]
        completed = s["status"] == "COMPLETED"
        for p in r["partitions"]:
            # 0 means "never happened" in the proto, but a fast stage can also end within 0.5 ms of the
            # submit: a completed job's stamps are all real.
            if not (completed or p["synth_end_ms"]):
                continue
            device = queued = None
            if completed or p["device_end_ms"]:
                device = [base + p["device_start_ms"], base + p["device_end_ms"]]
                queued = base + p.get("device_queue_ms", p["device_start_ms"])
            spans.append({"job_id": r["job_id"], "partition": p["index"], "proof_kind": r["proof_kind"],
                          "priority": s.get("priority", ""), "state": s["status"].lower(),
                          "synth_worker": p.get("synth_worker") or "synthesis", "device_worker": p["worker"],
                          "synth": [base + p["synth_start_ms"], base + p["synth_end_ms"]], "device": device,
                          "device_queued": queued})
            end = max(end, base + (p["device_end_ms"] or p["synth_end_ms"]))
    return {"now_ms": end, "window_s": 0, "synth_workers": sorted({s["synth_worker"] for s in spans}, key=_natural),
            "device_workers": sorted({s["device_worker"] for s in spans if s["device"]}, key=_natural),
            "spans": spans}


def device_of(worker: str) -> str:
    """The device a prover worker belongs to: its name up to "/" (cuzk-device-cuda0/w1 -> cuzk-device-cuda0)."""
    return worker.split("/", 1)[0]


def idle_gaps(spans: list[dict[str, Any]]) -> dict[str, list[tuple[int, int]]]:
    """Per device: the (start, end) unix-ms gaps during which none of its workers was computing.

    Workers of one device share it (they take turns under its lock), so a gap on one worker's row
    while the other computes is not idle time; only gaps in the union of their spans are."""
    by_device: dict[str, list[tuple[int, int]]] = {}
    for s in spans:
        if s["device"] and s["device"][1] is not None:
            by_device.setdefault(device_of(s["device_worker"]), []).append((s["device"][0], s["device"][1]))
    gaps: dict[str, list[tuple[int, int]]] = {}
    for device, ivs in by_device.items():
        ivs.sort()
        last = None
        out = []
        for a, b in ivs:
            if last is not None and a > last:
                out.append((last, a))
            last = b if last is None else max(last, b)
        gaps[device] = out
    return gaps


def preemptions(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The partitions that went ahead of lower-priority partitions waiting longer for the same device,
    or took it in the middle of a lower-priority partition's device phase (which let it through
    between two of its steps, cuzk.backends.cuda.admission): one entry each (job, partition, priority,
    device, `at_ms` its device start, `jumped` how many it went ahead of, `interrupted` how many
    device phases it went into), in the order they took the device."""
    on_device = [s for s in spans if s.get("device") and s.get("device_queued") is not None]
    by_device: dict[str, list[dict[str, Any]]] = {}
    for s in on_device:
        by_device.setdefault(device_of(s["device_worker"]), []).append(s)
    out = []
    for device, group in by_device.items():
        for s in group:
            rank = priority_rank(s["priority"])
            jumped = sum(1 for o in group if priority_rank(o["priority"]) < rank
                         and o["device_queued"] < s["device_queued"] and o["device"][0] > s["device"][0])
            # Inside the other's phase from start to end: a partition that takes the device as the
            # other releases it starts a few ms before the other's end stamp (taken after the release)
            # and runs past it, which is a partition boundary, not an interruption.
            interrupted = sum(1 for o in group if priority_rank(o["priority"]) < rank
                              and o["device"][0] < s["device"][0] and s["device"][1] <= o["device"][1])
            if jumped or interrupted:
                out.append({"job_id": s["job_id"], "partition": s["partition"], "proof_kind": s["proof_kind"],
                            "priority": str(s["priority"]).upper(), "device": device, "worker": s["device_worker"],
                            "at_ms": s["device"][0], "jumped": jumped, "interrupted": interrupted})
    out.sort(key=lambda e: e["at_ms"])
    return out


def preemption_summary(spans: list[dict[str, Any]]) -> dict[str, Any]:
    """How many partitions of each priority went ahead of others (`preemptions`), and the events."""
    events = preemptions(spans)
    by_priority: dict[str, int] = {}
    for e in events:
        by_priority[e["priority"]] = by_priority.get(e["priority"], 0) + 1
    return {"partitions": len(events), "by_priority": by_priority,
            "partitions_overtaken": sum(e["jumped"] for e in events),
            "phases_interrupted": sum(e["interrupted"] for e in events), "events": events}


def _natural(name: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def write_png(data: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spans = data["spans"]
    if not spans:
        raise CuzkError(f"--timeline {path}: the run has no partition timings to draw")
    t0 = min(s["synth"][0] for s in spans)
    rows = [("synth", w) for w in data["synth_workers"]] + [("device", w) for w in data["device_workers"]]
    index = {row: k for k, row in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.45 * len(rows)))
    colors = {"synth": "#4e79a7", "device": "#f28e2b", "critical": "#b07aa1"}
    critical = False
    for kind in ("synth", "device"):
        for s in spans:
            iv = s[kind]
            if not iv or iv[1] is None:
                continue
            y = index[(kind, s[f"{kind}_worker"])]
            color = colors[kind]
            if kind == "device" and priority_rank(s["priority"]) == PRIORITY_RANK["CRITICAL"]:
                color, critical = colors["critical"], True
            ax.broken_barh([((iv[0] - t0) / 1000, max(iv[1] - iv[0], 1) / 1000)], (y - 0.35, 0.7),
                           facecolors=color, edgecolors="white", linewidth=0.3)
    events = preemptions(spans)
    for e in events:
        ax.plot((e["at_ms"] - t0) / 1000, index[("device", e["worker"])] - 0.42, marker="v", markersize=7,
                color="#c0392b", markeredgecolor="black", markeredgewidth=0.4, linestyle="none", zorder=5)
    gaps = idle_gaps(spans)
    for kind, worker in rows:
        if kind == "device" and gaps.get(device_of(worker)):
            ax.broken_barh([((a - t0) / 1000, (b - a) / 1000) for a, b in gaps[device_of(worker)]],
                           (index[(kind, worker)] - 0.2, 0.4), facecolors="#fdecea", edgecolors="#c0392b",
                           hatch="////", linewidth=0.5)
    ax.set_yticks(range(len(rows)), [f"{kind} {w}" for kind, w in rows])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first synthesis started")
    ax.set_title(title)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [Patch(color=colors["synth"], label="synthesis"),
                          Patch(color=colors["device"], label="device compute")]
    if critical:
        handles.append(Patch(color=colors["critical"], label="device compute, CRITICAL"))
    handles.append(Patch(facecolor="#fdecea", edgecolor="#c0392b", hatch="////", label="device idle"))
    if events:
        handles.append(Line2D([], [], marker="v", color="#c0392b", markeredgecolor="black", linestyle="none",
                              label=f"went ahead of lower-priority partitions queued earlier ({len(events)})"))
    ax.legend(handles=handles, loc="upper right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as err:
        raise CuzkError(f"--timeline {path}: {err.strerror}") from None
    finally:
        plt.close(fig)


def write_timeline(samples: list[dict[str, Any]], path: Path, title: str) -> dict[str, Any]:
    """Write the run's timeline as PNG or self-contained HTML (by the file's suffix); returns the data."""
    from cuzk.server.timeline_page import render_page

    suffix = path.suffix.lower()
    if suffix not in (".png", ".html", ".htm"):
        raise CuzkError(f"--timeline {path}: the file name must end in .png or .html")
    data = spans_from_samples(samples)
    if suffix == ".png":
        write_png(data, path, title)
    else:
        try:
            path.write_text(render_page(title, data=data))
        except OSError as err:
            raise CuzkError(f"--timeline {path}: {err.strerror}") from None
    return data
