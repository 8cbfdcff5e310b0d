"""The engine with real worker processes: results, order, failures, cancel, timeouts, idempotency,
priorities, memory backpressure and release, listeners."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from engine.engine_helpers import assert_verifies, make_request, start_engine, wait_until

from cuzk.engine.engine import Engine, RequestConflictError, UnknownJobError
from cuzk.engine.jobs import JobResult, JobState, PartitionState, Priority, ProofKind, ProofRequest, ResultStatus
from cuzk.engine.providers import InvalidRequestError


class Recorder:
    def __init__(self) -> None:
        self.accepted: list[str] = []
        self.finished: list[tuple[str, ResultStatus]] = []

    def job_accepted(self, job: object) -> None:
        self.accepted.append(job.job_id)  # type: ignore[attr-defined]

    def job_finished(self, job: object, result: JobResult) -> None:
        self.finished.append((job.job_id, result.status))  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, debug_params: Path) -> Engine:
    e = start_engine(tmp_path_factory.mktemp("engine"), debug_params)
    e.recorder = Recorder()  # type: ignore[attr-defined]
    e.add_listener(e.recorder)  # type: ignore[attr-defined]
    yield e
    e.shutdown(0)


def run(engine: Engine, rid: str, circuit: str = "mimc-3", **payload: object) -> JobResult:
    engine.submit(make_request(rid, circuit, **payload))
    result = engine.await_result(rid, 60)
    assert result is not None
    return result


def idle(engine: Engine) -> bool:
    s = engine.status()
    return s["counters"]["active_jobs"] == 0 and s["buffers"]["shared_segments"] == 0 and s["synthesis"]["active"] == 0


def test_multi_partition_proofs_come_back_in_order_and_verify(engine: Engine, debug_params: Path) -> None:
    result = run(engine, "order", "mimc-3", partitions=4, seed=40)
    assert_verifies(result, debug_params, "mimc-3", seed=40, partitions=4)
    assert [p.index for p in result.partitions] == [0, 1, 2, 3]
    for p in result.partitions:
        assert p.synth_start_ms <= p.synth_end_ms <= p.device_queue_ms <= p.device_start_ms <= p.device_end_ms
        assert p.worker.startswith("cuzk-device-cpu0/w")
    t = result.timings
    assert t.total_ms >= t.queue_wait_ms and t.verify_ms >= 0 and result.circuit_id == "mimc-3"
    assert result.submitted_at_unix_ms <= result.started_at_unix_ms <= result.finished_at_unix_ms
    other = run(engine, "other-circuit", "bits-1", partitions=2, seed=3)
    assert_verifies(other, debug_params, "bits-1", seed=3, partitions=2)


def test_failures_fail_only_their_job(engine: Engine, debug_params: Path) -> None:
    cases = {
        "error": "synthesis failed: SynthesisError: injected synthesis failure",
        "crash": "synthesis failed: worker process cuzk-synth-",
        "prove": "proving failed: KeyMismatchError",
        "unverifiable": "the proof did not verify",
    }
    for mode, message in cases.items():
        result = run(engine, f"fail-{mode}", partitions=3, fail_partition=1, fail_mode=mode)
        assert result.status is ResultStatus.FAILED and message in result.error and "partition 1" in result.error
    # A process that dies while filling a segment leaves none behind (removed with the dead process).
    result = run(engine, "fail-crash-filling", partitions=2, fail_partition=0, fail_mode="crash_filling")
    assert result.status is ResultStatus.FAILED and "synthesis failed: worker process cuzk-synth-" in result.error
    wait_until(lambda: all(p.alive for p in engine.synthesis.processes), 60, "the synthesis process to be restarted")
    # The dead process may have made the other partition's witness before it died: a lane holds that
    # segment until it sees the job failed, so the check waits for the lanes rather than racing them.
    wait_until(lambda: not [n for n in os.listdir("/dev/shm") if n.startswith(f"cuzk_{os.getpid()}_")
                            and n.split("_")[2] not in {str(p.pid) for p in engine.synthesis.processes}], 30,
               "no segment of a dead synthesis process left")
    assert_verifies(run(engine, "after-failures", seed=9), debug_params, seed=9)
    wait_until(lambda: idle(engine), what="the failed jobs' work to drain")


def test_idempotent_request_ids(engine: Engine, debug_params: Path) -> None:
    first = engine.submit(make_request("same", synth_delay_ms=300, seed=1))
    again = engine.submit(make_request("same", synth_delay_ms=300, seed=1))
    assert not first.deduplicated and again.deduplicated and again.job_id == "same"
    with pytest.raises(RequestConflictError, match="different inputs"):
        engine.submit(make_request("same", seed=2))
    result = engine.await_result("same", 60)
    assert_verifies(result, debug_params, seed=1)
    assert engine.submit(make_request("same", synth_delay_ms=300, seed=1)).deduplicated
    assert engine.await_result("same", 5).proof == result.proof  # never a second proof
    # A finished job's id may be reused for new inputs, and a failed job is retried on resubmission.
    assert not engine.submit(make_request("same", seed=2)).deduplicated
    assert_verifies(engine.await_result("same", 60), debug_params, seed=2)
    failed = run(engine, "retry", fail_partition=0)
    assert failed.status is ResultStatus.FAILED
    assert not engine.submit(make_request("retry", fail_partition=0)).deduplicated
    assert engine.await_result("retry", 60).status is ResultStatus.FAILED
    assert engine.metrics.deduplicated._value.get() >= 2


def test_await_timeout_leaves_the_job_running(engine: Engine) -> None:
    engine.submit(make_request("slow", synth_delay_ms=3000))
    start = time.monotonic()
    early = engine.await_result("slow", 0.2)
    assert early.status is ResultStatus.TIMEOUT and "still in progress" in early.error
    assert 0.15 <= time.monotonic() - start < 2.5
    assert engine.await_result("slow", 60).status is ResultStatus.COMPLETED
    with pytest.raises(UnknownJobError):
        engine.await_result("never-submitted", 1)
    stop = threading.Event()
    engine.submit(make_request("stopped", synth_delay_ms=500))
    threading.Timer(0.1, stop.set).start()
    assert engine.await_result("stopped", None, stop) is None  # the caller went away


def test_cancel_running_and_queued_jobs_frees_memory(engine: Engine) -> None:
    wait_until(lambda: idle(engine), what="an idle engine")
    baseline = engine.budget.used
    running = [f"run-{k}" for k in range(1, engine.window + 1)]  # the window: the regular lanes + 1 lookahead
    for rid in running:
        engine.submit(make_request(rid, partitions=6, synth_delay_ms=400))
    engine.submit(make_request("queued", synth_delay_ms=400))
    wait_until(lambda: engine.status()["synthesis"]["active"] > 0, what="synthesis to start")
    assert engine.jobs["queued"].state is JobState.QUEUED  # the window is full
    assert engine.cancel("queued") is False
    assert engine.await_result("queued", 5).status is ResultStatus.CANCELLED
    assert engine.cancel("run-1") is True
    result = engine.await_result("run-1", 5)
    assert result.status is ResultStatus.CANCELLED and result.error == "cancelled by request"
    for rid in running[1:]:
        engine.cancel(rid)
    assert engine.cancel("run-1") is False  # already finished: left as it is
    wait_until(lambda: idle(engine), what="in-flight partitions to come back")
    assert engine.budget.used == baseline
    assert all(e["ref_count"] == 0 for e in engine.srs.snapshot())
    with pytest.raises(UnknownJobError):
        engine.cancel("nope")


def test_prove_disconnect_policy(engine: Engine, debug_params: Path) -> None:
    try:
        engine.config.daemon.on_prove_disconnect = "cancel"
        out = engine.submit(make_request("gone", synth_delay_ms=500), origin="prove")
        engine.attach_prove_waiter(out.job_id)
        engine.detach_prove_waiter(out.job_id, disconnected=True)
        assert engine.await_result("gone", 5).status is ResultStatus.CANCELLED
        # A second caller still waiting keeps the job alive.
        engine.submit(make_request("shared", synth_delay_ms=300), origin="prove")
        engine.attach_prove_waiter("shared")
        engine.attach_prove_waiter("shared")
        engine.detach_prove_waiter("shared", disconnected=True)
        assert_verifies(engine.await_result("shared", 60), debug_params)
        engine.config.daemon.on_prove_disconnect = "finish"
        engine.submit(make_request("kept", synth_delay_ms=200, seed=4), origin="prove")
        engine.attach_prove_waiter("kept")
        engine.detach_prove_waiter("kept", disconnected=True)
        assert_verifies(engine.await_result("kept", 60), debug_params, seed=4)
    finally:
        engine.config.daemon.on_prove_disconnect = "finish"


def test_critical_jobs_start_before_queued_normal_ones(engine: Engine) -> None:
    wait_until(lambda: idle(engine), what="an idle engine")
    normals = [f"normal-{k}" for k in range(6)]
    for rid in normals:
        engine.submit(make_request(rid, partitions=2, synth_delay_ms=300))
    engine.submit(make_request("critical", priority=Priority.CRITICAL))
    results = {rid: engine.await_result(rid, 60) for rid in [*normals, "critical"]}
    crit = results["critical"]
    assert crit.status is ResultStatus.COMPLETED
    queued = [r for r in normals if results[r].started_at_unix_ms > results[normals[0]].started_at_unix_ms + 100]
    assert queued, "some NORMAL jobs had to wait in the queue"
    assert all(crit.started_at_unix_ms <= results[r].started_at_unix_ms for r in queued)
    assert all(crit.finished_at_unix_ms <= results[r].finished_at_unix_ms for r in queued)


def test_memory_backpressure_and_impossible_jobs(engine: Engine) -> None:
    wait_until(lambda: idle(engine), what="an idle engine")
    half = engine.budget.available // 2 + (1 << 20)  # two such partitions cannot be held at once
    engine.submit(make_request("big-1", partition_memory=half, synth_delay_ms=300))
    engine.submit(make_request("big-2", partition_memory=half, synth_delay_ms=300))
    one, two = engine.await_result("big-1", 60), engine.await_result("big-2", 60)
    assert one.status is two.status is ResultStatus.COMPLETED
    first, second = sorted((one, two), key=lambda r: r.partitions[0].synth_start_ms + r.submitted_at_unix_ms)
    assert second.submitted_at_unix_ms + second.partitions[0].synth_start_ms >= (
        first.submitted_at_unix_ms + first.partitions[0].device_end_ms - 5), "the second waited for the first's memory"
    assert engine.budget.peak <= engine.budget.total
    huge = run(engine, "huge", partition_memory=engine.budget.total)
    assert huge.status is ResultStatus.FAILED and "can never give more than" in huge.error
    # A partition that fits the budget alone but not beside its own key (held while the job runs) is
    # refused too, where it used to wait for memory forever with every job behind it.
    beside = run(engine, "beside-its-key", partition_memory=engine.budget.usable - 64)
    assert beside.status is ResultStatus.FAILED, beside.status
    assert "beside the" in beside.error and "its key holds" in beside.error, beside.error
    assert run(engine, "after-beside").status is ResultStatus.COMPLETED


def test_invalid_requests_are_refused_at_submit(engine: Engine) -> None:
    with pytest.raises(InvalidRequestError, match="unknown circuit"):
        engine.submit(make_request("bad", "nope-1"))
    with pytest.raises(InvalidRequestError, match="carries no payload"):
        engine.submit(ProofRequest("bare", ProofKind.TEST))
    with pytest.raises(InvalidRequestError, match="request_id may not contain"):
        engine.submit(make_request("has space"))
    assert "bad" not in engine.jobs


def test_listeners_status_and_metrics(engine: Engine) -> None:
    wait_until(lambda: ("after-failures", ResultStatus.COMPLETED) in engine.recorder.finished, what="events")  # type: ignore[attr-defined]
    assert "order" in engine.recorder.accepted  # type: ignore[attr-defined]
    status = engine.status()
    assert status["devices"][0]["kind"] == "cpu"
    # A CPU has no device memory pool nor driver to count it
    assert [status["devices"][0][f"memory_{k}"] for k in ("pool_used", "pool_held", "driver_used")] == [None] * 3
    # gpus.gpu_workers_per_device (2) regular lanes that prove, one more per synthesis process (they
    # synthesize while the others prove), and the device's lane for CRITICAL work.
    lanes = 2 + len(engine.synthesis.regular)
    assert [w["reserved_for"] for w in status["gpu_workers"]] == [None] * lanes + ["CRITICAL"]
    assert [w["reserved_for"] for w in status["synthesis"]["workers"]][-1] == "CRITICAL"
    assert status["memory"]["baseline_bytes"] > 0 and status["counters"]["total_completed"] > 0
    assert {q["proof_kind"] for q in status["queues"]} >= {"porep-c2", "winning-post", "test-circuit"}
    # compiled circuits: the default store (use files when present, never build), nothing compiled yet
    assert status["compiled_circuits"]["enabled"] and not status["compiled_circuits"]["auto_build"]
    assert status["compiled_circuits"]["root"] == str(Path(engine.config.srs.param_cache) / "compiled")
    text = engine.metrics_text()
    assert "cuzk_proofs_completed_total" in text and 'cuzk_partition_stage_seconds_count{stage="device"}' in text


def test_a_device_process_killed_between_proofs_is_restarted_before_the_next_job(engine: Engine,
                                                                                  debug_params: Path) -> None:
    """Found dead by the housekeeper, not by the next job: that job's key load used to fail it and
    restart nothing, so every later job failed the same way (the soak found it)."""
    assert run(engine, "before-kill", "bits-1", partitions=2, seed=60).status is ResultStatus.COMPLETED
    wait_until(lambda: idle(engine), 30, "the engine to be idle")
    engine.evict_srs("bits-1")  # the next job loads its key again: the control request a dead device fails
    device = engine.executor.devices[0]
    pid, restarts = device.pid, device.restarts
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # the executor's own record of its device process, not a name lookup
    wait_until(lambda: device.restarts > restarts and device.alive, 60, "the device to be restarted")
    assert device.pid != pid and "found dead while idle" in device.last_failure[1]
    result = run(engine, "after-kill", "bits-1", partitions=2, seed=62)
    assert_verifies(result, debug_params, "bits-1", seed=62, partitions=2)


def test_a_partition_holds_its_synthesis_memory_until_the_executor_reports_it_synthesized(engine: Engine) -> None:
    """The executor synthesizes and proves (`Executor.prove`); the synthesis part of the partition's
    reservation goes when it reports the synthesis done, the rest when the proof is back."""
    wait_until(lambda: idle(engine), what="an idle engine")
    engine.submit(make_request("two-step", synth_delay_ms=1500, device_delay_ms=1500))
    job = engine.jobs["two-step"]
    wait_until(lambda: bool(job.partitions) and job.partitions[0].state is PartitionState.SYNTHESIZING,
               what="the partition in synthesis")
    record = job.partitions[0]
    synthesizing = engine.budget.by_label().get("partition", 0)
    wait_until(lambda: record.state is PartitionState.PROVING, what="the partition on the device")
    proving = engine.budget.by_label().get("partition", 0)
    assert 0 < proving < synthesizing
    assert engine.await_result("two-step", 60).status is ResultStatus.COMPLETED
    wait_until(lambda: idle(engine), what="the partition to come back")
    assert engine.budget.by_label().get("partition", 0) == 0
