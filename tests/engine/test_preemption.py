"""CRITICAL work under load, with the engine's real worker processes: a CRITICAL partition is the next
on the device after the partition in flight (ahead of another worker's staged partition), takes a
reserved prover lane and synthesis process when the regular ones are busy, and is not held back by
`max_gpu_queue_depth`. Every order is read from the partitions' stamps (the device lock's own
request and grant times on the CPU path), never from how long anything took."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import psutil
import pytest
from engine.engine_helpers import assert_verifies, make_request, start_engine, wait_until

from cuzk.engine.device_worker import DeviceWorker
from cuzk.engine.engine import Engine
from cuzk.engine.jobs import Job, PartitionRecord, Priority, ResultStatus
from cuzk.engine.messages import ItemResult, ProveItem
from cuzk.engine.synthesis import SYNTHESIS_NICE, export_assignment
from cuzk.providers.debug import DebugCircuitRecipe, debug_params_path, debug_public_inputs

#: How long each NORMAL partition holds the device: long beside a test circuit's hand-over to the
#: device process, so that whenever a CRITICAL partition asks for the device one NORMAL partition
#: computes and the other worker's is staged, waiting.
HOLD_MS = 250


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, debug_params: Path) -> Engine:
    # Two regular workers on the CPU device; the synthesized-but-unproven cap is full under load.
    e = start_engine(tmp_path_factory.mktemp("preempt"), debug_params, gpus={"gpu_workers_per_device": 2},
                     pipeline={"max_gpu_queue_depth": 2})
    yield e
    e.shutdown(0)


def records(engine: Engine, job_id: str) -> list[PartitionRecord]:
    job: Job = engine.jobs[job_id]
    return job.partitions


def test_a_critical_partition_is_next_on_the_device_after_the_partition_in_flight(
        engine: Engine, debug_params: Path) -> None:
    load = engine.submit(make_request("load", "mimc-3", partitions=24, seed=100, device_delay_ms=HOLD_MS)).job_id
    wait_until(lambda: engine.jobs[load].partitions_done() >= 2, what="the device to be busy with the load")
    crits = []
    for k in range(4):
        rid = f"winning-{k}"
        engine.submit(make_request(rid, "mimc-3", priority=Priority.CRITICAL, seed=500 + k))
        result = engine.await_result(rid, 60)
        assert result is not None
        assert_verifies(result, debug_params, "mimc-3", seed=500 + k)
        crits.append(records(engine, rid)[0])
    load_result = engine.await_result(load, 120)
    assert load_result is not None and load_result.status is ResultStatus.COMPLETED, load_result.error
    normal = records(engine, load)
    jumped = 0
    for crit in crits:
        assert crit.lock_wait_start is not None and crit.device_start is not None
        # No NORMAL partition got the device between this CRITICAL one's asking and getting it ...
        between = [p.index for p in normal
                   if p.device_start is not None and crit.lock_wait_start < p.device_start < crit.device_start]
        assert between == [], f"NORMAL partitions {between} took the device while a CRITICAL one waited"
        # ... although one may have been waiting for it longer (staged by the other worker): jumped.
        waiting = [p for p in normal if p.lock_wait_start is not None and p.device_start is not None
                   and p.lock_wait_start < crit.lock_wait_start and p.device_start > crit.device_start]
        in_flight = [p for p in normal if p.device_start is not None and p.device_end is not None
                     and p.device_start <= crit.lock_wait_start < p.device_end]
        if waiting and in_flight:
            jumped += 1
            # Both regular workers were busy (one computing, one staged): the CRITICAL lane took it,
            # and the partition in flight was the only thing it waited for.
            assert crit.device_worker.endswith("/critical")
            assert crit.device_start >= in_flight[0].device_end
    # With two workers kept busy, a CRITICAL arrival nearly always finds a staged partition to jump.
    assert jumped >= 1


def test_critical_synthesis_does_not_wait_for_busy_synthesis_processes(engine: Engine, debug_params: Path) -> None:
    regular = [w for w in engine.pipeline.synth_workers if not w.min_priority]
    slow = engine.submit(make_request("slow-synth", "mimc-3", partitions=2 * len(regular), seed=200,
                                      synth_delay_ms=2000)).job_id
    wait_until(lambda: all(w.busy for w in regular), what="every regular synthesis process to be busy")
    engine.submit(make_request("winning-synth", "mimc-3", priority=Priority.CRITICAL, seed=600))
    result = engine.await_result("winning-synth", 60)
    assert result is not None
    assert_verifies(result, debug_params, "mimc-3", seed=600)
    crit = records(engine, "winning-synth")[0]
    assert crit.synth_worker == "cuzk-synth-critical"
    engine.cancel(slow)
    wait_until(lambda: engine.status()["synthesis"]["active"] == 0, what="the cancelled job's synthesis to end")
    # Every regular process was synthesizing a NORMAL partition when the CRITICAL one started (and
    # max_gpu_queue_depth = 2 was reached by those two alone).
    assert crit.synth_start is not None
    busy_then = {p.synth_worker for p in records(engine, slow)
                 if p.synth_start is not None and p.synth_end is not None
                 and p.synth_start <= crit.synth_start < p.synth_end}
    assert busy_then == {w.name for w in regular}


def test_only_the_regular_synthesis_processes_give_way_on_the_cpu(engine: Engine) -> None:
    workers = engine.status()["synthesis"]["workers"]
    nice = {w["worker_id"]: psutil.Process(w["pid"]).nice() for w in workers}
    critical = nice.pop("cuzk-synth-critical")
    assert nice and all(n == min(19, critical + SYNTHESIS_NICE) for n in nice.values())


def test_a_batch_lets_a_critical_partition_in_between_two_of_its_partitions(debug_params: Path) -> None:
    """The device process's side, in this process: a NORMAL batch of two partitions holds the CPU
    device; a CRITICAL partition that asks meanwhile is proven between the two."""
    from cuzk.backends.cpu import CpuBackend

    state = DeviceWorker(CpuBackend())
    state.load("mimc-3", str(debug_params_path(debug_params, "mimc-3")), True)
    shared = []

    def item(seed: int, priority: Priority) -> ProveItem:
        recipe = DebugCircuitRecipe("mimc-3", seed)
        shared.append(export_assignment(recipe.assignment()))
        return ProveItem("mimc-3", recipe, debug_public_inputs("mimc-3", seed), f"p{seed}", int(priority))

    batch = [item(1, Priority.NORMAL), item(2, Priority.NORMAL)]
    crit = item(3, Priority.CRITICAL)
    first_started, release_first = threading.Event(), threading.Event()
    prove = state.backend.prove

    def gated(*args: Any, **kwargs: Any) -> Any:
        if not first_started.is_set():  # the batch's first partition computes until we say so
            first_started.set()
            release_first.wait(20)
        return prove(*args, **kwargs)

    state.backend.prove = gated  # type: ignore[method-assign]
    out: dict[str, list[ItemResult]] = {}
    try:
        a = threading.Thread(target=lambda: out.setdefault("batch", state.prove(batch, shared[:2], True)),
                             daemon=True)
        a.start()
        assert first_started.wait(20)
        b = threading.Thread(target=lambda: out.setdefault("crit", state.prove([crit], shared[2:], True)),
                             daemon=True)
        b.start()
        wait_until(lambda: state.device_lock.waiting(int(Priority.CRITICAL)) == 1, what="the CRITICAL one to queue")
        release_first.set()
        a.join(60)
        b.join(60)
    finally:
        for sa in shared:
            sa.unlink()
    (first, second), (c,) = out["batch"], out["crit"]
    assert first.ok and second.ok and c.ok, (first.error, second.error, c.error)
    assert first.device_end <= c.device_start <= c.device_end <= second.device_start
    assert c.lock_wait_start < first.device_end  # it asked while the batch held the device


def test_device_time_leaves_out_what_a_partition_lent_mid_phase() -> None:
    """A partition that let a higher-priority proof use the device between two of its steps held it
    for its span less the time lent (`yielded`, cuzk.backends.cuda.admission): that is what its job's
    device time, the device's busy seconds and the stage metric count."""
    rec = PartitionRecord(0, device_start=10.0, device_end=12.0, device_phases={"yielded": 0.5, "device": 1.4})
    assert rec.device_s == 1.5
    assert PartitionRecord(1, device_start=10.0, device_end=12.0).device_s == 2.0
