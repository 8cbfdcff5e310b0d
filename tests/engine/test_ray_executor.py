"""The Ray executor on a Ray cluster of several nodes on this host (`ray.cluster_utils.Cluster`: a raylet
per node, loopback addresses only, object stores capped small): a job's partitions spread over the
nodes' devices, a node that joins later takes work without a restart, a node removed mid-job loses
no partition, a device's lanes synthesize ahead of it in processes on its node, and a request's
large buffers go into the object store once per job.

The tests share one cluster and one driver connection (the module's fixture, which shuts both down);
they add nodes, and the last one removes a node (it cannot come back)."""

from __future__ import annotations

import itertools
import logging
import os
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Ray resolves "127.0.0.1" in an address to the host's outward address unless told it runs one host's
# cluster: loopback only, for the cluster and this driver (read when Ray is imported, and at each call).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
pytest.importorskip("ray", reason="Ray is not installed (pip install 'cuzk[ray]'): the Ray executor is not tested")
import ray
import ray._private.ray_constants as ray_constants
from engine.engine_helpers import assert_verifies, make_request, start_engine, wait_until
from ray.cluster_utils import Cluster

from cuzk.engine.jobs import PartitionState, Priority, ResultStatus
from cuzk.engine.ray_executor import RayDevice, RayExecutor

pytestmark = pytest.mark.slow

#: Per node: one CPU for Ray's bookkeeping, one device, an object store Ray's minimum allows.
NODE = {"node_ip_address": "127.0.0.1", "num_cpus": 1, "object_store_memory": 80 << 20,
        "resources": {"cuzk_device": 1}}
CIRCUIT = "mimc-4"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Two nodes with a device each, and this process connected to them as Ray's driver for the whole
    module: the engines' executors find Ray connected and leave the connection alone (a second
    `ray.init` after `ray.shutdown` in one process has crashed Ray's core worker here, a segfault).
    Tests add nodes; the last one removes one. A cluster takes 15-25 s to start on 2 cores."""
    ray_constants.ENABLE_RAY_CLUSTER = False  # in case Ray was imported before the variable was set
    c = Cluster(initialize_head=True, head_node_args=dict(NODE))
    try:
        c.add_node(**NODE)
        ray.init(address=c.address, logging_level=logging.WARNING, configure_logging=False)
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()


def ray_engine(tmp_path: Path, params: Path, cluster: Cluster, **sections: dict[str, Any]) -> Any:
    return start_engine(tmp_path, params, executor={"kind": "ray", "address": cluster.address},
                        gpus={"gpu_workers_per_device": 1}, pipeline={"max_parallel_synthesis": 1}, **sections)


def node_of(worker: str) -> str:
    """The node label a device worker's name starts with ("127.0.0.1-ab12cd:cuzk-device-cpu0/w0")."""
    return worker.split(":", 1)[0]


def device_of(worker: str) -> str:
    """The device a lane's name starts with ("127.0.0.1-ab12cd:cuzk-device-cpu0/w0")."""
    return worker.split("/", 1)[0]


def test_partitions_spread_over_nodes_and_a_joining_node_is_used(tmp_path: Path, debug_params: Path,
                                                                 cluster: Cluster) -> None:
    engine = ray_engine(tmp_path, debug_params, cluster)
    try:
        executor = engine.executor
        assert isinstance(executor, RayExecutor)
        assert len(executor.devices) == 2 and len({d.node_id for d in executor.all_devices}) == 2
        engine.submit(make_request("spread", CIRCUIT, partitions=6, device_delay_ms=150))
        result = engine.await_result("spread", timeout=120)
        assert_verifies(result, debug_params, CIRCUIT, partitions=6)
        records = engine.jobs["spread"].partitions
        nodes = Counter(node_of(p.device_worker) for p in records)
        assert len(nodes) == 2, nodes
        # Each partition was synthesized where it was proven: the recipe travelled, not the witness.
        assert all(p.synth_worker == p.device_worker and p.synth_start is not None for p in records)
        assert all(p.synth_start <= p.synth_end <= p.device_start <= p.device_end for p in records)

        cluster.add_node(**NODE)  # a third node joins the running daemon
        wait_until(lambda: len([d for d in executor.all_devices if d.state == "ready"]) == 3, timeout=90,
                   what="the joining node's device")
        wait_until(lambda: len(engine.pipeline.prover_workers) == 3 * (executor.workers_per_device + 1), timeout=30,
                   what="its lanes")
        joined = executor.all_devices[-1]
        engine.submit(make_request("joined", CIRCUIT, partitions=9, seed=1, device_delay_ms=150))
        result = engine.await_result("joined", timeout=120)
        assert_verifies(result, debug_params, CIRCUIT, seed=1, partitions=9)
        used = Counter(node_of(p.device_worker) for p in engine.jobs["joined"].partitions)
        assert joined.node_label in used, used

        status = engine.status()
        assert {n["node_id"] for n in status["cluster"]["nodes"]} == {d.node_id for d in executor.all_devices}
        # The partitions were synthesized on the nodes: the front end keeps one process for its worker
        # calls and the one reserved for CRITICAL jobs, whatever its cores.
        assert status["synthesis"]["max_concurrent"] == 2
        assert len(executor.processes()) == 2
        assert all(d["state"] == "ready" and d["node_address"] == "127.0.0.1" for d in status["devices"])
        assert all(" on node 127.0.0.1 " in d["name"] for d in status["devices"])
        metrics = engine.metrics_text()
        assert all(f'cuzk_device_node{{device="{d.spec.label}",node="{d.node_label}",state="ready"}} 1.0' in metrics
                   for d in executor.all_devices), metrics
    finally:
        engine.shutdown(0)


def test_a_device_process_killed_mid_job_is_restarted_by_ray(tmp_path: Path, debug_params: Path,
                                                             cluster: Cluster) -> None:
    import signal

    engine = ray_engine(tmp_path, debug_params, cluster)
    try:
        executor = engine.executor
        assert isinstance(executor, RayExecutor)
        engine.submit(make_request("killed", CIRCUIT, partitions=4, seed=3, device_delay_ms=1500))
        job = engine.jobs["killed"]
        wait_until(lambda: any(p.state is PartitionState.PROVING for p in job.partitions), timeout=90,
                   what="a partition on a device")
        busy = next(p.device_worker for p in job.partitions if p.state is PartitionState.PROVING)
        victim = next(d for d in executor.all_devices if busy.startswith(d.worker_name + "/"))
        os.kill(victim.pid, signal.SIGKILL)  # its node stays: Ray restarts the actor there
        result = engine.await_result("killed", timeout=180)
        assert_verifies(result, debug_params, CIRCUIT, seed=3, partitions=4)
        assert any(p.device_attempts for p in job.partitions)
        wait_until(lambda: victim.restarts == 1 and victim.state == "ready", timeout=60, what="the restart")
        assert victim.failures == 1 and victim.node_id in {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    finally:
        engine.shutdown(0)


def test_a_front_end_restart_keeps_results_and_requeues_unfinished_jobs(tmp_path: Path, debug_params: Path,
                                                                       cluster: Cluster) -> None:
    from cuzk.engine.journal import Journal

    def journal(instance: str) -> Journal:
        return Journal(tmp_path / "journal.sqlite3", instance_id=instance, keep_requests=True, retention_s=3600,
                       max_results=100)

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    first = ray_engine(tmp_path / "a", debug_params, cluster)
    kept = journal(first.instance_id)
    first.attach_journal(kept)
    try:
        first.submit(make_request("done", CIRCUIT, partitions=2))
        finished = first.await_result("done", timeout=120)
        assert_verifies(finished, debug_params, CIRCUIT, partitions=2)
        first.submit(make_request("unfinished", CIRCUIT, partitions=4, seed=2, device_delay_ms=1500))
        job = first.jobs["unfinished"]
        wait_until(lambda: any(p.state is PartitionState.PROVING for p in job.partitions), timeout=90,
                   what="the second job on a device")
    finally:
        first.journal = None  # a crash: the journal never hears how the second job ended
        first.shutdown(0)
        kept.close()

    second = ray_engine(tmp_path / "b", debug_params, cluster)
    try:
        recovered = journal(second.instance_id)
        recovery = recovered.recover("requeue")
        assert [job_id for job_id, _ in recovery.requeue] == ["unfinished"]
        second.restore_finished(recovery.finished)
        second.attach_journal(recovered)
        for job_id, digest in recovery.requeue:
            second.submit(recovered.load_request(digest, second.providers), job_id=job_id, origin="journal")
        again = second.await_result("done", timeout=5)
        assert again.status is ResultStatus.COMPLETED and again.proof == finished.proof
        result = second.await_result("unfinished", timeout=180)
        assert_verifies(result, debug_params, CIRCUIT, seed=2, partitions=4)
        assert recovered.row("unfinished")["state"] == "completed"
    finally:
        second.shutdown(0)


@dataclass(frozen=True)
class _Payload:
    shared: bytes
    own: bytes
    index: int


def test_large_buffers_go_into_the_object_store_once_per_job(cluster: Cluster) -> None:
    from cuzk.engine.synthesis import PickledRecipe

    executor = RayExecutor(address=cluster.address, backend="cpu", workers_per_device=1, threads=1)
    try:
        c1 = os.urandom(1 << 20)  # e.g. a C1 output the partitions of a job share
        blobs = [executor._pickle_recipe("job-a", _Payload(c1, b"x" * 100, k)) for k in range(6)]
        assert executor.payload_puts == 1 and executor.payload_bytes == len(c1)
        assert all(len(blob) < 1024 and len(refs) == 1 for blob, refs in blobs)
        assert len({refs[0].hex() for _, refs in blobs}) == 1
        blob, refs = blobs[3]
        back = PickledRecipe(blob, tuple(ray.get(refs))).load()
        assert back == _Payload(c1, b"x" * 100, 3)
        executor._pickle_recipe("job-b", _Payload(c1, b"", 0))  # another job: its own object
        assert executor.payload_puts == 2
    finally:
        executor.shutdown()


def test_ray_devices_name_their_node() -> None:
    from cuzk.engine.devices import DeviceSpec

    d = RayDevice(DeviceSpec(3, "cpu"), "ab12cd34ef" * 5, "10.0.0.7", 1)
    assert d.worker_name == "10.0.0.7-ab12cd:cuzk-device-cpu1" and "/" not in d.worker_name
    assert d.name == "cpu 1 on node 10.0.0.7 (ab12cd34)"
    d.state, d.lost_reason = "lost", "node 10.0.0.7 (ab12cd34) left the cluster"
    assert not d.alive and d.name.endswith("[lost: node 10.0.0.7 (ab12cd34) left the cluster]")
    assert d.placement["state"] == "lost" and d.placement["node_address"] == "10.0.0.7"



def test_only_this_host_s_node_takes_this_host_s_memory_for_a_hot_key() -> None:
    """Remote nodes map the key's file and pin their copies in their own memory: the front end's
    budget holds what the devices of its own node report, and nothing when none of them holds it."""
    import threading
    from types import SimpleNamespace

    from cuzk.engine.devices import DeviceSpec

    here, there = "aa" * 28, "bb" * 28
    devices = [RayDevice(DeviceSpec(k, "cuda"), node, "10.0.0.5", k) for k, node in enumerate((here, there, there))]
    for d in devices:
        RayExecutor._loaded(d, "porep-32g", {"pinned_bytes": 47 << 30, "pinned_key_bytes": 44 << 30,
                                             "file_read_bytes": 0})
    fake = SimpleNamespace(_lock=threading.Lock(), _devices=devices, local_node_id=here)
    assert RayExecutor.hot_host_bytes(fake, "porep-32g", 47 << 30) == (0, 47 << 30)  # type: ignore[arg-type]
    fake.local_node_id = "cc" * 28  # a front end whose node lends no device
    assert RayExecutor.hot_host_bytes(fake, "porep-32g", 47 << 30) == (0, 0)  # type: ignore[arg-type]


def test_lanes_synthesize_ahead_of_the_device_in_processes_on_its_node(tmp_path: Path, debug_params: Path,
                                                                       cluster: Cluster) -> None:
    """gpu_workers_per_device = 1 and synthesis_ahead = 2 (the default): three lanes a device, each
    synthesizing in a process of its own on the device's node, so that partitions are synthesized while
    another holds the device; the CRITICAL lane synthesizes in the actor; a synthesis process that dies
    fails its partition's job, and the lane's next partition gets a new process."""
    engine = ray_engine(tmp_path, debug_params, cluster)
    try:
        executor = engine.executor
        assert isinstance(executor, RayExecutor)
        assert (executor.workers_per_device, executor.critical_lane) == (3, 3)
        lanes = Counter(device_of(state.name) for _, _, state in engine.pipeline.prover_workers)
        assert lanes == {d.worker_name: 4 for d in executor.all_devices}, lanes
        regular = 3 * len(lanes)

        # More partitions than lanes: a lane's second partition synthesizes while its device proves another's.
        engine.submit(make_request("ahead", CIRCUIT, partitions=12, synth_delay_ms=300, device_delay_ms=300))
        job = engine.jobs["ahead"]
        wait_until(lambda: sum(p.state is PartitionState.PROVING for p in job.partitions) == regular, timeout=60,
                   what="every regular lane busy")
        engine.submit(make_request("urgent", CIRCUIT, priority=Priority.CRITICAL, seed=20))
        assert_verifies(engine.await_result("urgent", timeout=60), debug_params, CIRCUIT, seed=20)
        assert_verifies(engine.await_result("ahead", timeout=120), debug_params, CIRCUIT, partitions=12)
        assert engine.jobs["urgent"].partitions[0].device_worker.endswith("/critical")
        records = job.partitions
        overlaps = [(p.index, q.index) for p in records for q in records
                    if p is not q and device_of(p.device_worker) == device_of(q.device_worker)
                    and p.synth_start < q.device_end and q.device_start < p.synth_end]
        assert overlaps, [(p.device_worker, p.synth_start, p.synth_end, p.device_start, p.device_end) for p in records]
        # One lane of a device in its prove at a time (gpu_workers_per_device = 1): the others wait,
        # synthesized, for the slot, not at the device lock.
        held = [(p.lock_wait_start, p.device_end, p.index) for p in records]
        assert all(w is not None for w, _, _ in held)
        for dev in {device_of(p.device_worker) for p in records}:
            spans = sorted((p.lock_wait_start, p.device_end) for p in records if device_of(p.device_worker) == dev)
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), spans
        # The nodes' stamps are on this host's clock (one host here: the offsets are ~0, though an
        # actor takes seconds to start) and in their order.
        offsets = [d.clock_offset for d in executor.all_devices]
        assert all(abs(o) < 0.05 for o in offsets), offsets
        for p in records:
            assert job.submitted <= p.synth_start <= p.synth_end <= p.device_start <= p.device_end <= p.done, p
        # Queued for the device once synthesized on its node, as with the local executor, so that each
        # phase between the result's stamps (bench/phases.py) is a real, non-negative wait.
        for t in engine.await_result("ahead", timeout=1).partitions:
            assert (t.planned_ms <= t.synth_start_ms <= t.synth_end_ms == t.device_queue_ms <= t.device_start_ms
                    <= t.device_end_ms <= t.done_ms), t

        # fail_mode "crash" exits the process synthesizing it (in one not started by multiprocessing, such
        # as the actor, it raises instead): code 70 is its exit from the lane's synthesis process.
        engine.submit(make_request("crash", CIRCUIT, partitions=2, seed=30, fail_partition=0, fail_mode="crash"))
        crashed = engine.await_result("crash", timeout=60)
        assert crashed.status is ResultStatus.FAILED
        assert "partition 0: synthesis on " in crashed.error and "exited with code 70" in crashed.error, crashed.error
        # A partition for every regular lane, each holding its device a while: the crashed lane takes
        # one too, in a new synthesis process.
        engine.submit(make_request("after", CIRCUIT, partitions=regular, seed=40, device_delay_ms=200))
        assert_verifies(engine.await_result("after", timeout=120), debug_params, CIRCUIT, seed=40, partitions=regular)
        crashed_lane = engine.jobs["crash"].partitions[0].device_worker
        assert crashed_lane in {p.device_worker for p in engine.jobs["after"].partitions}, crashed_lane
    finally:
        engine.shutdown(0)


def test_a_node_removed_mid_job_loses_no_partition(tmp_path: Path, debug_params: Path, cluster: Cluster,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """Last in the module: the node it removes cannot come back."""
    engine = ray_engine(tmp_path, debug_params, cluster)
    caplog.set_level(logging.INFO, logger="cuzk.timeline")
    try:
        executor = engine.executor
        assert isinstance(executor, RayExecutor)
        head_id = cluster.head_node.node_id
        engine.submit(make_request("survive", CIRCUIT, partitions=6, device_delay_ms=1500))
        job = engine.jobs["survive"]

        def on_other_node() -> list[RayDevice]:
            busy = {node_of(p.device_worker) for p in job.partitions if p.state is PartitionState.PROVING}
            return [d for d in executor.all_devices if d.node_id != head_id and d.node_label in busy]

        wait_until(lambda: bool(on_other_node()), timeout=90, what="a partition on a node other than the head")
        victim = on_other_node()[0]
        cluster.remove_node(next(n for n in cluster.list_all_nodes() if n.node_id == victim.node_id))
        result = engine.await_result("survive", timeout=180)
        assert result.status is ResultStatus.COMPLETED, result.error
        assert_verifies(result, debug_params, CIRCUIT, partitions=6)
        # Exactly once: every partition came back from a device once, the requeued one from the head's.
        ends = Counter(r.fields["partition"] for r in caplog.records
                       if getattr(r, "fields", {}).get("event") == "DEVICE_END" and r.fields["job_id"] == "survive")
        assert ends == Counter(range(6)), ends
        assert any(p.device_attempts for p in job.partitions)
        assert all(node_of(p.device_worker) != victim.node_label for p in job.partitions if p.device_attempts)
        wait_until(lambda: victim.state == "lost", timeout=30, what="the lost device marked")
        status = engine.status()
        lost = next(d for d in status["devices"] if d["node_id"] == victim.node_id)
        assert lost["state"] == "lost" and victim.node_id[:8] in lost["lost_reason"]
        assert "lost" in lost["name"] and lost["failures"] >= 1
    finally:
        engine.shutdown(0)


def test_prover_slots_go_by_priority_then_arrival() -> None:
    """With every slot held, waiters get the next free one highest priority first, FIFO within a level."""
    import threading
    import time

    from cuzk.engine.executor import PrioritySlots

    slots, order, threads = PrioritySlots(1), [], []
    release = threading.Event()

    def take(name: str, priority: int) -> None:
        with slots.hold(priority):
            order.append(name)
            if name == "first":
                release.wait(10)

    for name, priority in (("first", 2), ("normal a", 2), ("low", 1), ("normal b", 2), ("high", 3)):
        threads.append(threading.Thread(target=take, args=(name, priority)))
        threads[-1].start()
        deadline = time.monotonic() + 10
        while len(slots._waiting) + len(order) < len(threads):  # queued (or in) before the next starts
            assert time.monotonic() < deadline
            time.sleep(0.001)
    release.set()
    for t in threads:
        t.join(10)
    assert order == ["first", "high", "normal a", "normal b", "low"]


def test_a_lane_restarts_its_device_unless_another_lane_did_since_its_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two lanes fail on one actor: the first restarts it (one failure, one restart); the second, which
    called the same generation, finds it restarted and does nothing, even when the new actor is slow to
    answer. An actor alive but unusable (`force`) is killed and restarted though it still answers."""
    import threading
    import time
    from types import SimpleNamespace

    from cuzk.engine import ray_executor
    from cuzk.engine.devices import DeviceSpec

    class Actor:
        def __init__(self) -> None:
            self.pid, self.delay, self.kills = 100, 0.0, 0
            self.ready = SimpleNamespace(remote=lambda: lambda: self._reply())
            self.clock = SimpleNamespace(remote=lambda: time.monotonic)

        def _reply(self) -> dict[str, Any]:
            return {"pid": self.pid, "now": time.monotonic(), "devices": [{"name": "stand-in"}]}

    def get(ref: Any, timeout: float | None = None) -> Any:
        if timeout is not None and actor.delay > timeout:
            time.sleep(timeout)
            raise ray.exceptions.GetTimeoutError("stand-in")
        return ref()

    def kill(actor: Actor, no_restart: bool = True) -> None:
        actor.kills += 1
        actor.pid += 1  # Ray starts it again

    monkeypatch.setattr(ray_executor.ray, "get", get)
    monkeypatch.setattr(ray_executor.ray, "kill", kill)
    executor = RayExecutor.__new__(RayExecutor)
    executor._lane_saw, executor._stop, executor._lock = threading.local(), threading.Event(), threading.Lock()
    reloaded: list[str] = []
    executor.host = SimpleNamespace(device_restarted=lambda d: reloaded.append(d.worker_name))
    device = RayDevice(DeviceSpec(0, "cpu"), "ab" * 28, "10.0.0.7", 0)
    device.actor = actor = Actor()
    executor._ready(device, actor._reply(), time.monotonic())
    assert (device.generation, device.restarts, device.failures) == (1, 0, 0)

    def lane_failed_on(generation: int, force: bool = False) -> None:
        executor._lane_saw.generation = generation  # what this lane's `prove` call saw
        executor.restart(device, "died", force=force)

    actor.pid = 101  # it died and Ray restarted it: the first lane to notice waits for its ready reply
    lane_failed_on(1)
    assert (device.generation, device.restarts, device.failures, device.pid) == (2, 1, 1, 101)
    actor.delay = 3.0  # slow to answer: a lane that asked it would time out and count a second failure
    started = time.monotonic()
    lane_failed_on(1)
    assert time.monotonic() - started < 1.0
    assert (device.generation, device.restarts, device.failures) == (2, 1, 1) and reloaded == [device.worker_name]
    actor.delay = 0.0
    lane_failed_on(2, force=True)  # alive, same pid, but unusable
    assert actor.kills == 1 and (device.generation, device.restarts, device.failures, device.pid) == (3, 2, 2, 102)
    assert device.state == "ready" and len(reloaded) == 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v"]))
