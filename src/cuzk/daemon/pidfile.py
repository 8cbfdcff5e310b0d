"""The pid file and process identity: one daemon per state directory, and no mistaken pids.

A pid alone is not an identity: after a crash the pid in a pid file may belong to another program a
day later. A process is therefore named by (pid, start time), the start time being field 22 of
/proc/<pid>/stat in clock ticks since boot, which two processes holding the same pid can never share.
A zombie (exited, not yet reaped) counts as gone: it holds no sockets and no locks.

The running daemon holds `daemon.pid` with an exclusive flock() for its whole life. The kernel drops
the lock when the process dies however it dies, so "can I take the lock" is the authoritative
answer to "is a daemon running here", and a pid file left behind by a killed daemon is simply taken
over (after saying whose it was). The descriptor is close-on-exec, so worker processes never hold it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path

from cuzk.server.address import process_summary

#: /proc/<pid>/stat states of a process that has exited.
_DEAD_STATES = ("Z", "X", "x")


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks since boot) of `pid`, or None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) is in parentheses and may itself contain spaces and parentheses.
    fields = data[data.rindex(b")") + 2:].split()
    return fields[0].decode(), int(fields[19])


def process_start_ticks(pid: int) -> int | None:
    stat = proc_stat(pid)
    return None if stat is None else stat[1]


@dataclass(frozen=True)
class ProcessRef:
    """A process named by pid and start time; `alive` is False once it exited or its pid was reused."""

    pid: int
    start_ticks: int

    @classmethod
    def current(cls) -> ProcessRef:
        ticks = process_start_ticks(os.getpid())
        if ticks is None:  # pragma: no cover - /proc is always there on Linux
            raise RuntimeError("cannot read /proc/self/stat")
        return cls(os.getpid(), ticks)

    @property
    def alive(self) -> bool:
        return self.gone_reason() is None

    def gone_reason(self) -> str | None:
        """None while this very process runs; otherwise why it is not (for messages)."""
        stat = proc_stat(self.pid)
        if stat is None:
            return f"process {self.pid} no longer exists"
        state, ticks = stat
        if ticks != self.start_ticks:
            return (f"pid {self.pid} now belongs to another program ({process_summary(self.pid)}) started after "
                    "the recorded one")
        if state in _DEAD_STATES:
            return f"process {self.pid} has exited (a zombie not yet reaped by its parent)"
        return None

    def signal(self, signum: int) -> bool:
        """Send `signum` if this is still the same process; False if it is gone (nothing was sent)."""
        if not self.alive:
            return False
        try:
            os.kill(self.pid, signum)
        except ProcessLookupError:
            return False
        return True

    def children(self) -> list[ProcessRef]:
        """Its descendants now (worker processes), each named by pid and start time."""
        import psutil

        try:
            procs = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return []
        out = []
        for p in procs:
            ticks = process_start_ticks(p.pid)
            if ticks is not None:
                out.append(ProcessRef(p.pid, ticks))
        return out


def lock_holders(path: Path) -> list[int]:
    """Pids holding a flock() on `path`, from /proc/locks (empty if none, or if it cannot be read)."""
    try:
        st = os.stat(path)
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    pids = []
    for line in lines:
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF" (blocked waiters have a "->" field first)
        if len(parts) < 6 or parts[1] != "FLOCK":
            continue
        try:
            major, minor, inode = parts[5].split(":")
            if (int(major, 16), int(minor, 16), int(inode)) == want:
                pids.append(int(parts[4]))
        except ValueError:
            continue
    return pids


class PidLock:
    """`daemon.pid` held with an exclusive flock() for as long as this object holds it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, wait_s: float = 0.5) -> bool:
        """Take the lock (retrying briefly: a control command may hold it for a moment); False if held."""
        deadline = time.monotonic() + wait_s
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.02)
                continue
            # The previous holder may have unlinked the file between our open and our lock: then the lock is
            # on an orphaned inode and the path is free for someone else. Start over on the current file.
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self.fd = fd
                return True
            os.close(fd)

    @property
    def held(self) -> bool:
        return self.fd is not None

    def previous_pid(self) -> int | None:
        """The pid the file held when we took it (a daemon that died without cleaning up), if any."""
        assert self.fd is not None
        raw = os.pread(self.fd, 64, 0).decode(errors="replace").strip()
        return int(raw) if raw.isdigit() else None

    def write_pid(self, pid: int) -> None:
        assert self.fd is not None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{pid}\n".encode(), 0)
        os.fsync(self.fd)

    def release(self, *, remove: bool = True) -> None:
        """Remove the file (while still holding the lock, so no one can take a file about to vanish) and unlock."""
        if self.fd is None:
            return
        if remove:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        os.close(self.fd)
        self.fd = None


def read_pid(path: Path) -> int | None:
    try:
        raw = path.read_text().strip()
    except OSError:
        return None
    return int(raw) if raw.isdigit() else None
