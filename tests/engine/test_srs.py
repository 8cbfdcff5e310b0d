"""The SRS manager with a recording loader: tiers, references, idle eviction, refusal while in use."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cuzk.engine.memory import BudgetError, MemoryBudget
from cuzk.engine.srs import SrsInUseError, SrsManager, SrsTier, SrsWaitCancelledError, resident_estimate
from cuzk.providers import build_providers


class RecordingLoader:
    """Stands in for the device processes: records what they were told, can be made to fail."""

    def __init__(self, devices: int = 1, host_copies: int | None = None) -> None:
        self.devices = [object() for _ in range(devices)]
        self.host_key_copies = devices if host_copies is None else host_copies
        self.calls: list[tuple] = []
        self.fail = False
        self.pinned: dict[str, int] = {}  #: host bytes its devices pin for a hot key (streaming plans)
        self.file_read: dict[str, int] = {}  #: bytes of a hot key's file its devices still read (GPUs)

    def load_all(self, circuit_id: str, path: str, *, hot: bool) -> float:
        self.calls.append(("load", circuit_id, hot))
        if self.fail:
            raise RuntimeError("device refused")
        return 0.01

    def load(self, device: object, circuit_id: str, path: str, *, hot: bool) -> float:
        self.calls.append(("reload", circuit_id, hot))
        return 0.01

    def unload_all(self, circuit_id: str, tier: str) -> None:
        self.calls.append(("unload", circuit_id, tier))

    def hot_host_bytes(self, circuit_id: str, file_bytes: int) -> tuple[int, int]:
        return self.file_read.get(circuit_id, file_bytes), self.pinned.get(circuit_id, 0)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def manager(params: Path, budget: MemoryBudget, *, min_idle: float = 60.0, devices: int = 1,
            host_copies: int | None = None) -> tuple[SrsManager, RecordingLoader, Clock, list]:
    registry = build_providers(str(params), test_circuits=True)
    loader, clock, made = RecordingLoader(devices, host_copies), Clock(), []
    m = SrsManager(budget, loader, registry.srs_source, made.append, min_idle_s=min_idle, clock=clock)
    budget.evictor = m.evict_idle
    return m, loader, clock, made


def entry(m: SrsManager, circuit_id: str) -> dict:
    return next(e for e in m.snapshot() if e["circuit_id"] == circuit_id)


def test_acquire_makes_hot_and_reserves(debug_params: Path) -> None:
    budget = MemoryBudget(1 << 30)
    m, loader, _, made = manager(debug_params, budget, devices=2)
    lease = m.acquire("mimc-3")
    e = entry(m, "mimc-3")
    path = debug_params / "cuzk-test-mimc-3.params"
    assert e["tier"] == "HOT" and e["ref_count"] == 1 and e["size_bytes"] == path.stat().st_size
    assert e["resident_bytes"] == resident_estimate(path, 2) > 0
    assert budget.used == e["size_bytes"] + e["resident_bytes"]
    assert loader.calls == [("load", "mimc-3", True)] and made == []
    assert m.acquire("mimc-3").load_s == 0.0 and loader.calls == [("load", "mimc-3", True)]  # already hot
    m.release(lease)
    m.release(lease)
    assert entry(m, "mimc-3")["ref_count"] == 0


def test_gpu_devices_reserve_only_the_mapped_file(debug_params: Path) -> None:
    """A GPU backend keeps the hot key in device memory: the host budget holds the mapped file alone
    (the 32GiB PoRep key would otherwise count twice, 95 GB of a 128 GB host, and serialize the pipeline)."""
    budget = MemoryBudget(1 << 30)
    m, _, _, _ = manager(debug_params, budget, devices=2, host_copies=0)
    m.acquire("mimc-3")
    path = debug_params / "cuzk-test-mimc-3.params"
    e = entry(m, "mimc-3")
    assert e["tier"] == "HOT" and e["resident_bytes"] == 0
    assert budget.used == path.stat().st_size
    assert m.held_bytes()["HOT"] == path.stat().st_size


def test_pinned_copies_of_a_streaming_plan_are_held_until_the_key_is_no_longer_hot(debug_params: Path) -> None:
    """A small card's streaming plan pins its streamed bases in host memory: the entry holds those
    bytes against the host budget while hot, and gives them back when the devices drop the key."""
    budget = MemoryBudget(1 << 30)
    m, loader, clock, _ = manager(debug_params, budget, devices=2, host_copies=0, min_idle=0)
    loader.pinned["mimc-3"] = 300 << 20
    m.release(m.acquire("mimc-3"))
    file_bytes = (debug_params / "cuzk-test-mimc-3.params").stat().st_size
    assert entry(m, "mimc-3")["pinned_bytes"] == 300 << 20
    assert budget.used == file_bytes + (300 << 20) == m.held_bytes()["HOT"]
    clock.now += 1
    assert m.evict_idle(1) == 300 << 20 and entry(m, "mimc-3")["tier"] == "WARM"  # hot -> warm frees them
    assert budget.used == file_bytes and entry(m, "mimc-3")["pinned_bytes"] == 0


def test_a_key_hot_on_gpus_holds_only_the_file_they_read_and_maps_it_all_again_when_warm(debug_params: Path) -> None:
    """Once the GPUs hold the key (resident, or pinned where streamed), their proofs read none of the
    file: the entry lets that part of its reservation go. Going back to WARM maps the whole file
    again, so it is done only where it frees more than it takes, and only where the budget can take
    the file back; otherwise the entry goes cold."""
    file_bytes = (debug_params / "cuzk-test-mimc-3.params").stat().st_size
    budget = MemoryBudget(1 << 30)
    m, loader, clock, _ = manager(debug_params, budget, devices=2, host_copies=0, min_idle=0)
    loader.file_read["mimc-3"], loader.pinned["mimc-3"] = 0, 3 * file_bytes
    m.release(m.acquire("mimc-3"))
    e = entry(m, "mimc-3")
    assert (e["tier"], e["mapped_bytes"], e["pinned_bytes"]) == ("HOT", 0, 3 * file_bytes)
    assert budget.used == 3 * file_bytes == m.held_bytes()["HOT"]
    clock.now += 1
    assert m.evict_idle(1) == 2 * file_bytes  # the pinned copies go, the whole file is mapped again
    e = entry(m, "mimc-3")
    assert (e["tier"], e["mapped_bytes"], e["pinned_bytes"]) == ("WARM", file_bytes, 0) and budget.used == file_bytes
    assert loader.calls[-1] == ("unload", "mimc-3", "warm")

    # Resident on the GPUs with nothing pinned: WARM would hold more than HOT, so pressure takes it cold.
    loader.pinned["mimc-3"] = 0
    m.release(m.acquire("mimc-3"))
    assert budget.used == 0 and entry(m, "mimc-3")["mapped_bytes"] == 0
    clock.now += 1
    assert m.evict_idle(1) == 0 and entry(m, "mimc-3")["tier"] == "COLD"
    assert loader.calls[-1] == ("unload", "mimc-3", "cold") and budget.used == 0


def test_a_gpu_key_the_budget_cannot_map_again_goes_cold_instead_of_warm(debug_params: Path) -> None:
    file_bytes = (debug_params / "cuzk-test-mimc-3.params").stat().st_size
    budget = MemoryBudget(1 << 30)
    m, loader, clock, _ = manager(debug_params, budget, host_copies=0, min_idle=0)
    loader.file_read["mimc-3"], loader.pinned["mimc-3"] = 0, 2 * file_bytes
    m.release(m.acquire("mimc-3"))
    clock.now += 1
    budget.try_grow = lambda r, n: False  # type: ignore[method-assign]  # what the pinned copies freed, taken meanwhile
    assert m.evict_idle(1) == 2 * file_bytes and entry(m, "mimc-3")["tier"] == "COLD" and budget.used == 0
    assert loader.calls[-2:] == [("unload", "mimc-3", "warm"), ("unload", "mimc-3", "cold")]


def test_a_replaced_device_s_copies_are_reserved_as_it_reports_them(debug_params: Path) -> None:
    """A device process that was replaced pins its copies again when it gets the hot key back; the
    entry follows what the devices now report where the budget has room (the key is on the device
    already: growth it cannot take is logged, not refused)."""
    file_bytes = (debug_params / "cuzk-test-mimc-3.params").stat().st_size
    budget = MemoryBudget(64 * file_bytes)
    m, loader, _, _ = manager(debug_params, budget, host_copies=0)
    loader.file_read["mimc-3"], loader.pinned["mimc-3"] = 0, 8 * file_bytes
    m.release(m.acquire("mimc-3"))
    assert budget.used == 8 * file_bytes
    # Short of host memory this time, it left a vector unpinned: it reads that from the file.
    loader.file_read["mimc-3"], loader.pinned["mimc-3"] = 3 * file_bytes, 5 * file_bytes
    m.reload_device(loader.devices[0])
    e = entry(m, "mimc-3")
    assert (e["mapped_bytes"], e["pinned_bytes"], budget.used) == (3 * file_bytes, 5 * file_bytes, 8 * file_bytes)
    assert loader.calls[-1] == ("reload", "mimc-3", True)
    loader.pinned["mimc-3"] = 100 * file_bytes  # more than the budget: logged, the reservation as it was
    m.reload_device(loader.devices[0])
    assert entry(m, "mimc-3")["pinned_bytes"] == 5 * file_bytes and budget.used == 8 * file_bytes


def test_pinned_copies_the_budget_cannot_hold_fail_the_load(debug_params: Path) -> None:
    budget = MemoryBudget(64 << 20)
    m, loader, _, _ = manager(debug_params, budget, host_copies=0)
    loader.pinned["mimc-3"] = 1 << 30
    with pytest.raises(BudgetError, match="srs:mimc-3:pinned needs"):
        m.acquire("mimc-3")
    assert budget.used == 0 and entry(m, "mimc-3")["tier"] == "COLD"
    assert loader.calls[-1] == ("unload", "mimc-3", "cold")


def test_in_use_entries_are_never_evicted(debug_params: Path) -> None:
    budget = MemoryBudget(1 << 30)
    m, loader, clock, _ = manager(debug_params, budget, min_idle=0)
    lease = m.acquire("mimc-3")
    clock.now += 3600
    assert m.evict_idle(1 << 40) == 0
    with pytest.raises(SrsInUseError, match="in use by 1 job"):
        m.evict("mimc-3")
    m.release(lease)
    was_loaded, freed = m.evict("mimc-3")
    assert was_loaded and freed > 0 and budget.used == 0 and entry(m, "mimc-3")["tier"] == "COLD"
    assert loader.calls[-1] == ("unload", "mimc-3", "cold")
    assert m.evict("mimc-3") == (False, 0)


def test_pressure_evicts_idle_entries_hot_to_warm_to_cold(debug_params: Path) -> None:
    budget = MemoryBudget(1 << 30)
    m, loader, clock, _ = manager(debug_params, budget, min_idle=300)
    for cid in ("mimc-3", "mimc-4"):
        m.release(m.acquire(cid))
        clock.now += 10
    old, new = entry(m, "mimc-3"), entry(m, "mimc-4")
    assert m.evict_idle(1) == 0  # nothing idle for 5 minutes yet
    clock.now += 295
    freed = m.evict_idle(1)  # only mimc-3 has been idle long enough; demoting it to warm suffices
    assert freed == old["resident_bytes"] and entry(m, "mimc-3")["tier"] == "WARM"
    assert entry(m, "mimc-4")["tier"] == "HOT" and ("unload", "mimc-3", "warm") in loader.calls
    clock.now += 100
    freed = m.evict_idle(1 << 40)  # everything idle goes: warm first for mimc-4, then both to cold
    assert freed == old["size_bytes"] + new["size_bytes"] + new["resident_bytes"]
    assert {e["tier"] for e in m.snapshot()} == {"COLD"} and budget.used == 0
    lease = m.acquire("mimc-3")  # comes back on demand
    assert entry(m, "mimc-3")["tier"] == "HOT" and lease.load_s >= 0


def test_budget_pressure_evicts_through_the_budget(debug_params: Path) -> None:
    m0, _, _, _ = manager(debug_params, MemoryBudget(1 << 30))
    m0.release(m0.acquire("mimc-3"))
    size = sum(entry(m0, "mimc-3")[k] for k in ("size_bytes", "resident_bytes"))
    budget = MemoryBudget(size + 100)
    m, _, clock, _ = manager(debug_params, budget, min_idle=0)
    m.release(m.acquire("mimc-3"))
    clock.now += 1
    got = budget.try_reserve(size, "partition:x")
    assert got is not None and entry(m, "mimc-3")["tier"] == "COLD"


def test_waiting_for_memory_can_be_cancelled(debug_params: Path) -> None:
    budget = MemoryBudget(1 << 20)
    m, _, _, _ = manager(debug_params, budget)
    hog = budget.try_reserve(budget.total, "partition:hog")
    assert hog is not None
    flag = threading.Event()
    threading.Timer(0.2, flag.set).start()
    with pytest.raises(SrsWaitCancelledError):
        m.acquire("mimc-3", cancelled=flag.is_set)
    assert entry(m, "mimc-3")["ref_count"] == 0 and entry(m, "mimc-3")["tier"] == "COLD"


def test_failed_loads_release_everything(debug_params: Path) -> None:
    budget = MemoryBudget(1 << 30)
    m, loader, _, _ = manager(debug_params, budget)
    loader.fail = True
    with pytest.raises(RuntimeError, match="device refused"):
        m.acquire("mimc-3")
    assert budget.used == 0 and entry(m, "mimc-3")["tier"] == "COLD" and entry(m, "mimc-3")["ref_count"] == 0


def test_missing_files_are_materialized_and_preload(tmp_path: Path, debug_params: Path) -> None:
    budget = MemoryBudget(1 << 30)
    m, loader, _, made = manager(tmp_path, budget)

    def generate(source: object) -> None:
        made.append(source)
        (tmp_path / "cuzk-test-mimc-4.params").write_bytes((debug_params / "cuzk-test-mimc-4.params").read_bytes())

    m._materialize = generate
    assert m.preload("mimc-4")[0] is False and len(made) == 1
    assert m.preload("mimc-4") == (True, 0.0) and entry(m, "mimc-4"), "second preload finds it hot"
    m.reload_device(loader.devices[0])
    assert loader.calls[-1] == ("reload", "mimc-4", True)
    assert SrsTier.HOT == 0 and SrsTier.COLD == 2
