"""The memory and CPUs this process may use, as its control groups bound them.

In a container (Docker `--memory`/`--cpus`, Kubernetes limits) or a systemd unit (`MemoryMax=`,
`CPUQuota=`), /proc/meminfo and the core count are the host's: a daemon planning with them is
killed by the OOM killer, or runs more synthesis processes than it has CPU time for. So the
memory a daemon may still take is the least of MemAvailable and, for every cgroup from the
process's own up to the hierarchy's root that sets a limit, that limit less what the group uses
(less its inactive file pages, which the kernel reclaims before it kills: what `docker stats`
subtracts too); its CPUs are the least of the cores it may run on and every such group's quota
(rounded up: a quota of 1.5 CPUs still runs two processes, at three quarters of the speed).

Both cgroup versions are read, v2 (`memory.max`, `memory.current`, `cpu.max`) and v1
(`memory.limit_in_bytes`, `memory.usage_in_bytes`, `cpu.cfs_quota_us`/`cpu.cfs_period_us`),
wherever /proc/self/mountinfo says they are mounted (on hybrid hosts both are), else at
/sys/fs/cgroup. Every path is read under `ROOT` (tests build made-up trees there); a file that is
missing or unreadable is a level without that limit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

#: Where /proc and /sys are read from.
ROOT = Path("/")
#: A v1 limit at least this large means none (the kernel writes "unlimited" as 2^63 rounded down to a page).
_V1_UNLIMITED = 1 << 62


@dataclass(frozen=True)
class MemoryLimit:
    """Bytes this process may still take, and where that figure comes from."""

    available: int
    source: str  #: "MemAvailable" or "cgroup v2 /sys/fs/cgroup/…/memory.max"
    limit: int | None = None  #: the cgroup's limit (None: MemAvailable applies)
    usage: int | None = None  #: what the cgroup uses that the kernel would not reclaim

    def describe(self) -> str:
        if self.limit is None:
            return self.source
        return (f"{self.source} = {self.limit / (1 << 30):.1f} GiB, {self.usage / (1 << 30):.1f} GiB used "  # type: ignore[operator]
                "(less inactive file pages)")


@dataclass(frozen=True)
class CpuLimit:
    """CPUs this process may use, and where that figure comes from."""

    cpus: int
    source: str  #: "cores it may run on" or "cgroup v2 /sys/fs/cgroup/…/cpu.max = 200000/100000"


@dataclass(frozen=True)
class _Hierarchy:
    version: int  #: 1 or 2
    mount: PurePosixPath  #: where it is mounted, as the process sees it
    leaf: PurePosixPath  #: the process's own group, under `mount`


def _read(root: Path, path: PurePosixPath | str) -> str | None:
    try:
        return (root / str(path).lstrip("/")).read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _own_groups(root: Path) -> dict[str, str]:
    """The process's group per hierarchy: "" (v2) or each v1 controller name -> its path."""
    groups: dict[str, str] = {}
    for line in (_read(root, "proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if parts[0] == "0" and not controllers:
            groups[""] = path
        for controller in filter(None, controllers.split(",")):
            groups[controller] = path
    return groups


def _mounts(root: Path) -> list[tuple[str, PurePosixPath, PurePosixPath, set[str]]]:
    """(fstype, mount root, mount point, super options) of every cgroup mount in mountinfo."""
    mounts = []
    for line in (_read(root, "proc/self/mountinfo") or "").splitlines():
        pre, sep, post = line.partition(" - ")
        fields, tail = pre.split(), post.split()
        if not sep or len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        point = fields[4].replace("\\040", " ")
        mounts.append((tail[0], PurePosixPath(fields[3]), PurePosixPath(point), set(tail[2].split(","))))
    return mounts


def _hierarchy(root: Path, controller: str) -> list[_Hierarchy]:
    """Where `controller` ("memory" or "cpu") is for this process: the v2 hierarchy if it offers the
    controller, and the v1 one that has it."""
    groups, found = _own_groups(root), []
    mounts = _mounts(root)
    if not mounts:  # no mountinfo: the conventional places
        mounts = [("cgroup2", PurePosixPath("/"), PurePosixPath("/sys/fs/cgroup"), set()),
                  ("cgroup", PurePosixPath("/"), PurePosixPath(f"/sys/fs/cgroup/{controller}"), {controller})]
    for fstype, mount_root, point, options in mounts:
        if fstype == "cgroup2" and "" in groups:
            found.append(_Hierarchy(2, point, _leaf(root, point, mount_root, groups[""])))
        elif fstype == "cgroup" and controller in options and controller in groups:
            found.append(_Hierarchy(1, point, _leaf(root, point, mount_root, groups[controller])))
    return found


def _leaf(root: Path, point: PurePosixPath, mount_root: PurePosixPath, group: str) -> PurePosixPath:
    """The directory of `group` under a mount of the hierarchy from `mount_root`; the mount point when
    it is not there (a container's namespace shows its own group as the root)."""
    path = PurePosixPath(group)
    if path.is_relative_to(mount_root):
        leaf = point / path.relative_to(mount_root)
        if (root / str(leaf).lstrip("/")).is_dir():
            return leaf
    return point


def _levels(h: _Hierarchy) -> list[PurePosixPath]:
    """The process's group and its ancestors up to the mount, innermost first."""
    levels = [h.leaf]
    while levels[-1] != h.mount and levels[-1].is_relative_to(h.mount):
        levels.append(levels[-1].parent)
    return levels


def _int(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _stat(root: Path, path: PurePosixPath, key: str) -> int:
    for line in (_read(root, path) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return _int(value) or 0
    return 0


def cgroup_memory(root: Path | None = None) -> MemoryLimit | None:
    """The cgroup level whose limit leaves the least to take (None: no level sets one)."""
    root = ROOT if root is None else root
    tightest: MemoryLimit | None = None
    for h in _hierarchy(root, "memory"):
        for level in _levels(h):
            if h.version == 2:
                limit_file = level / "memory.max"
                limit = _int(_read(root, limit_file))  # "max" is no limit: None
                usage = _int(_read(root, level / "memory.current"))
                inactive = _stat(root, level / "memory.stat", "inactive_file")
            else:
                limit_file = level / "memory.limit_in_bytes"
                limit = _int(_read(root, limit_file))
                limit = None if limit is None or limit >= _V1_UNLIMITED else limit
                usage = _int(_read(root, level / "memory.usage_in_bytes"))
                inactive = _stat(root, level / "memory.stat", "total_inactive_file")
            if limit is None:
                continue
            held = max(0, (usage or 0) - inactive)
            candidate = MemoryLimit(max(0, limit - held), f"cgroup v{h.version} {limit_file}", limit, held)
            if tightest is None or candidate.available < tightest.available:
                tightest = candidate
    return tightest


def memory_available(meminfo: int | None, root: Path | None = None) -> MemoryLimit | None:
    """What this process may still take: `meminfo` (MemAvailable, None if unknown) bounded by the
    tightest cgroup limit. None when neither is known."""
    group = cgroup_memory(root)
    if group is not None and (meminfo is None or group.available < meminfo):
        return group
    return None if meminfo is None else MemoryLimit(meminfo, "MemAvailable")


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask; all of them where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_limit(root: Path | None = None, cores: int | None = None) -> CpuLimit:
    """The CPUs this process may use: `cores` (default: `usable_cores()`) bounded by the tightest CPU
    quota of its cgroups."""
    root = ROOT if root is None else root
    cores = usable_cores() if cores is None else cores
    best = CpuLimit(cores, "cores it may run on")
    for h in _hierarchy(root, "cpu"):
        for level in _levels(h):
            if h.version == 2:
                quota_file = level / "cpu.max"
                fields = (_read(root, quota_file) or "").split()
                quota = _int(fields[0]) if fields else None
                period = _int(fields[1]) if len(fields) > 1 else 100_000
            else:
                quota_file = level / "cpu.cfs_quota_us"
                quota = _int(_read(root, quota_file))
                period = _int(_read(root, level / "cpu.cfs_period_us"))
            if quota is None or quota <= 0 or not period:
                continue
            cpus = max(1, -(-quota // period))
            if cpus < best.cpus:
                best = CpuLimit(cpus, f"cgroup v{h.version} {quota_file} = {quota}/{period}")
    return best
