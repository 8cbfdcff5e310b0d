"""`cuzk bench` against a live daemon on the CPU backend with test circuits: the numbers are consistent,
the timeline is drawn from the run, the daemon's live page renders in headless Chromium."""

from __future__ import annotations

import copy
import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from bench.conftest import dump_dom, run_cli
from server.conftest import LiveDaemon

from cuzk.bench.compare import compare
from cuzk.bench.inputs import ProofInputs
from cuzk.bench.phases import PHASES, partition_phases
from cuzk.bench.runner import StreamSpec, run_stress, stress_summary
from cuzk.bench.stats import run_summary, steady_state
from cuzk.server.client import CuzkClient


def _completed(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for run in record["runs"] for s in run["samples"] if s["status"] == "COMPLETED" and not s["warmup"]]


def test_batch_counts_and_daemon_identity(batch_run: dict[str, Any], bench_daemon: LiveDaemon) -> None:
    record = batch_run["record"]
    assert batch_run["code"] == 0
    assert record["mode"] == "batch"
    s = record["summary"]
    assert s["submitted"] == 10  # 2 repetitions x 5; the warm-ups are not counted
    assert s["completed"] + s["failed"] == s["submitted"]
    assert s["completed"] == 10 and s["failures"] == {}
    for run in record["runs"]:
        assert run["summary"]["completed"] + run["summary"]["failed"] == run["summary"]["submitted"] == 5
        assert sum(x["warmup"] for x in run["samples"]) == 1
    with CuzkClient(bench_daemon.unix_addr) as client:
        info = client.info()
    assert record["daemon"]["instance_id"] == info.instance_id
    assert record["daemon"]["config_fingerprint"] == info.config_fingerprint
    assert record["daemon"]["version"] == info.version
    assert record["daemon"]["backend"] == "cpu"
    assert record["daemon"]["devices"][0]["kind"] == "cpu"
    assert record["host"]["cores"] >= 1 and record["host"]["cpu"]
    assert "warning" not in record


def test_phases_tile_each_partitions_wall_time(batch_run: dict[str, Any]) -> None:
    samples = _completed(batch_run["record"])
    partitions = 0
    for sample in samples:
        result = sample["result"]
        assert len(result["partitions"]) == 2
        for row in partition_phases(result):
            partitions += 1
            phases = row["phases"]
            assert set(phases) == set(PHASES)
            assert all(v >= 0 for v in phases.values()), phases
            wall = row["wall_ms"]
            assert wall > 0
            assert abs(sum(phases.values()) - wall) <= 0.05 * wall, (phases, wall)
            # synthesis includes the injected 40 ms; the device time is split by the backend's own timer
            assert phases["synthesis"] >= 40
            assert row["device_phases"], "the CPU backend reports its sub-phases"
            assert sum(row["device_phases"].values()) <= phases["device"] + 1
            assert {"h", "msm_h", "msm_l", "msm_a", "msm_b_g1", "msm_b_g2"} <= set(row["device_phases"])
        # the partitions' walls fit inside the job, and the job inside the client's latency
        assert max(p["done_ms"] for p in result["partitions"]) <= result["total_ms"]
        assert result["total_ms"] <= sample["latency_s"] * 1000 + 2
    assert partitions == 20


def test_steady_state_excludes_the_first_and_last_proof(batch_run: dict[str, Any]) -> None:
    record = batch_run["record"]
    for run in record["runs"]:
        ends = sorted(s["end_unix_ms"] / 1000 for s in run["samples"]
                      if s["status"] == "COMPLETED" and not s["warmup"])
        steady = run["summary"]["steady_state"]
        assert steady["proofs"] == len(ends) - 2 == 3
        assert steady["excluded_first"] == steady["excluded_last"] == 1
        assert abs(steady["window_s"] - (ends[-2] - ends[0])) < 1e-9
        assert abs(steady["s_per_proof"] - (ends[-2] - ends[0]) / 3) < 1e-9
        # recomputing from the samples gives the stored summary
        assert run_summary(run["samples"])["steady_state"] == steady
        # the fill (submit to first completion) and the drain (the last completion) do not count:
        # a slower last proof, or an earlier first submission, changes raw s/proof but not this
        assert steady_state([*ends[:-1], ends[-1] + 100]) == steady_state(ends)
        early = [dict(x) for x in run["samples"]]
        first = min((x for x in early if not x["warmup"]), key=lambda x: x["submit_unix_ms"])
        first["submit_unix_ms"] -= 100_000
        assert run_summary(early)["steady_state"] == steady
        assert run_summary(early)["raw_s_per_proof"] > run["summary"]["raw_s_per_proof"] + 10
        raw = run["summary"]["raw_s_per_proof"]
        assert raw == run["summary"]["wall_s"] / 5


def test_timeline_png_from_the_run(batch_run: dict[str, Any]) -> None:
    import matplotlib.image

    png = batch_run["dir"] / "batch.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(png)
    assert image.shape[0] > 150 and image.shape[1] > 800
    # the chart is not blank: both span colours are present
    pixels = {tuple(round(c * 255) for c in px[:3]) for px in image.reshape(-1, image.shape[-1])[::7]}
    assert (0x4E, 0x79, 0xA7) in pixels, "synthesis spans drawn"
    assert (0xF2, 0x8E, 0x2B) in pixels, "device spans drawn"


def test_compare_flags_an_injected_phase_slowdown_and_nothing_else(batch_run: dict[str, Any]) -> None:
    a = batch_run["record"]
    same = compare(a, copy.deepcopy(a))
    assert same["flagged_phases"] == [] and same["flagged_totals"] == []
    b = copy.deepcopy(a)
    for run in b["runs"]:
        for sample in run["samples"]:
            result = sample["result"]
            for p in result["partitions"]:
                extra = round(0.2 * (p["synth_end_ms"] - p["synth_start_ms"]))
                for key in ("synth_end_ms", "device_queue_ms", "device_start_ms", "device_end_ms", "done_ms"):
                    p[key] += extra
    result = compare(a, b)
    assert result["flagged_phases"] == ["synthesis"], result["phases"]
    row = next(r for r in result["phases"] if r["name"] == "synthesis")
    assert 15 < row["change_pct"] < 25
    # the noise is the spread of the two repetitions' medians: a sleep-dominated phase barely varies
    assert row["noise_pct"] is not None and row["noise_pct"] < 20 / 3
    # the same records through the CLI
    out = batch_run["dir"]
    (out / "b.json").write_text(json.dumps(b))
    assert run_cli("bench", "compare", str(out / "batch.json"), str(out / "b.json"), "--json",
                   str(out / "cmp.json")) == 0
    assert json.loads((out / "cmp.json").read_text())["flagged_phases"] == ["synthesis"]


def test_stress_reports_deadline_misses_per_priority(bench_daemon: LiveDaemon, tmp_path: Path) -> None:
    code = run_cli("bench", "stress", "--addr", bench_daemon.unix_addr, "--duration", "3", "--arrival-seed", "3",
                   "--stream", "mimc-3,rate=1.5,priority=critical,deadline=30,name=winning-like",
                   "--stream", "mimc-4,rate=1.5,partitions=2,name=porep-like",
                   "--stream", "mimc-3,rate=1,deadline=0.001,name=impossible",
                   "--json", str(tmp_path / "stress.json"), "--timeline", str(tmp_path / "stress.html"),
                   "--no-progress")
    record = json.loads((tmp_path / "stress.json").read_text())
    assert code == 0
    samples = record["runs"][0]["samples"]
    summary = record["summary"]
    assert summary["completed"] + summary["failed"] == summary["submitted"] == len(samples) > 0
    by_priority = record["stress"]["by_priority"]
    assert set(by_priority) <= {"CRITICAL", "NORMAL"}
    for name, group in by_priority.items():
        assert group["completed"] + group["failed"] == group["submitted"], name
    streams = record["stress"]["by_stream"]
    impossible = streams.get("impossible")
    if impossible is not None:  # Poisson arrivals: the seed gives this stream arrivals, but check anyway
        assert impossible["late"] == impossible["completed"] and impossible["deadline_misses"] == impossible[
            "submitted"]
        assert by_priority["NORMAL"]["deadline_misses"] >= impossible["submitted"]
    if "winning-like" in streams:
        assert by_priority["CRITICAL"]["deadline_misses"] == 0
        assert streams["winning-like"]["deadline_s"] == [30.0]
    assert streams["porep-like"]["deadline_misses"] is None  # no deadline, nothing to miss
    by_kind = record["stress"]["by_kind"]
    assert sum(g["submitted"] for g in by_kind.values()) == summary["submitted"]
    assert all({"p50", "p95", "p99"} <= set(g["latency_s"]) for g in by_kind.values() if g["completed"])
    assert record["stress"]["preemptions"]["partitions"] >= 0
    # Each group's own throughput and device time, from its samples
    for name, group in streams.items():
        done = [x for x in samples if x["stream"] == name and x["status"] == "COMPLETED"]
        device_s = sum(p["device_end_ms"] - p["device_start_ms"] for x in done for p in x["result"]["partitions"]) / 1e3
        assert group["device_s"] == pytest.approx(device_s, abs=1e-3), name
        assert group["device_s"] > 0 or not done, name
        steady = group["steady_state"]
        assert (steady is None) == (len(done) < 3), name
        if steady is not None:
            ends = sorted(x["end_unix_ms"] / 1e3 for x in done)
            assert steady["proofs"] == len(done) - 2
            assert steady["s_per_proof"] == pytest.approx((ends[-2] - ends[0]) / (len(done) - 2))
    html = (tmp_path / "stress.html").read_text()
    assert 'id="timeline-data"' in html


def test_stress_counts_failed_proofs(bench_daemon: LiveDaemon) -> None:
    failing = ProofInputs("test", "mimc-3", partitions=2, extra={"fail_partition": 1})
    good = ProofInputs("test", "mimc-3")
    with CuzkClient(bench_daemon.unix_addr, timeout=30) as client:
        samples = run_stress(client, [StreamSpec("bad", failing, 3.0, "high", 10.0),
                                      StreamSpec("good", good, 3.0, "critical", 10.0)], duration_s=1.5, seed=5)
    summary = stress_summary(samples)
    high, critical = summary["by_priority"]["HIGH"], summary["by_priority"]["CRITICAL"]
    assert high["submitted"] > 0 and high["failed"] == high["submitted"] == high["deadline_misses"]
    assert critical["failed"] == 0 and critical["completed"] == critical["submitted"]
    assert all("synthesis failed" in s["error"] for s in samples if s["stream"] == "bad")
    totals = run_summary(samples)
    assert totals["completed"] + totals["failed"] == totals["submitted"] == len(samples)
    assert sum(totals["failures"].values()) == totals["failed"]


def test_single_prints_partition_phases(bench_daemon: LiveDaemon, capsys: Any) -> None:
    assert run_cli("bench", "single", "--addr", bench_daemon.unix_addr, "-t", "mimc-3", "--partitions", "3",
                   "--no-progress") == 0
    out = capsys.readouterr().out
    assert "phases per partition" in out and "synthesis" in out
    assert re.search(r"completed 1, failed 0", out)


def test_expect_config_refuses_another_configuration(bench_daemon: LiveDaemon, capsys: Any) -> None:
    code = run_cli("bench", "batch", "--addr", bench_daemon.unix_addr, "-t", "mimc-3", "-c", "1",
                   "--expect-config", "0" * 16, "--no-progress")
    assert code == 2
    assert "refusing to run" in capsys.readouterr().err


def test_live_status_page_renders_partitions_in_chromium(batch_run: dict[str, Any], bench_daemon: LiveDaemon) -> None:
    with urllib.request.urlopen(f"http://{bench_daemon.http_addr}/timeline.json?window=600") as reply:
        data = json.loads(reply.read())
    assert data["device_workers"] and data["synth_workers"]
    finished = [s for s in data["spans"] if s["device"] and s["device"][1] is not None]
    assert len(finished) >= 20  # at least the batch's measured partitions
    for bad in ("0", "x", "1e9"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://{bench_daemon.http_addr}/timeline.json?window={bad}")
        assert err.value.code == 400
    dom = dump_dom(f"http://{bench_daemon.http_addr}/status.html?window=600")
    drawn = re.findall(r'<rect [^>]*class="partition (synth|device)', dom)
    assert drawn.count("device") >= len(finished)
    assert drawn.count("synth") >= len(finished)
    jobs_on_page = set(re.findall(r'data-job="([^"]+)"', dom))
    batch_jobs = {s["job_id"] for s in _completed(batch_run["record"])}
    assert batch_jobs <= jobs_on_page


def test_bench_html_timeline_renders_in_chromium(bench_daemon: LiveDaemon, tmp_path: Path) -> None:
    html = tmp_path / "run.html"
    assert run_cli("bench", "batch", "--addr", bench_daemon.unix_addr, "-t", "mimc-3", "--partitions", "3",
                   "-c", "2", "--warmup", "0", "--timeline", str(html), "--json", str(tmp_path / "r.json"),
                   "--no-progress") == 0
    dom = dump_dom(html.as_uri())
    assert len(re.findall(r'class="partition synth', dom)) == 6
    assert len(re.findall(r'class="partition device', dom)) == 6
    assert re.search(r'<td id="drawn">12</td>', dom)


def test_gen_vanilla_inputs_reach_the_daemon(bench_daemon: LiveDaemon, tmp_path: Path) -> None:
    """`--gen-vanilla 2KiB --inputs DIR` writes WinningPoSt inputs and proves them; this daemon has no
    winning-2k parameters, so the proof fails, is counted, and the reason names the missing file."""
    inputs = tmp_path / "win"
    code = run_cli("bench", "single", "--addr", bench_daemon.unix_addr, "-t", "winning", "--gen-vanilla", "2KiB",
                   "--inputs", str(inputs), "--json", str(tmp_path / "w.json"), "--no-progress")
    assert (inputs / "public.json").exists()
    record = json.loads((tmp_path / "w.json").read_text())
    (sample,) = record["runs"][0]["samples"]
    assert code == 1 and sample["status"] == "FAILED"
    assert record["summary"]["failed"] == record["summary"]["submitted"] == 1
    assert "winning" in sample["error"] and ".params" in sample["error"], sample["error"]
    assert record["summary"]["failures"] == {f"FAILED: {sample['error']}": 1}


def test_batch_max_seconds_keeps_the_samples_it_has(bench_daemon: LiveDaemon, tmp_path: Path) -> None:
    # A bound no proof can meet leaves every proof out, and the record says so; the exit code is 0
    # (nothing that was submitted failed), so a caller goes on to its next step.
    out = tmp_path / "cut.json"
    code = run_cli("bench", "batch", "--addr", bench_daemon.unix_addr, "-t", "mimc-3", "-c", "3", "--warmup", "0",
                   "--max-seconds", "1e-9", "--json", str(out), "--no-progress")
    record = json.loads(out.read_text())
    assert code == 0
    assert record["stopped"] == {"max_seconds": 1e-9, "proofs_left_out": 3}
    assert "3 of 3 proofs were not submitted" in record["warning"]
    assert record["summary"]["submitted"] == 0

