"""One pinned host copy per host of what the device processes read alike: a key's streamed bases.

On a card smaller than a key, the vectors that do not fit are streamed from pinned host memory
(`backend._pinned_bases`). Each device process used to pin a copy of its own: two 16 GiB cards
streaming PoRep-32GiB's 47 GB key pinned 95 GB (docs/memory.md). Here the first process to load a
vector makes a file of it in /dev/shm (tmpfs: memory, not disk), fills it and marks it whole; every
other process of the host maps the same pages and registers them with CUDA (cudaHostRegister), so
the host holds and pins them once while each process may copy from them at full speed.

A holder is a file named by its pid in the copy's directory; the copy is removed when the last
holder releases it, or by the next process that finds every holder dead (a killed device process
leaves its file behind). One lock file for the host serialises making, joining and leaving copies:
a process that finds a copy being made waits for it rather than making its own (a lock per copy
could not be removed with the copy without two processes locking different files of one name).
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import shutil
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil

#: Where the copies live (tmpfs); tests point it elsewhere.
ROOT_ENV = "CUZK_SHARED_PINNED_DIR"
DEFAULT_ROOT = "/dev/shm/cuzk-pinned"


def root() -> Path:
    return Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT)



class SharedHostCopy:
    """A host array shared by this host's processes under `name` (see the module docstring). `made`
    says whether this process filled it (False: it joined a copy another process made)."""

    def __init__(self, name: str, array: np.ndarray, mapping: mmap.mmap, made: bool,
                 unregister: Callable[[int], None] | None) -> None:
        self.name, self.array, self.made = name, array, made
        self.nbytes = int(array.nbytes)
        # A copy dropped unreleased (a backend discarded with its keys loaded, a load that failed half
        # way) leaves all the same. Pages still registered with CUDA once unmapped would fail the next
        # mapping this process gets at that address: cudaHostRegister says "already registered", and a
        # copy into it "invalid argument".
        self._leave = weakref.finalize(self, _leave, name, mapping,
                                       unregister if self.nbytes else None, int(array.ctypes.data))
        self._leave.atexit = False  # the process's end frees it all

    @classmethod
    def open(cls, name: str, shape: tuple[int, ...], dtype: np.dtype, fill: Callable[[np.ndarray], None],
             register: Callable[[int, int], None] | None = None,
             unregister: Callable[[int], None] | None = None) -> SharedHostCopy:
        """The copy named `name`, made here with `fill(array)` when no whole one exists; registered
        with `register(address, nbytes)` (cudaHostRegister) in this process. A copy of another
        shape under that name (a changed key) is an error while its holders live. Whatever raises,
        this process holds nothing of the copy afterwards."""
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        where = root() / name
        with _Locked():
            where.mkdir(exist_ok=True)  # under the lock: a sweep takes a copy with no holder for abandoned
            holders = where / "holders"
            live = _prune(holders)
            data, whole = where / "data", where / "whole"
            if whole.exists() and data.stat().st_size != nbytes:
                if live:
                    raise ValueError(f"shared host copy {name}: {data.stat().st_size} bytes held by processes "
                                     f"{sorted(live)}, {nbytes} asked")
                whole.unlink()
            made = not whole.exists()
            with open(data, "a+b") as f:
                if made:
                    f.truncate(0)
                    f.truncate(nbytes)
                mapping = mmap.mmap(f.fileno(), nbytes)
            array = np.frombuffer(mapping, dtype=dtype, count=nbytes // np.dtype(dtype).itemsize).reshape(shape)
            try:
                if made:
                    fill(array)
                    whole.touch()
                holders.mkdir(exist_ok=True)
                (holders / str(os.getpid())).touch()
            except BaseException:
                del array
                _unmap(mapping)
                raise
        if register is not None and nbytes:
            try:
                register(int(array.ctypes.data), nbytes)
            except BaseException:
                del array
                _leave(name, mapping, None, 0)
                raise
        return cls(name, array, mapping, made, unregister if register is not None else None)

    def release(self) -> None:
        """Leave the copy; the last holder removes it."""
        self.array = np.empty(0, dtype=self.array.dtype)
        self._leave()


def _leave(name: str, mapping: mmap.mmap, unregister: Callable[[int], None] | None, address: int) -> None:
    """This process leaves the copy `name`: its pages unregistered, its holder file gone, its mapping
    closed, and the copy removed when no live holder is left."""
    if unregister is not None:
        unregister(address)
    where = root() / name
    with _Locked():
        (where / "holders" / str(os.getpid())).unlink(missing_ok=True)
        _unmap(mapping)
        if not _prune(where / "holders"):
            shutil.rmtree(where, ignore_errors=True)


def _unmap(mapping: mmap.mmap) -> None:
    with contextlib.suppress(BufferError):  # views of it still live: unmapped once they are gone
        mapping.close()


def made(name: str) -> bool:
    """Whether the copy `name` is there whole (joining it pins nothing more)."""
    return (root() / name / "whole").exists()


def room_for(name: str, nbytes: int) -> bool:
    """Whether the copy `name` is there whole, or there is room to make it: tmpfs pages written past
    its free space kill the writer (SIGBUS), and a container's /dev/shm is often 64 MiB."""
    if made(name):
        return True
    root().mkdir(parents=True, exist_ok=True)
    stat = os.statvfs(root())
    return stat.f_bavail * stat.f_frsize >= nbytes


def held_copies() -> dict[str, int]:
    """The copies on this host and their bytes (for the status and tests)."""
    out = {}
    if root().is_dir():
        for d in root().iterdir():
            if (d / "whole").exists():
                out[d.name] = (d / "data").stat().st_size
    return out


def sweep() -> list[str]:
    """Remove the copies no live process holds (their holders were killed); the names removed. A
    device process sweeps when it starts, so that a killed one's copy lasts until the next start."""
    removed = []
    with _Locked():
        for d in root().iterdir():
            if d.is_dir() and not _prune(d / "holders"):
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d.name)
    return removed


def _prune(holders: Path) -> set[int]:
    """The live holders' pids; dead ones' files removed."""
    live = set()
    if holders.is_dir():
        for f in holders.iterdir():
            if f.name.isdigit() and psutil.pid_exists(int(f.name)):
                live.add(int(f.name))
            else:
                f.unlink(missing_ok=True)
    return live


class _Locked:
    """The host's lock on its copies. A copy's directory is made only while holding it: one made
    before would have no holder yet, and another process's sweep would remove it under the maker."""

    def __init__(self) -> None:
        root().mkdir(parents=True, exist_ok=True)
        self._path = root() / ".lock"

    def __enter__(self) -> None:
        self._file = open(self._path, "a")
        fcntl.flock(self._file, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._file, fcntl.LOCK_UN)
        self._file.close()
