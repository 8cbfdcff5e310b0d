"""The engine's whole GPU path on emulated cards (`[gpus] emulate`): real device processes running
`CudaBackend` on `cuzk.backends.cuda.emulated`, with the memory plans, caps, two logical devices on
one card, cards of different sizes, an out-of-memory error recovered by the retry, a device process
killed mid-job and a CRITICAL partition let in mid-phase. Every claim is read from the records and
the status, never from how long anything took; every proof is checked by cuzk's verifier and
partition 0 also by py_ecc's (`reference_verifier`)."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
from engine.engine_helpers import assert_verifies, make_request, start_engine, wait_until

from cuzk.backends.cuda.plan import CONTEXT_BYTES, KeyShape, minimum_bytes, resident_reserve
from cuzk.engine.engine import Engine
from cuzk.engine.jobs import JobResult, PartitionState, Priority, ResultStatus
from cuzk.groth16 import reference_verifier
from cuzk.groth16.formats.params_file import read_params, read_vk, vk_to_bytes
from cuzk.providers.debug import debug_params_path, debug_public_inputs

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("g++") is None, reason="the emulated device builds its kernels with g++")]


def emulated(tmp: Path, params: Path, *, cards: list[str], **gpus: Any) -> Engine:
    return start_engine(tmp, params, gpus={"backend": "cuda", "emulate": cards, "gpu_workers_per_device": 2, **gpus})


def check(result: JobResult | None, params: Path, *, seed: int, partitions: int = 1) -> None:
    assert result is not None
    assert_verifies(result, params, seed=seed, partitions=partitions)
    vk = vk_to_bytes(read_vk(debug_params_path(params, "mimc-3")))
    assert reference_verifier.verify(vk, result.proof[:192], debug_public_inputs("mimc-3", seed))


def plans(engine: Engine) -> list[dict[str, Any]]:
    engine.executor.refresh_info()
    return [d.info[0]["memory_plan"] for d in engine.executor.devices]


@pytest.fixture(autouse=True)
def own_cards(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each engine names its cards afresh (`gpus.emulate` exports them to its device processes)."""
    for name in ("CUZK_EMULATED_GPUS", "CUZK_EMULATED_GPU_ROOM", "CUZK_EMULATED_GPU_OOM", "CUZK_EMULATED_GPU_DELAY"):
        monkeypatch.setenv(name, "")  # restored (unset) after the test, whatever the engine exported


def test_proofs_on_an_emulated_card_verify_and_the_status_tells_its_memory(tmp_path: Path, debug_params: Path) -> None:
    engine = emulated(tmp_path, debug_params, cards=["4GiB"])
    try:
        job = engine.submit(make_request("emu", partitions=3, seed=5)).job_id
        check(engine.await_result(job, 600), debug_params, seed=5, partitions=3)
        (device,) = engine.status()["devices"]
        assert device["kind"] == "cuda" and "emulated" in device["name"] and device["memory_total"] == 4 << 30
        (plan,) = plans(engine)
        (key,) = plan["keys"]
        assert key["circuit_id"] == "mimc-3" and key["mode"] == "resident" and plan["oom_retries"] == 0
        assert 0 < plan["peak_pool_bytes"] < plan["budget"]
        # The pool holds the resident key; the card's driver counts what the pool holds (the device
        # process is the card's only user)
        (device,) = engine.status()["devices"]
        assert 0 < device["memory_pool_used"] <= device["memory_pool_held"] == device["memory_driver_used"]
        assert device["memory_free"] == (4 << 30) - device["memory_pool_used"]
    finally:
        engine.shutdown(0)


def test_two_devices_on_one_card_and_cards_of_two_sizes(tmp_path: Path, debug_params: Path) -> None:
    """`devices = [0, 0, 1]` on cards of 4 and 2 GiB: the two logical devices of card 0 plan with half
    of it each, card 1 with all of its own, and one proof's partitions run on all three."""
    engine = emulated(tmp_path, debug_params, cards=["4GiB", "2GiB"], devices=[0, 0, 1], gpu_workers_per_device=1)
    try:
        job = engine.submit(make_request("spread", partitions=9, seed=10, device_delay_ms=200)).job_id
        check(engine.await_result(job, 600), debug_params, seed=10, partitions=9)
        used = {p.device_worker.split("/")[0] for p in engine.jobs[job].partitions}
        assert len(used) == 3
        totals = sorted(d["memory_total"] for d in engine.status()["devices"])
        assert totals == [2 << 30, 4 << 30, 4 << 30]
        limits = sorted(p["memory_limit"] or 0 for p in plans(engine))
        assert limits == [0, 2 << 30, 2 << 30]  # half of card 0 each; card 1 all its own
    finally:
        engine.shutdown(0)


def test_a_cap_below_the_resident_plan_streams_and_gives_verified_proofs(tmp_path: Path, debug_params: Path) -> None:
    """`memory_limit` between the key's least streaming plan and its resident one (the plan's working
    memory is sized for real MSMs, so a test key's window is there)."""
    shape = KeyShape.of(read_params(debug_params_path(debug_params, "mimc-3")))
    limit = CONTEXT_BYTES + (minimum_bytes(shape) + resident_reserve(shape) + shape.key_bytes) // 2
    engine = emulated(tmp_path, debug_params, cards=["2GiB"], memory_limit=limit)
    try:
        job = engine.submit(make_request("capped", partitions=2, seed=15)).job_id
        check(engine.await_result(job, 600), debug_params, seed=15, partitions=2)
        (plan,) = plans(engine)
        (key,) = plan["keys"]
        assert plan["memory_limit"] == limit and key["mode"] == "streaming"
        assert plan["peak_pool_bytes"] <= limit - CONTEXT_BYTES
    finally:
        engine.shutdown(0)


@pytest.mark.parametrize(("skip", "attempts"), [(0, 0), (12, 1)])
def test_an_out_of_memory_error_in_a_proof_is_recovered(tmp_path: Path, debug_params: Path,
                                                        monkeypatch: pytest.MonkeyPatch, skip: int,
                                                        attempts: int) -> None:
    """An allocation of a proof fails. Its first (`skip` 0) is the staging of its inputs before it
    takes the device: it stages them with the device held instead. One inside its device phase: a key
    this small has no smaller plan to retry with in the backend (`DevicePlan.smaller`;
    tests/gpu/test_cuda_capped.py retries a large one), so the partition fails as transient
    (`ItemResult.transient`) and the engine proves it again, on the same device, which stays up."""
    trigger = tmp_path / "oom-now"
    monkeypatch.setenv("CUZK_EMULATED_GPU_OOM", str(trigger))
    engine = emulated(tmp_path, debug_params, cards=["4GiB"], gpu_workers_per_device=1)
    try:
        warm = engine.submit(make_request("warm", seed=19)).job_id
        check(engine.await_result(warm, 600), debug_params, seed=19)
        trigger.write_text(str(skip))  # the key is resident: the allocations counted are the proof's
        job = engine.submit(make_request("oom", seed=20)).job_id
        check(engine.await_result(job, 600), debug_params, seed=20)
        assert not trigger.exists()
        (record,) = engine.jobs[job].partitions
        (device,) = engine.executor.devices
        assert record.device_attempts == attempts and device.failures == 0 and device.restarts == 0
    finally:
        engine.shutdown(0)


def test_a_killed_device_process_is_restarted_and_the_job_completes(tmp_path: Path, debug_params: Path) -> None:
    engine = emulated(tmp_path, debug_params, cards=["4GiB"], gpu_workers_per_device=1)
    try:
        victim = engine.executor.devices[0]
        job = engine.submit(make_request("killed", partitions=3, seed=30, device_delay_ms=500)).job_id
        wait_until(lambda: any(p.state is PartitionState.PROVING for p in engine.jobs[job].partitions), 120,
                   "a partition on the device")
        pid = victim.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # the executor's own record of its device process
        result = engine.await_result(job, 600)
        assert result is not None and result.status is ResultStatus.COMPLETED, result.error
        check(result, debug_params, seed=30, partitions=3)
        assert victim.failures == 1 and victim.pid != pid
    finally:
        engine.shutdown(0)


def test_a_critical_partition_is_let_in_mid_phase(tmp_path: Path, debug_params: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A NORMAL proof's device phase, slowed by the emulated streams, yields at its preemption point
    to a CRITICAL partition waiting for the device (`Admission.preemption_point`, cuzk.backends.cuda.admission)."""
    monkeypatch.setenv("CUZK_EMULATED_GPU_DELAY", "0.01")
    engine = emulated(tmp_path, debug_params, cards=["4GiB"], gpu_workers_per_device=1)
    try:
        warm = engine.submit(make_request("warm", seed=39)).job_id
        check(engine.await_result(warm, 600), debug_params, seed=39)
        load = engine.submit(make_request("load", circuit="mimc-4", partitions=8, seed=40)).job_id
        # A CRITICAL partition that reaches the device between two of the load's phases takes it
        # without a preemption (on a loaded machine the gaps grow): up to three are sent, one at a
        # time while the load is on the device, and every one must be proven.
        for k in range(3):
            wait_until(lambda: any(p.state is PartitionState.PROVING for p in engine.jobs[load].partitions), 120,
                       "the load on the device")
            crit = engine.submit(make_request(f"crit{k}", priority=Priority.CRITICAL, seed=41 + k)).job_id
            check(engine.await_result(crit, 600), debug_params, seed=41 + k)
            (plan,) = plans(engine)
            if plan["preemptions"] >= 1 or engine.jobs[load].state.finished:
                break
        assert engine.await_result(load, 600).status is ResultStatus.COMPLETED
        (plan,) = plans(engine)
        assert plan["preemptions"] >= 1, plan
    finally:
        engine.shutdown(0)
