"""`cuzk bench stress` without a daemon: per-kind and per-priority latency percentiles, deadline
misses, and the preemptions it finds in the partitions' timings (and marks in the timeline PNG)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cuzk.bench.runner import stress_summary
from cuzk.bench.stats import run_summary
from cuzk.bench.timeline import preemptions, spans_from_samples, write_timeline

T0 = 1_700_000_000_000


def sample(index: int, kind: str, priority: str, *, latency_s: float, deadline_s: float | None = None,
           parts: list[dict[str, Any]] | None = None, status: str = "COMPLETED") -> dict[str, Any]:
    """A stress sample whose job was submitted at T0 (partition stamps are ms after it)."""
    partitions = [{"index": k, "planned_ms": 1, "synth_start_ms": p.get("synth", (1, 2))[0],
                   "synth_end_ms": p.get("synth", (1, 2))[1], "device_queue_ms": p["queued"],
                   "device_start_ms": p["device"][0], "device_end_ms": p["device"][1], "done_ms": p["device"][1] + 1,
                   "worker": p["worker"], "synth_worker": "cuzk-synth-0", "verify_us": 10, "device_phases_us": {}}
                  for k, p in enumerate(parts or [])]
    result = {"job_id": f"j{index}", "status": status, "queue_wait_ms": 0, "total_ms": round(latency_s * 1000),
              "submitted_at_unix_ms": T0, "proof_kind": kind, "partitions": partitions}
    return {"index": index, "stream": kind, "kind": kind, "priority": priority, "deadline_s": deadline_s,
            "warmup": False, "job_id": f"j{index}", "status": status, "error": "", "submit_unix_ms": T0,
            "end_unix_ms": T0 + latency_s * 1000, "latency_s": latency_s, "result": result}


def porep_and_winning() -> list[dict[str, Any]]:
    """Device gpu0: a PoRep partition computes (0-1500 ms) while the other worker's is staged and
    waiting (queued at 100); a WinningPoSt partition queued at 700 takes the device next (1500-1560),
    ahead of the staged one (1560-3060). On gpu1 a PoRep partition queued earlier but on another
    device is no preemption. A HIGH partition after everything queued jumps nothing."""
    return [
        sample(0, "porep", "normal", latency_s=3.1, parts=[
            {"queued": 0, "device": (0, 1500), "worker": "cuzk-device-cuda0/w0"},
            {"queued": 100, "device": (1560, 3060), "worker": "cuzk-device-cuda0/w1"},
            {"queued": 200, "device": (1600, 3100), "worker": "cuzk-device-cuda1/w0"}]),
        sample(1, "winning", "critical", latency_s=1.6, deadline_s=5.0, parts=[
            {"queued": 700, "device": (1500, 1560), "worker": "cuzk-device-cuda0/critical"}]),
        sample(2, "winning", "critical", latency_s=6.0, deadline_s=5.0, parts=[
            {"queued": 3200, "device": (3200, 3260), "worker": "cuzk-device-cuda0/critical"}]),
        sample(3, "wpost", "high", latency_s=4.0, parts=[
            {"queued": 3300, "device": (3300, 3900), "worker": "cuzk-device-cuda0/w0"}]),
        sample(4, "winning", "critical", latency_s=0.5, deadline_s=5.0, status="FAILED"),
    ]


def test_preemptions_are_partitions_that_went_ahead_of_earlier_queued_lower_priority_ones() -> None:
    spans = spans_from_samples(porep_and_winning())["spans"]
    events = preemptions(spans)
    assert events == [{"job_id": "j1", "partition": 0, "proof_kind": "winning", "priority": "CRITICAL",
                       "device": "cuzk-device-cuda0", "worker": "cuzk-device-cuda0/critical", "at_ms": T0 + 1500,
                       "jumped": 1, "interrupted": 0}]


def test_a_partition_let_in_mid_phase_is_a_preemption_that_interrupted_one() -> None:
    """A WinningPoSt partition that took the device inside a PoRep partition's device phase (the
    CUDA backend's preemption between steps) is counted as interrupting it."""
    samples = [
        sample(0, "porep", "normal", latency_s=2.0, parts=[
            {"queued": 0, "device": (0, 1600), "worker": "cuzk-device-cuda0/w0"}]),
        sample(1, "winning", "critical", latency_s=0.6, parts=[
            {"queued": 300, "device": (340, 400), "worker": "cuzk-device-cuda0/critical"}]),
    ]
    summary = stress_summary(samples)["preemptions"]
    assert summary["partitions"] == 1 and summary["phases_interrupted"] == 1 and summary["partitions_overtaken"] == 0
    assert summary["events"][0]["job_id"] == "j1" and summary["events"][0]["interrupted"] == 1


def test_a_partition_that_takes_the_device_as_another_releases_it_interrupted_none() -> None:
    """The lower-priority partition's end stamp trails its release of the device lock by a few ms, so
    the next partition may start just before it; running past that end, it came at the boundary."""
    samples = [
        sample(0, "porep", "normal", latency_s=2.0, parts=[
            {"queued": 0, "device": (0, 1510), "worker": "cuzk-device-cuda0/w0"},
            {"queued": 100, "device": (1770, 3270), "worker": "cuzk-device-cuda0/w1"}]),
        sample(1, "winning", "critical", latency_s=0.6, parts=[
            {"queued": 1200, "device": (1500, 1760), "worker": "cuzk-device-cuda0/critical"}]),
    ]
    summary = stress_summary(samples)["preemptions"]
    assert summary["phases_interrupted"] == 0 and summary["partitions_overtaken"] == 1, summary


def test_stress_summary_has_percentiles_and_misses_per_kind_and_priority_and_the_preemptions() -> None:
    summary = stress_summary(porep_and_winning())
    winning = summary["by_kind"]["winning"]
    assert winning["submitted"] == 3 and winning["completed"] == 2 and winning["failed"] == 1
    assert winning["late"] == 1 and winning["deadline_misses"] == 2  # one late, one never delivered
    assert set(winning["latency_s"]) >= {"p50", "p95", "p99"} and abs(winning["latency_s"]["p50"] - 3.8) < 1e-9
    assert summary["by_kind"]["porep"]["deadline_misses"] is None  # no deadline, nothing to miss
    assert list(summary["by_priority"]) == ["CRITICAL", "HIGH", "NORMAL"]
    assert summary["by_priority"]["CRITICAL"]["deadline_misses"] == 2
    pre = summary["preemptions"]
    assert pre["partitions"] == 1 and pre["by_priority"] == {"CRITICAL": 1} and pre["partitions_overtaken"] == 1
    json.dumps(summary)


def test_the_report_prints_per_kind_percentiles_and_preemptions(capsys: Any) -> None:
    from cuzk.cli.bench_cmd import _print_report

    samples = porep_and_winning()
    record = {"mode": "stress", "params": {"what": "porep + winning"}, "summary": run_summary(samples),
              "host": {"cpu": "test", "cores": 1, "commit": ""}, "stress": stress_summary(samples)}
    _print_report(record)
    out = capsys.readouterr().out
    assert "per proof kind" in out and "per priority" in out and "p95 s" in out
    assert "winning" in out and "porep" in out
    assert "preemptions: 1 partitions (1 CRITICAL) took the device ahead of 1 lower-priority" in out
    assert "steady state per kind below (porep, winning, wpost)" in out


def test_a_mix_of_kinds_has_no_overall_seconds_per_proof_only_each_kind_its_own() -> None:
    samples = porep_and_winning()
    overall = run_summary(samples)
    assert overall["mixed_kinds"] == ["porep", "winning", "wpost"]
    assert overall["steady_state"] is None and overall["raw_s_per_proof"] is None
    assert "throughput_per_min_steady" not in overall and overall["throughput_per_min_raw"] is None
    assert overall["latency_s"]["n"] == 4 and overall["completed"] == 4  # counts and latencies stay pooled
    one_kind = run_summary([s for s in samples if s["kind"] == "winning"])
    assert "mixed_kinds" not in one_kind and one_kind["raw_s_per_proof"] is not None


def test_the_timeline_png_marks_the_preemption(tmp_path: Path, monkeypatch: Any) -> None:
    import matplotlib.axes

    marked: list[tuple[Any, ...]] = []
    plot = matplotlib.axes.Axes.plot

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("marker") == "v":
            marked.append(args)
        return plot(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    path = tmp_path / "stress.png"
    write_timeline(porep_and_winning(), path, "stress")
    assert path.stat().st_size > 0
    assert len(marked) == 1 and marked[0][0] == 1.499  # seconds since the first synthesis started (1 ms)
