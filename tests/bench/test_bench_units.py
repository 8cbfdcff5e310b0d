"""cuzk.bench without a daemon: statistics, inputs, stress specs, compare's noise, the timeline page,
and `cuzk bench local` in-process."""

from __future__ import annotations

import copy
import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest
from bench.conftest import dump_dom, run_cli

from cuzk.bench.compare import compare
from cuzk.bench.inputs import ProofInputs, from_gen_vanilla, resolve_kind
from cuzk.bench.phases import PHASES, partition_phases
from cuzk.bench.runner import arrivals, parse_stream
from cuzk.bench.stats import distribution, percentile, steady_state
from cuzk.bench.timeline import idle_gaps, spans_from_samples
from cuzk.errors import CuzkError
from cuzk.server.timeline_page import render_page


def test_percentiles_match_linear_interpolation() -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 95) == pytest.approx(4.8)
    assert percentile(values, 99) == pytest.approx(4.96)
    assert percentile([7.0], 99) == 7.0
    d = distribution(values)
    assert (d["n"], d["min"], d["max"], d["mean"]) == (5, 1.0, 5.0, 3.0)
    assert distribution([]) == {"n": 0}


def test_steady_state_needs_proofs_between_fill_and_drain() -> None:
    assert steady_state([1.0, 2.0]) is None
    s = steady_state([10.0, 11.0, 12.5, 20.0])
    assert s["proofs"] == 2 and s["window_s"] == 2.5 and s["s_per_proof"] == 1.25
    s2 = steady_state([10.0, 11.0, 12.0, 13.0, 14.0, 99.0], trim=2)
    assert s2["proofs"] == 2 and s2["window_s"] == 2.0
    with pytest.raises(ValueError):
        steady_state([1.0, 2.0, 3.0], trim=0)


def _result(partitions: list[dict[str, int]], queue: int = 3) -> dict[str, Any]:
    return {"job_id": "j", "queue_wait_ms": queue, "partitions": partitions}


def test_partition_phases_are_contiguous() -> None:
    p = {"index": 0, "planned_ms": 5, "synth_start_ms": 9, "synth_end_ms": 30, "device_queue_ms": 31,
         "device_start_ms": 40, "device_end_ms": 90, "done_ms": 95, "worker": "dev0", "synth_worker": "s0",
         "verify_us": 4000, "device_phases_us": {"h": 20000, "msm_h": 25000}}
    (row,) = partition_phases(_result([p]))
    assert list(row["phases"]) == list(PHASES)
    assert row["phases"] == {"queue": 3, "planning": 2, "synth_wait": 4, "synthesis": 21, "handoff": 1,
                             "device_queue": 9, "device": 50, "finalise": 5}
    assert sum(row["phases"].values()) == row["wall_ms"] == 95
    assert row["device_phases"] == {"h": 20.0, "msm_h": 25.0, "other": 5.0}
    assert row["verify_ms"] == 4.0


def test_kinds_and_aliases() -> None:
    assert resolve_kind("seal-commit") == ("porep", None)
    assert resolve_kind("WindowPoSt") == ("wpost", None)
    assert resolve_kind("winning-post") == ("winning", None)
    assert resolve_kind("mimc-8") == ("test", "mimc-8")
    with pytest.raises(CuzkError, match="not a proof kind"):
        resolve_kind("groth")


def test_inputs_refuse_what_can_only_fail() -> None:
    with pytest.raises(CuzkError, match="needs --c1"):
        ProofInputs("porep").check()
    with pytest.raises(CuzkError, match="needs --vanilla"):
        ProofInputs("winning").check()
    with pytest.raises(CuzkError, match="partitions must be at least 1"):
        ProofInputs("test", "mimc-3", partitions=0).check()
    with pytest.raises(CuzkError, match="randomness: needs 32 bytes"):
        ProofInputs("winning", vanilla=(b"x",), randomness=b"12").check()
    payload = json.loads(ProofInputs("test", "mimc-3", partitions=2, synth_delay_ms=5).test_payload())
    assert payload == {"test_circuit": "mimc-3", "partitions": 2, "seed": 0, "synth_delay_ms": 5}


def test_inputs_from_a_gen_vanilla_directory(tmp_path: Path) -> None:
    (tmp_path / "public.json").write_text(json.dumps({
        "kind": "winning", "registered_proof_id": 3, "sector_size": 2048, "prover_id": "e807" + "00" * 30,
        "randomness": "11" * 32}))
    (tmp_path / "winning-vanilla-7.bin").write_bytes(b"seven")
    (tmp_path / "winning-vanilla-12.bin").write_bytes(b"twelve")
    got = from_gen_vanilla(tmp_path, ProofInputs("winning"))
    assert (got.miner_id, got.registered_proof, got.sector_size, got.sector_number) == (1000, 3, 2048, 7)
    assert got.vanilla == (b"seven", b"twelve") and got.randomness == bytes([0x11]) * 32
    with pytest.raises(CuzkError, match="holds winning inputs, but -t asks for porep"):
        from_gen_vanilla(tmp_path, ProofInputs("porep"))
    with pytest.raises(CuzkError, match=r"no public\.json"):
        from_gen_vanilla(tmp_path / "missing", ProofInputs("winning"))


def test_stream_specs() -> None:
    def make(head: str, opts: dict[str, str]) -> ProofInputs:
        kind, circuit = resolve_kind(head)
        return ProofInputs(kind, circuit, partitions=int(opts.pop("partitions", "1")),
                           vanilla=(b"v",) if kind != "test" else ())

    s = parse_stream("winning,rate=0.5", make)
    assert (s.name, s.rate, s.deadline_s, s.effective_priority) == ("winning", 0.5, 30.0, "critical")
    s = parse_stream("mimc-4,rate=2,partitions=3,priority=high,deadline=1.5,name=x", make)
    assert (s.name, s.inputs.partitions, s.deadline_s, s.effective_priority) == ("x", 3, 1.5, "high")
    assert parse_stream("mimc-4", make).deadline_s is None
    for bad, message in (("mimc-4,rate=0", "rate must be > 0"), ("mimc-4,rate", "is not key=value"),
                         ("mimc-4,priority=urgent", "priority 'urgent'"), ("mimc-4,deadline=-1", "deadline"),
                         ("mimc-4,rate=fast", "is not a number"), (",rate=1", "starts with the proof kind")):
        with pytest.raises(CuzkError, match=message):
            parse_stream(bad, make)


def test_poisson_arrivals_are_seeded_and_near_the_rate() -> None:
    def make(head: str, opts: dict[str, str]) -> ProofInputs:
        return ProofInputs("test", head)

    streams = [parse_stream("mimc-3,rate=20", make), parse_stream("mimc-4,rate=5", make)]
    a = arrivals(streams, 100.0, seed=1)
    assert a == arrivals(streams, 100.0, seed=1) and a != arrivals(streams, 100.0, seed=2)
    counts = {s.name: sum(1 for _, x in a if x is s) for s in streams}
    assert 1800 < counts["mimc-3"] < 2200 and 400 < counts["mimc-4"] < 600
    assert all(0 <= t < 100 for t, _ in a) and [t for t, _ in a] == sorted(t for t, _ in a)


def _synthetic_record(rng: random.Random, runs: int, synth_scale: float = 1.0) -> dict[str, Any]:
    """A record with noisy phases: waits vary a lot, synthesis and device a little; the phases are
    independent, so scaling synthesis changes nothing else."""
    out = []
    for r in range(runs):
        samples = []
        t = 1_000_000.0 + r * 10_000
        for k in range(12):
            parts = []
            stamps = {}
            for i in range(3):
                planned = 2 + rng.randint(0, 2)
                s0 = planned + rng.randint(0, 40)
                s1 = s0 + round(200 * synth_scale * rng.uniform(0.97, 1.03))
                q = s1 + 1
                d0 = q + rng.randint(0, 30)
                d1 = d0 + round(400 * rng.uniform(0.97, 1.03))
                stamps = {"index": i, "planned_ms": planned, "synth_start_ms": s0, "synth_end_ms": s1,
                          "device_queue_ms": q, "device_start_ms": d0, "device_end_ms": d1, "done_ms": d1 + 5,
                          "worker": "dev0", "synth_worker": f"s{i}", "verify_us": 3000,
                          "device_phases_us": {"h": round((d1 - d0) * 600), "msm_h": round((d1 - d0) * 300)}}
                parts.append(stamps)
            total = stamps["done_ms"] + 2
            result = {"job_id": f"r{r}j{k}", "queue_wait_ms": 1, "total_ms": total, "partitions": parts,
                      "submitted_at_unix_ms": round(t), "proof_kind": "test-circuit"}
            samples.append({"index": k, "status": "COMPLETED", "warmup": False, "submit_unix_ms": t,
                            "end_unix_ms": t + total + 3, "latency_s": (total + 3) / 1000, "priority": "default",
                            "result": result})
            t += 500
        out.append({"samples": samples})
    return {"schema": "cuzk-bench/1", "mode": "batch", "runs": out, "params": {"trim": 1}}


@pytest.mark.parametrize("runs", [1, 3])
def test_compare_finds_the_slower_phase_with_either_noise_estimate(runs: int) -> None:
    a = _synthetic_record(random.Random(1), runs)
    b_same = _synthetic_record(random.Random(2), runs)
    b_slow = _synthetic_record(random.Random(3), runs, synth_scale=1.2)
    assert compare(a, b_same)["flagged_phases"] == []
    result = compare(a, b_slow)
    assert result["flagged_phases"] == ["synthesis"]
    noise = {r["name"]: r["noise_pct"] for r in result["phases"]}
    assert noise["synthesis"] < 5 and noise["synth_wait"] > noise["synthesis"]
    # a faster B is flagged the other way
    faster = compare(b_slow, a)
    row = next(r for r in faster["phases"] if r["name"] == "synthesis")
    assert faster["flagged_phases"] == ["synthesis"] and row["change_pct"] < -10


def test_compare_cli_refuses_non_records(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "x.json").write_text("{}")
    (tmp_path / "bad.json").write_text("{")
    assert run_cli("bench", "compare", str(tmp_path / "x.json"), str(tmp_path / "x.json")) == 2
    assert "not a cuzk bench record" in capsys.readouterr().err
    assert run_cli("bench", "compare", str(tmp_path / "bad.json"), str(tmp_path / "x.json")) == 2
    assert "not JSON" in capsys.readouterr().err


def test_idle_gaps_between_device_spans() -> None:
    spans = [{"device_worker": "d0", "device": [0, 10]}, {"device_worker": "d0", "device": [15, 20]},
             {"device_worker": "d0", "device": [18, 30]}, {"device_worker": "d1", "device": [5, 6]},
             {"device_worker": "d0", "device": None}]
    assert idle_gaps(spans) == {"d0": [(10, 15)], "d1": []}
    # two workers of one device taking turns: the device is idle only when neither computes
    shared = [{"device_worker": "gpu0/w0", "device": [0, 10]}, {"device_worker": "gpu0/w1", "device": [10, 20]},
              {"device_worker": "gpu0/w0", "device": [20, 30]}, {"device_worker": "gpu0/w1", "device": [34, 40]}]
    assert idle_gaps(shared) == {"gpu0": [(30, 34)]}


def test_page_embeds_data_that_cannot_close_its_script() -> None:
    data = spans_from_samples(_synthetic_record(random.Random(0), 1)["runs"][0]["samples"])
    data["spans"][0]["job_id"] = "</script><script>alert(1)</script>"
    page = render_page("t <b>", data=data)
    assert "</script><script>alert" not in page and "t &lt;b&gt;" in page
    embedded = re.search(r'id="timeline-data">(.*?)</script>', page, re.S).group(1)
    assert json.loads(embedded) == data


def test_bench_local_in_process(tmp_path: Path) -> None:
    out = tmp_path / "local.json"
    html = tmp_path / "local.html"
    code = run_cli("bench", "local", "-t", "mimc-3", "--partitions", "2", "-c", "3", "--warmup", "1",
                   "--threads", "1", "--param-cache", str(tmp_path / "params"), "--json", str(out),
                   "--timeline", str(html), "--no-progress")
    assert code == 0
    record = json.loads(out.read_text())
    s = record["summary"]
    assert record["mode"] == "local" and record["daemon"] is None
    assert (s["submitted"], s["completed"], s["failed"], s["partitions"]) == (3, 3, 0, 6)
    assert s["steady_state"]["proofs"] == 1
    for sample in record["runs"][0]["samples"]:
        for row in partition_phases(sample["result"]):
            assert abs(sum(row["phases"].values()) - row["wall_ms"]) <= 0.05 * row["wall_ms"] + 1
            assert row["device_phases"]
    dom = dump_dom(html.as_uri())
    assert len(re.findall(r'class="partition device', dom)) == 8  # the warm-up is drawn too


def test_cli_errors_name_the_problem(tmp_path: Path, capsys: Any) -> None:
    cases = [
        (["bench", "local", "-t", "porep"], "needs --c1"),
        (["bench", "local", "-t", "mimc-3", "--timeline", str(tmp_path / "x.svg")], "must end in .png or .html"),
        (["bench", "local", "-t", "mimc-3", "-c", "0"], "--count must be at least 1"),
        (["bench", "local", "-t", "mimc-3", "--gen-vanilla", "2KiB"], "--gen-vanilla needs --inputs"),
        (["bench", "local", "-t", "mimc-3", "--randomness", "zz"], "--randomness: not hex"),
        (["bench", "batch", "-t", "mimc-3", "-j", "0", "--addr", "unix:///nonexistent"], "concurrency must be"),
    ]
    for argv, message in cases:
        assert run_cli(*argv) == 2, argv
        assert message in capsys.readouterr().err, argv


def test_record_is_json_with_hardware_and_commit(tmp_path: Path) -> None:
    from cuzk.bench.record import host_info

    info = host_info()
    assert info["cores"] >= 1 and info["memory_bytes"] > 0 and info["python"]
    assert re.fullmatch(r"([0-9a-f]{40}(\+dirty)?)?", info["commit"])
    assert "declared_commit" not in info or os.environ.get("CUZK_COMMIT")
    json.dumps(copy.deepcopy(info))


def test_a_declared_commit_is_recorded_beside_gits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A device copy's git metadata can be older than its files: the runner's CUZK_COMMIT goes beside it."""
    from cuzk.bench.record import host_info

    monkeypatch.setenv("CUZK_COMMIT", "c7c439d")
    info = host_info()
    assert info["declared_commit"] == "c7c439d" and "commit" in info


def test_overlapping_device_phases_get_no_false_other() -> None:
    """Sub-phases that overlap in time (a GPU backend's copy-stream times beside its kernels) sum to
    more than the device phase: no remainder exists, so `other` is left out instead of shown as 0."""
    from cuzk.bench.phases import partition_phases

    result = {"job_id": "j", "queue_wait_ms": 1, "partitions": [{
        "index": 0, "planned_ms": 2, "synth_start_ms": 3, "synth_end_ms": 10, "device_queue_ms": 11,
        "device_start_ms": 12, "device_end_ms": 62, "done_ms": 70,
        "device_phases_us": {"device": 48000, "h2d_abc": 30000, "h": 20000}}]}
    (row,) = partition_phases(result)
    assert row["phases"]["device"] == 50.0
    assert row["device_phases"] == {"device": 48.0, "h": 20.0, "h2d_abc": 30.0}


def test_run_batch_submits_nothing_past_max_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each proof takes one second of a fake clock: a 2.5 s bound lets the warm-up and two measured
    # proofs start, and the run returns those three samples, all completed.
    import cuzk.bench.runner as runner

    now = [0.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(runner, "result_record", lambda reply: {"status": "COMPLETED", "error": ""})

    class Client:
        def submit(self, request: object) -> Any:
            return type("Reply", (), {"job_id": "j"})()

        def await_proof(self, job_id: str, timeout_ms: int, rpc_timeout: object = None) -> object:
            now[0] += 1.0
            return object()

    samples = runner.run_batch(Client(), ProofInputs("test", "mimc-3"), count=5, warmup=1, max_seconds=2.5)
    assert [s["index"] for s in samples] == [-1, 0, 1]
    assert all(s["status"] == "COMPLETED" for s in samples)
    with pytest.raises(CuzkError, match="--max-seconds must be > 0"):
        runner.run_batch(Client(), ProofInputs("test", "mimc-3"), count=1, max_seconds=0)


def test_cuda_overlap_benchmark_on_the_emulated_device(tmp_path: Path) -> None:
    """benchmarks/cuda/bench_cuda_overlap.py runs (H and an MSM at once, each checked against alone)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "cuda" / "bench_cuda_overlap.py"
    out = tmp_path / "overlap.json"
    env = {**os.environ, "CUZK_EMULATED_GPUS": "1GiB"}
    subprocess.run([sys.executable, str(script), "--log", "8", "--reps", "1", "--pool", "8", "--out", str(out)],
                   env=env, check=True, capture_output=True, timeout=300)
    rows = json.loads(out.read_text())["results"]
    assert [(r["log_n"], r["msm"], r["msm_log_n"]) for r in rows] == [(8, "l", 8), (8, "dense", 8), (8, "g2", 6)]
    for r in rows:
        med = r["median_ms"]
        assert med["h"] > 0 and med["msm"] > 0 and med["both"] > 0
        assert r["hidden_ms"] == round(med["h"] + med["msm"] - med["both"], 3)
    # H's NTT passes on 3 blocks, fewer than their tiles at 2^12 (each block loops): the benchmark checks
    # that H comes out as the uncapped passes give it.
    subprocess.run([sys.executable, str(script), "--log", "12", "--reps", "1", "--pool", "8", "--kinds", "l",
                    "--ntt-blocks", "3", "--out", str(out)], env=env, check=True, capture_output=True, timeout=300)
    rows = json.loads(out.read_text())["results"]
    assert [(r["log_n"], r["msm"], r["ntt_blocks"]) for r in rows] == [(12, "l", 3)]
