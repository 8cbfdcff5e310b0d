"""Devices of different sizes on one daemon: a device whose memory plan cannot hold a circuit's key
(a 16 GiB card beside an 80 GiB one) records why and is left out of that circuit's partitions, while
the devices that hold it prove them; a key no device can hold is refused as before. Stand-ins for
the device processes: the load replies are the ones the device worker sends."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fake_backend import FakeBackend

from cuzk.engine.devices import DeviceSpec
from cuzk.engine.executor import Device, DeviceError, Executor, KeyRefusedError, LocalExecutor
from cuzk.engine.jobs import Priority
from cuzk.engine.pipeline import Pipeline, WorkerState

TOO_SMALL = "porep-32g needs at least 12.9 GiB of device memory with memory_limit = 8.0 GiB"


def _device(ordinal: int) -> Device:
    return Device(DeviceSpec(ordinal, "cuda"))


def _local_load(reply_error: str | None, device: Device) -> float:
    """LocalExecutor.load on `device`, its control request answered with `reply_error` (None: ok)."""

    def control(d: Device, msg: tuple) -> dict:
        if reply_error is not None:
            raise DeviceError(f"{d.worker_name}: {reply_error}")
        return {"load_s": 2.5, "pinned_bytes": 7 << 30}

    fake = SimpleNamespace(host=None, _control=control, _refused_or_raise=Executor._refused_or_raise,
                           _loaded=Executor._loaded)
    return LocalExecutor.load(fake, device, "porep-32g", "/params/p.params", hot=True)  # type: ignore[arg-type]


def test_a_device_too_small_for_the_key_records_why_and_loads_nothing() -> None:
    device = _device(1)
    assert _local_load(f"DeviceTooSmallError: {TOO_SMALL}", device) == 0.0
    assert device.refused == {"porep-32g": f"cuzk-device-cuda1: {TOO_SMALL}"}
    assert _local_load(None, device) == 2.5 and device.refused == {}  # a later load that fits clears it
    assert device.pinned == {"porep-32g": 7 << 30}  # what the device pinned, for the host budget


def test_other_load_errors_still_fail_the_load() -> None:
    device = _device(0)
    with pytest.raises(DeviceError, match="FileNotFoundError"):
        _local_load("FileNotFoundError: /params/p.params", device)
    assert device.refused == {}


class _Sized(Executor):
    """Devices that hold a key or refuse it, by ordinal; only what load_all needs."""

    workers_per_device, critical_lane, host_key_copies = 1, 1, 0

    def __init__(self, fits: list[bool]) -> None:
        self._devices = [_device(k) for k in range(len(fits))]
        self.fits = fits

    @property
    def devices(self) -> list[Device]:
        return self._devices

    def load(self, device: Device, circuit_id: str, path: str, *, hot: bool) -> float:
        if not self.fits[device.spec.ordinal]:
            return self._refused(device, circuit_id, f"{device.worker_name}: {TOO_SMALL}")
        return 1.0 + device.spec.ordinal

    _start_devices = _wait_devices = refresh_info = lambda self: None
    _stop_devices = unload_all = prove = restart = lambda self, *a, **k: None


def test_load_all_succeeds_while_one_device_holds_the_key() -> None:
    executor = _Sized([False, True, False])
    assert executor.load_all("porep-32g", "/p", hot=True) == 2.0
    assert [sorted(d.refused) for d in executor.devices] == [["porep-32g"], [], ["porep-32g"]]


def test_a_key_no_device_can_hold_is_refused_naming_each_device() -> None:
    executor = _Sized([False, False])
    with pytest.raises(KeyRefusedError) as err:
        executor.load_all("porep-32g", "/p", hot=True)
    assert str(err.value) == f"cuzk-device-cuda0: {TOO_SMALL}; cuzk-device-cuda1: {TOO_SMALL}"


def _pipeline(queue: list[SimpleNamespace]) -> SimpleNamespace:
    """What `Pipeline._admissible` reads of its pipeline: the queue, no cap, nothing blocked."""
    return SimpleNamespace(_queue=queue, _blocked=None, synthesizing=0, waiting=0, _per_job_synthesizing={},
                           settings=SimpleNamespace(device_mode="latency", max_gpu_queue_depth=0, slot_size=0))


def test_a_device_that_refused_a_circuit_passes_over_its_partitions() -> None:
    def work(circuit_id: str) -> SimpleNamespace:
        return SimpleNamespace(job=SimpleNamespace(circuit_id=circuit_id, priority=Priority.NORMAL,
                                                   device_affinity=""), record=SimpleNamespace(failed_on=None))

    queue = [work("porep-32g"), work("winning-32g"), work("porep-32g")]
    fake = _pipeline(queue)
    small, large = _device(0), _device(1)
    small.refused["porep-32g"] = TOO_SMALL
    state = WorkerState("w", "prover")
    assert Pipeline._admissible(fake, state, small) is queue[1]  # type: ignore[arg-type]
    assert Pipeline._admissible(fake, state, large) is queue[0]  # type: ignore[arg-type]
    small.refused["winning-32g"] = TOO_SMALL
    assert Pipeline._admissible(fake, state, small) is None  # type: ignore[arg-type]


def test_a_device_that_failed_holding_a_partition_passes_over_it_until_it_has_restarted() -> None:
    """Its other lane would send the partition to the same dead process (or actor, before the
    failed lane has marked it restarting) and use up the partition's attempts."""
    work = SimpleNamespace(job=SimpleNamespace(circuit_id="porep-32g", priority=Priority.NORMAL, device_affinity=""),
                           record=SimpleNamespace(failed_on=None))
    fake = _pipeline([work])

    class Restarting(Device):
        count = 0

        @property
        def restarts(self) -> int:
            return self.count

    failed, other = Restarting(DeviceSpec(0, "cuda")), Restarting(DeviceSpec(1, "cuda"))
    failed.count = 3
    work.record.failed_on = (failed.worker_name, 3)
    state = WorkerState("w", "prover")
    assert Pipeline._admissible(fake, state, failed) is None  # type: ignore[arg-type]
    assert Pipeline._admissible(fake, state, other) is work  # type: ignore[arg-type]
    failed.count = 4  # restarted since
    assert Pipeline._admissible(fake, state, failed) is work  # type: ignore[arg-type]


def _streaming_state(entry: dict) -> object:
    """A device process whose backend reports `entry` for the key, beside another key's."""
    from cuzk.engine.device_worker import DeviceWorker

    class Streaming(FakeBackend):
        def memory_plan(self, names: dict | None = None) -> dict:
            assert names is not None
            return {"keys": [{"circuit_id": names.get(pk, ""), **entry} for pk in names] +
                            [{"circuit_id": "other", "host_pinned_bytes": 1 << 30}]}

    state = DeviceWorker(Streaming())
    state.keys["porep-32g"], state.verifying_keys["porep-32g"] = object(), object()
    return state


def test_the_device_process_reports_what_it_pinned_for_a_hot_key() -> None:
    state = _streaming_state({"host_pinned_bytes": 9 << 30, "host_pinned_compiled_bytes": 2 << 30,
                              "streamed_bytes": 10 << 30})
    reply = state.load("porep-32g", "/unused", True)
    assert (reply["pinned_bytes"], reply["pinned_key_bytes"]) == (9 << 30, 7 << 30)  # bases: all but the matrices
    assert reply["file_read_bytes"] == 3 << 30  # 10 GiB streamed, 7 of them from the pinned copy
    reply = state.load("porep-32g", "/unused", False)
    assert (reply["pinned_bytes"], reply["pinned_key_bytes"]) == (0, 0)  # warm: nothing made resident
    assert "file_read_bytes" not in reply  # warm: the file is all there is


def test_the_witness_staging_a_device_process_pinned_is_not_counted_as_the_keys_bases() -> None:
    state = _streaming_state({"host_pinned_bytes": 13 << 30, "host_pinned_compiled_bytes": 2 << 30,
                              "host_pinned_staging_bytes": 4 << 30, "streamed_bytes": 10 << 30})
    reply = state.load("porep-32g", "/unused", True)
    assert (reply["pinned_bytes"], reply["pinned_key_bytes"]) == (13 << 30, 7 << 30)
    assert reply["file_read_bytes"] == 3 << 30


def test_the_compiled_pages_that_host_products_read_are_held_for_the_key() -> None:
    """Host products read the compiled file's matrices on every proof: those pages count with the
    key's pinned bytes (not as its bases), or synthesis would be given them and the host thrash."""
    state = _streaming_state({"host_pinned_bytes": 13 << 30, "host_pinned_staging_bytes": 4 << 30,
                              "host_mapped_compiled_bytes": 6 << 30, "streamed_bytes": 9 << 30})
    reply = state.load("porep-32g", "/unused", True)
    assert (reply["pinned_bytes"], reply["pinned_key_bytes"]) == (19 << 30, 9 << 30)
    assert reply["file_read_bytes"] == 0


def test_the_device_process_says_where_a_keys_products_run_and_the_executor_remembers_it() -> None:
    from cuzk.engine.devices import DeviceSpec
    from cuzk.engine.executor import Device, Executor

    for products, on_host in (("host", True), ("device", False), (None, False)):
        state = _streaming_state({"host_pinned_bytes": 0, "streamed_bytes": 0, "products": products})
        assert state.load("porep-32g", "/unused", True)["products_on_host"] is on_host
    device = Device(DeviceSpec(0, "cuda"))
    Executor._loaded(device, "porep-32g", {"pinned_bytes": 1, "products_on_host": True})
    fake = type("Fake", (), {"devices": [device]})()
    assert Executor.products_on_host(fake, "porep-32g") and not Executor.products_on_host(fake, "wpost-32g")
    Executor._unloading("porep-32g", "warm", [device])
    assert not Executor.products_on_host(fake, "porep-32g")


def test_a_backend_without_a_memory_plan_says_nothing_of_the_file() -> None:
    from cuzk.engine.device_worker import DeviceWorker

    state = DeviceWorker(FakeBackend())
    state.keys["mimc-3"], state.verifying_keys["mimc-3"] = object(), object()
    reply = state.load("mimc-3", "/unused", True)
    assert (reply["pinned_bytes"], reply["pinned_key_bytes"]) == (0, 0) and "file_read_bytes" not in reply


def test_a_device_workers_info_lists_its_keys_and_its_backends_memory_plan() -> None:
    from cuzk.engine.device_worker import DeviceWorker

    worker = _streaming_state({"host_pinned_bytes": 0})
    assert isinstance(worker, DeviceWorker)
    worker.hot.add("porep-32g")
    worker.keys["wpost-32g"] = object()
    [info] = worker.info()
    assert info["name"] == "fake" and info["keys"] == [{"circuit_id": "porep-32g", "tier": "hot"},
                                                       {"circuit_id": "wpost-32g", "tier": "warm"}]
    assert [k["circuit_id"] for k in info["memory_plan"]["keys"]] == ["porep-32g", "wpost-32g", "other"]
    [info] = DeviceWorker(FakeBackend()).info()
    assert info["keys"] == [] and "memory_plan" not in info  # the default backend plans no device memory


def test_a_hot_key_on_gpus_counts_its_pinned_copies_and_only_the_file_they_still_read() -> None:
    # Two logical devices each pinned 19 GiB of the key's bases (H and B_G2 streamed) and 6 GiB of
    # matrices, the rest resident: their proofs read nothing of the 44 GiB file, whose pages the
    # kernel may then reclaim, so the budget holds both devices' copies and none of the file.
    file_bytes = 44 << 30
    devices = [_device(0), _device(1)]
    for d in devices:
        Executor._loaded(d, "porep-32g", {"pinned_bytes": 25 << 30, "pinned_key_bytes": 19 << 30,
                                          "file_read_bytes": 0})
    fake = SimpleNamespace(devices=devices)
    assert Executor.hot_host_bytes(fake, "porep-32g", file_bytes) == (0, 50 << 30)  # type: ignore[arg-type]
    # One device left a streamed vector unpinned (the host was short): it reads those bytes per proof.
    Executor._loaded(devices[1], "porep-32g", {"pinned_bytes": 10 << 30, "pinned_key_bytes": 4 << 30,
                                               "file_read_bytes": 15 << 30})
    assert Executor.hot_host_bytes(fake, "porep-32g", file_bytes) == (15 << 30, 35 << 30)  # type: ignore[arg-type]
    Executor._unloading("porep-32g", "warm", devices)
    assert Executor.hot_host_bytes(fake, "porep-32g", file_bytes) == (file_bytes, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("count", [2, 4])
def test_a_shared_host_copy_of_the_bases_counts_once_however_many_devices_hold_it(count: int) -> None:
    # Each device pinned 19 GiB of bases, held in the copies this host's devices share, and 6 GiB of
    # its own (matrices, staging): the budget holds 19 GiB once and 6 GiB per device.
    file_bytes = 44 << 30
    devices = [_device(k) for k in range(count)]
    for d in devices:
        Executor._loaded(d, "porep-32g", {"pinned_bytes": 25 << 30, "pinned_key_bytes": 19 << 30,
                                          "pinned_shared_bytes": 19 << 30, "file_read_bytes": 0})
    fake = SimpleNamespace(devices=devices)
    assert Executor.hot_host_bytes(fake, "porep-32g", file_bytes) == (0, (19 + 6 * count) << 30)  # type: ignore[arg-type]
    Executor._unloading("porep-32g", "warm", devices[1:])
    assert Executor.hot_host_bytes(fake, "porep-32g", file_bytes) == (0, 25 << 30)  # type: ignore[arg-type]
    Executor._unloading("porep-32g", "warm", devices[:1])
    assert Executor.hot_host_bytes(fake, "porep-32g", file_bytes) == (file_bytes, 0)  # type: ignore[arg-type]


def test_a_device_that_says_nothing_of_the_file_keeps_all_of_it_and_one_pinned_copy_stands_for_its_pages() -> None:
    # The whole file counts: one device's pinned copy of the bases is the same bytes as its pages.
    devices = [_device(0), _device(1)]
    for d in devices:
        Executor._loaded(d, "porep-32g", {"pinned_bytes": 46 << 30, "pinned_key_bytes": 40 << 30})
    fake = SimpleNamespace(devices=devices)
    assert Executor.hot_host_bytes(fake, "porep-32g", 47 << 30) == (47 << 30, (46 + 46 - 40) << 30)  # type: ignore[arg-type]
    Executor._loaded(devices[0], "porep-32g", {"pinned_bytes": 3 << 30})  # a reply without the split
    Executor._unloading("porep-32g", "cold", devices[1:])
    assert Executor.hot_host_bytes(fake, "porep-32g", 47 << 30) == (47 << 30, 3 << 30)  # type: ignore[arg-type]


def test_why_no_device_can_prove_names_each_device() -> None:
    """`Engine.unable_to_prove` (health NOT_SERVING, /healthz's 503) holds while no device can prove,
    and names each device's reason: a restart that failed, a Ray node gone."""
    from cuzk.engine.engine import Engine

    pytest.importorskip("ray", reason="the Ray device's reason needs cuzk.engine.ray_executor")
    from cuzk.engine.ray_executor import RayDevice

    class DeadDevice(Device):  # as a LocalDevice whose process is dead and whose restart failed
        @property
        def can_prove(self) -> bool:
            return False

    dead, lost = DeadDevice(DeviceSpec(0, "cuda")), RayDevice(DeviceSpec(1, "cuda"), "f00dcafe" * 4, "10.0.0.7", 0)
    dead.restart_error = "worker process cuzk-device-cuda0 did not start (exit code 1)"
    lost.state, lost.lost_reason = "lost", "node 10.0.0.7 (f00dcafe) left the cluster"
    engine = SimpleNamespace(executor=SimpleNamespace(devices=[dead, lost]))
    why = Engine.unable_to_prove(engine)  # type: ignore[arg-type]
    assert why == ("no device can prove: cuzk-device-cuda0 cannot restart: worker process cuzk-device-cuda0 did "
                   "not start (exit code 1); 10.0.0.7-f00dca:cuzk-device-cuda0 lost: node 10.0.0.7 (f00dcafe) left "
                   "the cluster")
    lost.state = "ready"
    assert Engine.unable_to_prove(engine) is None  # type: ignore[arg-type]
    engine.executor.devices = []
    assert Engine.unable_to_prove(engine) == "no device"  # type: ignore[arg-type]
