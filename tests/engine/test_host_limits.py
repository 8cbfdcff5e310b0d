"""Container-aware limits (`cuzk.config.host`): made-up cgroup v1 and v2 trees under tmp_path bound the
"auto" memory budget and the synthesis processes as a container's or a systemd unit's would."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine.engine_helpers import start_engine

from cuzk.config import config_from_dict, host, mem_available
from cuzk.config import engine as cfg

GIB = 1 << 30


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def v2_tree(root: Path, group: str = "/system.slice/cuzk.service", *, mount_root: str = "/",
            levels: dict[str, dict[str, str]] | None = None) -> Path:
    """A cgroup2 mount at /sys/fs/cgroup with the process in `group`; `levels`: files per group path."""
    _write(root, "proc/self/cgroup", f"0::{group}\n")
    _write(root, "proc/self/mountinfo",
           "22 1 0:21 / / rw - ext4 /dev/sda1 rw\n"
           f"31 22 0:28 {mount_root} /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")
    (root / "sys/fs/cgroup").mkdir(parents=True, exist_ok=True)
    for path, files in (levels or {}).items():
        (root / "sys/fs/cgroup" / path.strip("/")).mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            _write(root, f"sys/fs/cgroup/{path.strip('/')}/{name}", text)
    (root / "sys/fs/cgroup" / group.strip("/")).mkdir(parents=True, exist_ok=True)
    return root


def v1_tree(root: Path, group: str = "/docker/abc", *, levels: dict[str, dict[str, str]] | None = None) -> Path:
    """cgroup v1 memory and cpu,cpuacct hierarchies with the process in `group` in both."""
    _write(root, "proc/self/cgroup", f"5:memory:{group}\n4:cpu,cpuacct:{group}\n1:name=systemd:/\n")
    _write(root, "proc/self/mountinfo",
           "31 22 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
           "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
           "36 31 0:33 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n")
    for path, files in (levels or {}).items():
        for name, text in files.items():
            hierarchy = "memory" if name.startswith("memory.") else "cpu,cpuacct"
            _write(root, f"sys/fs/cgroup/{hierarchy}/{path.strip('/')}/{name}", text)
    for hierarchy in ("memory", "cpu,cpuacct"):
        (root / f"sys/fs/cgroup/{hierarchy}" / group.strip("/")).mkdir(parents=True, exist_ok=True)
    return root


def test_v2_the_tightest_ancestor_applies(tmp_path: Path) -> None:
    root = v2_tree(tmp_path, levels={
        "system.slice": {"memory.max": f"{16 * GIB}\n", "memory.current": f"{10 * GIB}\n",
                         "memory.stat": f"anon 1\ninactive_file {2 * GIB}\n"},
        "system.slice/cuzk.service": {"memory.max": f"{12 * GIB}\n", "memory.current": f"{1 * GIB}\n"},
    })
    limit = host.cgroup_memory(root)
    # The service may take 11 GiB by its own limit, but its slice has only 16 - (10 - 2) = 8 left.
    assert limit is not None and limit.available == 8 * GIB and limit.limit == 16 * GIB and limit.usage == 8 * GIB
    assert limit.source == "cgroup v2 /sys/fs/cgroup/system.slice/memory.max"
    assert host.memory_available(64 * GIB, root) == limit
    assert host.memory_available(4 * GIB, root) == host.MemoryLimit(4 * GIB, "MemAvailable")


def test_v2_unlimited_and_missing_files_are_no_limit(tmp_path: Path) -> None:
    root = v2_tree(tmp_path, levels={"system.slice": {"memory.max": "max\n", "cpu.max": "max 100000\n"}})
    assert host.cgroup_memory(root) is None
    assert host.memory_available(20 * GIB, root) == host.MemoryLimit(20 * GIB, "MemAvailable")
    assert host.cpu_limit(root, cores=16) == host.CpuLimit(16, "cores it may run on")
    assert host.memory_available(None, root) is None


def test_v2_cpu_quota_rounds_up_and_takes_the_tightest(tmp_path: Path) -> None:
    root = v2_tree(tmp_path, levels={"system.slice": {"cpu.max": "800000 100000\n"},
                                     "system.slice/cuzk.service": {"cpu.max": "250000 100000\n"}})
    cpus = host.cpu_limit(root, cores=32)
    assert cpus.cpus == 3
    assert cpus.source == "cgroup v2 /sys/fs/cgroup/system.slice/cuzk.service/cpu.max = 250000/100000"
    assert host.cpu_limit(root, cores=2).cpus == 2  # fewer cores than the quota: the cores


def test_container_namespace_sees_its_group_as_the_root(tmp_path: Path) -> None:
    """Docker with a cgroup namespace: /proc/self/cgroup says "0::/" and the mount is the container's group."""
    root = v2_tree(tmp_path, group="/", levels={"": {"memory.max": f"{4 * GIB}\n", "memory.current": f"{GIB}\n",
                                                     "cpu.max": "200000 100000\n"}})
    assert host.cgroup_memory(root) == host.MemoryLimit(3 * GIB, "cgroup v2 /sys/fs/cgroup/memory.max", 4 * GIB, GIB)
    assert host.cpu_limit(root, cores=64).cpus == 2


def test_mount_root_below_the_hierarchy_root(tmp_path: Path) -> None:
    """A mount of a sub-tree (mountinfo's root field /kubepods/pod1): the group's path is taken relative to it."""
    root = v2_tree(tmp_path, group="/kubepods/pod1/ctr", mount_root="/kubepods/pod1",
                   levels={"ctr": {"memory.max": f"{2 * GIB}\n", "memory.current": "0\n"}})
    assert host.cgroup_memory(root).source == "cgroup v2 /sys/fs/cgroup/ctr/memory.max"  # type: ignore[union-attr]


def test_v1_limits_unlimited_and_quota(tmp_path: Path) -> None:
    root = v1_tree(tmp_path, levels={
        "docker": {"memory.limit_in_bytes": "9223372036854771712\n", "cpu.cfs_quota_us": "-1\n",
                   "cpu.cfs_period_us": "100000\n"},
        "docker/abc": {"memory.limit_in_bytes": f"{6 * GIB}\n", "memory.usage_in_bytes": f"{3 * GIB}\n",
                       "memory.stat": f"cache 5\ntotal_inactive_file {GIB}\n",
                       "cpu.cfs_quota_us": "50000\n", "cpu.cfs_period_us": "100000\n"},
    })
    assert host.cgroup_memory(root) == host.MemoryLimit(
        4 * GIB, "cgroup v1 /sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", 6 * GIB, 2 * GIB)
    cpus = host.cpu_limit(root, cores=8)
    assert cpus.cpus == 1 and "cpu.cfs_quota_us = 50000/100000" in cpus.source


def test_no_mountinfo_reads_the_conventional_place(tmp_path: Path) -> None:
    _write(tmp_path, "proc/self/cgroup", "0::/\n")
    _write(tmp_path, "sys/fs/cgroup/memory.max", f"{5 * GIB}\n")
    _write(tmp_path, "sys/fs/cgroup/memory.current", "0\n")
    assert host.cgroup_memory(tmp_path).available == 5 * GIB  # type: ignore[union-attr]


def test_nothing_readable_is_no_limit(tmp_path: Path) -> None:
    assert host.cgroup_memory(tmp_path) is None
    assert host.cpu_limit(tmp_path, cores=4) == host.CpuLimit(4, "cores it may run on")


def test_this_machine_reads_without_error() -> None:
    """The real /proc and /sys: whatever they hold, the answers are sane."""
    assert host.cpu_limit().cpus >= 1
    limit = host.memory_available(1 << 40)
    assert limit is not None and 0 <= limit.available <= 1 << 40


def test_auto_budget_is_bounded_by_the_cgroup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v2_tree(tmp_path, levels={"system.slice/cuzk.service": {"memory.max": f"{10 * GIB}\n",
                                                            "memory.current": f"{2 * GIB}\n"}})
    monkeypatch.setattr(host, "ROOT", tmp_path)
    monkeypatch.setattr(cfg, "mem_available", lambda: 100 * GIB)
    budget, source = config_from_dict({"memory": {"safety_margin": "1GiB"}}).memory.resolve()
    assert budget == 7 * GIB
    assert source.startswith("auto: cgroup v2 /sys/fs/cgroup/system.slice/cuzk.service/memory.max = 10.0 GiB")
    assert config_from_dict({"memory": {"total_budget": "50GiB"}}).memory.resolve() == (50 * GIB,
                                                                                        "memory.total_budget")


def test_engine_plans_within_the_cgroup(tmp_path: Path, debug_params: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon's engine in a made-up cgroup whose limit is below MemAvailable: its budget is the cgroup's
    room less the margin, its synthesis processes the CPU quota's, and the status says so."""
    available = mem_available()
    assert available is not None and available > 2 * GIB
    limit = available // 2
    v2_tree(tmp_path / "host", levels={"cuzk": {"memory.max": f"{limit}\n", "memory.current": "0\n",
                                                "cpu.max": "100000 100000\n"}}, group="/cuzk")
    monkeypatch.setattr(host, "ROOT", tmp_path / "host")
    engine = start_engine(tmp_path, debug_params, memory={"total_budget": "auto", "safety_margin": "512MiB"})
    try:
        assert engine.budget.total == limit - 512 * (1 << 20) < available
        assert len(engine.synthesis.processes) == 2  # one regular, one for CRITICAL work
        status = engine.status()
        assert status["memory"]["total_bytes"] == engine.budget.total
        assert status["memory"]["budget_source"].startswith("auto: cgroup v2 /sys/fs/cgroup/cuzk/memory.max")
        assert status["synthesis"]["cpus"] == 1 and "cpu.max = 100000/100000" in status["synthesis"]["cpus_source"]
    finally:
        engine.shutdown(5)
