"""Several devices on one host, with CPU devices (each its own process, one thread): one proof's
partitions spread over every device (latency mode) or stay on one (throughput mode), a device process
killed mid-job gives its partition to another device (the job completes, every partition proven
once and verified, the status names the failed device), and CRITICAL work still goes first. Every
claim is read from the partitions' records, never from how long anything took."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from engine.engine_helpers import assert_verifies, make_request, start_engine, wait_until

from cuzk.engine.engine import Engine
from cuzk.engine.jobs import PartitionState, Priority, ResultStatus

#: How long each partition holds its device: long beside a test circuit's hand-over, so that
#: partitions queued together are on the devices at the same time.
HOLD_MS = 300


def devices_of(engine: Engine, job_id: str) -> list[str]:
    """The device (its worker's name) that proved each partition of a job."""
    return [p.device_worker.split("/")[0] for p in engine.jobs[job_id].partitions]


@pytest.fixture(scope="module")
def engine3(tmp_path_factory: pytest.TempPathFactory, debug_params: Path) -> Engine:
    e = start_engine(tmp_path_factory.mktemp("three"), debug_params,
                     gpus={"backend": "cpu", "devices": [0, 1, 2], "gpu_threads": 1, "gpu_workers_per_device": 1})
    yield e
    e.shutdown(0)


def test_one_proofs_partitions_run_on_every_device(engine3: Engine, debug_params: Path) -> None:
    names = [d.worker_name for d in engine3.executor.devices]
    assert names == ["cuzk-device-cpu0", "cuzk-device-cpu1", "cuzk-device-cpu2"]
    job = engine3.submit(make_request("spread", partitions=9, seed=10, device_delay_ms=HOLD_MS)).job_id
    result = engine3.await_result(job, 120)
    assert result is not None
    assert_verifies(result, debug_params, seed=10, partitions=9)
    assert set(devices_of(engine3, job)) == set(names)
    status = engine3.status()
    assert len(status["devices"]) == 3
    assert {w["worker_id"].split("/")[0] for w in status["gpu_workers"]} == set(names)
    proven = {d.worker_name: d.partitions_proven for d in engine3.executor.devices}
    assert all(proven.values()) and sum(proven.values()) >= 9
    for entry in status["devices"]:
        assert entry["partitions_proven"] >= 1 and 0 < entry["busy_fraction"] <= 1
    engine3.executor.refresh_info()
    keys = [d.info[0]["keys"] for d in engine3.executor.devices]
    assert all({"circuit_id": "mimc-3", "tier": "hot"} in k for k in keys), keys


def test_a_killed_device_process_hands_its_partition_to_another_device(engine3: Engine, debug_params: Path) -> None:
    victim = engine3.executor.devices[1]
    job = engine3.submit(make_request("killed", partitions=6, seed=20, device_delay_ms=HOLD_MS)).job_id

    def victim_busy() -> bool:
        return any(p.state is PartitionState.PROVING and p.device_worker.startswith(victim.worker_name)
                   for p in engine3.jobs[job].partitions)

    wait_until(victim_busy, 60, "a partition on the device to kill")
    pid = victim.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # the executor's own record of its device process, not a name lookup
    result = engine3.await_result(job, 120)
    assert result is not None and result.status is ResultStatus.COMPLETED, result.error
    assert_verifies(result, debug_params, seed=20, partitions=6)
    record = engine3.jobs[job].partitions
    assert all(p.state is PartitionState.DONE and p.proof for p in record)
    # The partition the device held went to the next free device (another, or the restarted one).
    assert [p.device_attempts for p in record].count(1) == 1 and sum(p.device_attempts for p in record) == 1
    assert victim.failures == 1 and victim.last_failure is not None and "died" in victim.last_failure[1]
    wait_until(lambda: victim.alive, 60, "the device to be restarted")
    entry = next(d for d in engine3.status()["devices"] if d["pid"] == victim.pid)
    assert entry["restarts"] >= 1 and entry["failures"] == 1 and "died while proving" in entry["last_failure"]["reason"]
    # The restarted device proves again.
    again = engine3.submit(make_request("after", partitions=3, seed=30, device_delay_ms=HOLD_MS)).job_id
    result = engine3.await_result(again, 120)
    assert result is not None
    assert_verifies(result, debug_params, seed=30, partitions=3)


def test_a_device_that_lost_its_key_is_restarted_with_it_and_the_job_completes(engine3: Engine,
                                                                               debug_params: Path) -> None:
    """A device asked for a partition of a key it no longer holds (here dropped behind the engine's
    back; in the field, a restart whose reload failed) hands the partition on and is restarted with
    its keys, rather than failing every partition it is given."""
    warm = engine3.submit(make_request("warm-key", partitions=3, seed=49)).job_id
    assert engine3.await_result(warm, 120) is not None  # the key hot on every device
    victim = engine3.executor.devices[2]
    failures = victim.failures
    assert victim.proc.request(("unload", "mimc-3", "cold"))[0] == "ok"
    job = engine3.submit(make_request("lost-key", partitions=6, seed=50, device_delay_ms=HOLD_MS)).job_id
    result = engine3.await_result(job, 180)
    assert result is not None and result.status is ResultStatus.COMPLETED, result.error
    assert_verifies(result, debug_params, seed=50, partitions=6)
    assert victim.failures == failures + 1 and "not resident" in victim.last_failure[1]
    wait_until(lambda: victim.alive and victim.ready.is_set(), 60, "the device to be restarted")
    engine3.executor.refresh_info()
    assert {"circuit_id": "mimc-3", "tier": "hot"} in victim.info[0]["keys"]


def test_critical_work_goes_first_beside_a_spread_load(engine3: Engine, debug_params: Path) -> None:
    load = engine3.submit(make_request("load3", partitions=60, seed=40, device_delay_ms=HOLD_MS)).job_id
    wait_until(lambda: engine3.jobs[load].partitions_done() >= 1, 120, "the load to be on the devices")
    crit = engine3.submit(make_request("crit3", priority=Priority.CRITICAL, seed=90)).job_id
    result = engine3.await_result(crit, 120)
    assert result is not None
    assert_verifies(result, debug_params, seed=90)
    done = engine3.await_result(load, 120)
    assert done is not None and done.status is ResultStatus.COMPLETED
    crit_start = engine3.jobs[crit].partitions[0].device_start
    later = [p for p in engine3.jobs[load].partitions if p.device_start is not None and p.device_start > crit_start]
    assert later, "the CRITICAL partition waited for the whole load"


def test_throughput_mode_keeps_a_normal_job_on_one_device(engine3: Engine, debug_params: Path) -> None:
    engine3.pipeline.settings.device_mode = "throughput"  # `[scheduler] device_mode`, set for this test
    try:
        jobs = [engine3.submit(make_request(f"tp{k}", partitions=4, seed=50 + 10 * k,
                                            device_delay_ms=HOLD_MS)).job_id for k in range(3)]
        high = engine3.submit(make_request("tp-high", priority=Priority.HIGH, partitions=6, seed=80,
                                           device_delay_ms=HOLD_MS)).job_id
        for k, job in enumerate(jobs):
            result = engine3.await_result(job, 120)
            assert result is not None
            assert_verifies(result, debug_params, seed=50 + 10 * k, partitions=4)
            assert len(set(devices_of(engine3, job))) == 1, devices_of(engine3, job)
        result = engine3.await_result(high, 120)
        assert result is not None
        assert_verifies(result, debug_params, seed=80, partitions=6)
        assert engine3.jobs[high].device_affinity == ""  # HIGH work is never bound to one device
    finally:
        engine3.pipeline.settings.device_mode = "latency"


def test_a_device_that_cannot_be_restarted_hands_its_work_on_until_it_can(tmp_path: Path, debug_params: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A device process that dies and cannot be started again (a GPU gone from the bus) holds no
    partition: those waiting for it go to the other device, its lanes take none while it stays dead,
    the status says why, and the housekeeper's later retry brings it back."""
    from cuzk.errors import CuzkError

    engine = start_engine(tmp_path, debug_params,
                          gpus={"backend": "cpu", "devices": [0, 1], "gpu_threads": 1, "gpu_workers_per_device": 1})
    try:
        victim, other = engine.executor.devices[1], engine.executor.devices[0]
        real_restart = victim.proc.restart

        def cannot_start(reason: str) -> None:  # as WorkerProcess.restart fails: a new incarnation, dead
            victim.proc.restarts += 1
            raise CuzkError(f"worker process {victim.proc.name} did not start (exit code 1)")

        monkeypatch.setattr(victim.proc, "restart", cannot_start)
        job = engine.submit(make_request("gone", partitions=8, seed=60, device_delay_ms=HOLD_MS)).job_id

        def victim_busy() -> bool:
            return any(p.state is PartitionState.PROVING and p.device_worker.startswith(victim.worker_name)
                       for p in engine.jobs[job].partitions)

        wait_until(victim_busy, 60, "a partition on the device to kill")
        os.kill(victim.pid, signal.SIGKILL)  # the executor's own record of its device process
        result = engine.await_result(job, 120)
        assert result is not None and result.status is ResultStatus.COMPLETED, result.error
        assert_verifies(result, debug_params, seed=60, partitions=8)
        assert not victim.can_prove and "did not start" in (victim.restart_error or "")
        entry = next(d for d in engine.status()["devices"] if d["label"] == victim.spec.label)
        assert "did not start" in entry["restart_error"]
        metrics = engine.metrics_text()
        assert f'cuzk_device_can_prove{{device="{victim.spec.label}"}} 0.0' in metrics
        assert f'cuzk_device_can_prove{{device="{other.spec.label}"}} 1.0' in metrics
        # While it stays dead, every partition goes to the other device.
        later = engine.submit(make_request("gone-later", partitions=4, seed=70, device_delay_ms=50)).job_id
        result = engine.await_result(later, 120)
        assert result is not None and result.status is ResultStatus.COMPLETED, result.error
        assert_verifies(result, debug_params, seed=70, partitions=4)
        assert set(devices_of(engine, later)) == {other.worker_name}
        # A circuit first asked for now loads its key on the living device alone (the dead one gets
        # it when it is restarted), rather than fail the job on the dead one's pipe.
        fresh = engine.submit(make_request("gone-fresh", "mimc-4", partitions=2, seed=75)).job_id
        result = engine.await_result(fresh, 120)
        assert result is not None and result.status is ResultStatus.COMPLETED, result.error
        assert_verifies(result, debug_params, "mimc-4", seed=75, partitions=2)
        # Once it can start, the housekeeper's retry (after its back-off) brings it back.
        monkeypatch.setattr(victim.proc, "restart", real_restart)
        wait_until(lambda: victim.alive and victim.can_prove and victim.ready.is_set(), 120,
                   "the device to be restarted")
        assert next(d for d in engine.status()["devices"] if d["label"] == victim.spec.label)["restart_error"] is None
        back = engine.submit(make_request("back", partitions=6, seed=80, device_delay_ms=HOLD_MS)).job_id
        result = engine.await_result(back, 120)
        assert result is not None and result.status is ResultStatus.COMPLETED, result.error
        assert_verifies(result, debug_params, seed=80, partitions=6)
        assert victim.worker_name in devices_of(engine, back)
        engine.executor.refresh_info()
        assert {"circuit_id": "mimc-4", "tier": "hot"} in victim.info[0]["keys"]
    finally:
        engine.shutdown(0)
